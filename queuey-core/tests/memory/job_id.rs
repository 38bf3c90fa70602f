//! A job id chosen by the caller stays the job's through holds, deferrals
//! and dead letters.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Backend;

use queuey_core::{Disposition, EnqueueOptions, Producer, Queues, Uuid};

use queuey_core::memory::MemoryBackend;

use crate::support::{Task, TestQueues, next};

#[tokio::test(start_paused = true)]
async fn a_chosen_job_id_survives_retry_deferral_and_dead_letter() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let chosen = Uuid::from_u128(42);
    let id = producer
        .enqueue_with(&Task { n: 1 }, EnqueueOptions::default().job_id(chosen))
        .await
        .unwrap();
    assert_eq!(id, chosen);

    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(d.envelope().job_id, chosen);
    d.settle(Disposition::Retry {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    assert_eq!((d.envelope().job_id, d.envelope().attempt), (chosen, 2));
    d.settle(Disposition::Defer {
        delay: Duration::from_secs(1),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    assert_eq!((d.envelope().job_id, d.envelope().deferrals), (chosen, 1));
    d.settle(Disposition::DeadLetter {
        reason: "done".into(),
    })
    .await
    .unwrap();
    let dead = backend.dead_letters("test.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].envelope().unwrap().job_id, chosen);
}

#[tokio::test(start_paused = true)]
async fn without_a_chosen_id_each_job_gets_a_fresh_one() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let a = producer
        .enqueue_with(&Task { n: 1 }, EnqueueOptions::default())
        .await
        .unwrap();
    let b = producer
        .enqueue_with(&Task { n: 2 }, EnqueueOptions::default())
        .await
        .unwrap();
    assert_ne!(a, b);
    assert_eq!(a.get_version_num(), 4);
}
