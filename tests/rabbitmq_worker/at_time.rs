//! Jobs enqueued for a time of the wall clock: never run before it, and at
//! once when the time has passed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use queuey::EnqueueOptions;
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqOptions;

use crate::scenario::{backend, wait_for};
use crate::support::within;

scenario!(AtQueues, AtJob, "at_time", |c| c.prefetch(8));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_at_a_time_never_runs_before_it_and_a_past_time_runs_at_once() {
    let broker =
        broker!("a_job_enqueued_at_a_time_never_runs_before_it_and_a_past_time_runs_at_once");
    let q = AtQueues::Work.name();
    for name in [q, &format!("{q}.dead"), &format!("{q}.suspect")] {
        broker.track(name);
    }
    let backend = backend(&broker, "at-time", RabbitMqOptions::default()).await;
    let producer = Producer::<AtQueues, _>::new(backend.clone())
        .await
        .expect("declared");
    let ran: Arc<Mutex<Vec<(u32, SystemTime)>>> = Arc::default();
    let log = Arc::clone(&ran);
    let worker = Worker::<AtQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |job: AtJob, _: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((job.n, SystemTime::now()));
                Ok::<(), JobError>(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    // Due times a few seconds ahead (some not on a whole second), one in
    // the past, and one through the options.
    let now = SystemTime::now();
    let due: Vec<(u32, SystemTime)> = vec![
        (1, now + Duration::from_millis(2_500)),
        (2, now + Duration::from_millis(1_250)),
        (3, now - Duration::from_secs(3_600)),
        (4, now + Duration::from_millis(3_700)),
    ];
    for (n, at) in &due[..3] {
        producer.enqueue_at(&AtJob { n: *n }, *at).await.unwrap();
    }
    let (n, at) = due[3];
    producer
        .enqueue_with(&AtJob { n }, EnqueueOptions::default().run_at(at))
        .await
        .unwrap();
    for hold in broker.queues_starting_with(&format!("{q}.deferred.")).await {
        broker.track(&hold);
    }

    wait_for("four jobs", || handle.jobs_settled() == 4).await;
    let ran = ran.lock().unwrap().clone();
    for (n, at) in &due {
        let (_, when) = ran.iter().find(|(m, _)| m == n).expect("ran");
        let early = at.duration_since(*when).unwrap_or_default();
        assert!(early.is_zero(), "job {n} ran {early:?} before its time");
        let late = when.duration_since(*at).unwrap_or_default();
        if *n == 3 {
            // The past time: enqueued for now, so it ran first.
            assert_eq!(ran[0].0, 3, "{ran:?}");
        } else {
            assert!(late < Duration::from_secs(15), "job {n} ran {late:?} late");
        }
    }
    handle.shutdown();
    within("the worker stops", running)
        .await
        .unwrap()
        .expect("a clean stop");
    let _ = backend.close().await;
}
