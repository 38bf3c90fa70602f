//! A cool-down across jobs on the real broker: 50 jobs of a rate-limited key
//! and 50 of another; one 429 makes the rest of its key wait in a hold
//! queue without calling the API, while the other key's jobs run at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuey::handler::JobRequest;
use queuey::layers::cooldown::CooldownLayer;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use tower::ServiceBuilder;

use crate::scenario::wait_for;
use crate::support::within;

scenario!(CoolQueues, CoolJob, "cooldown", |c| c.prefetch(1));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_429_holds_back_its_key_and_no_other() {
    let broker = broker!("one_429_holds_back_its_key_and_no_other");
    let q = CoolQueues::Work.name();
    for name in [
        q.to_owned(),
        format!("{q}.dead"),
        format!("{q}.deferred.1000"),
        format!("{q}.deferred.2000"),
        format!("{q}.deferred.3000"),
        format!("{q}.deferred.4000"),
    ] {
        broker.track(&name);
    }
    let options =
        broker.isolate(RabbitMqOptions::default().connection_name(broker.connection_name("cool")));
    let backend = Arc::new(
        within(
            "connect",
            RabbitMqBackend::with_options(&broker.url, options),
        )
        .await
        .unwrap(),
    );
    let told = Arc::new(AtomicBool::new(false));
    // (n, when) of every call of the handler.
    let calls: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let log = Arc::clone(&calls);
    let worker = Worker::<CoolQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |job: CoolJob, _: JobContext| {
            let (log, told) = (Arc::clone(&log), Arc::clone(&told));
            async move {
                log.lock().unwrap().push((job.n, Instant::now()));
                if job.n < 50 && !told.swap(true, Ordering::SeqCst) {
                    return Err(JobError::deferred_msg(Duration::from_secs(4), "429"));
                }
                Ok(())
            }
        }))
        .layer(
            ServiceBuilder::new()
                .layer(CooldownLayer::new(|r: &JobRequest<CoolJob>| {
                    Some(r.job().n < 50)
                }))
                .layer(DeferOn429::new()),
        )
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    let producer = Producer::<CoolQueues, _>::new_undeclared(backend.clone());
    // Interleaved: slow 0, fast 50, slow 1, fast 51, ...
    for n in 0..50 {
        producer.enqueue(&CoolJob { n }).await.unwrap();
        producer.enqueue(&CoolJob { n: n + 50 }).await.unwrap();
    }
    wait_for("every job done", || handle.jobs_settled() >= 150).await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();

    let calls = calls.lock().unwrap().clone();
    let slow: Vec<_> = calls.iter().filter(|c| c.0 < 50).collect();
    let fast: Vec<_> = calls.iter().filter(|c| c.0 >= 50).collect();
    assert_eq!(fast.len(), 50, "each other job ran once");
    assert_eq!(slow.len(), 51, "one 429, then each of the 50 once");
    let told_at = slow[0].1;
    for (n, at) in &slow[1..] {
        assert!(
            *at >= told_at + Duration::from_secs(4),
            "job {n} called the API {:?} after the 429, inside the cool-down",
            *at - told_at
        );
    }
    // The other key did not wait for the cool-down: all of it ran before the
    // rate-limited jobs came back.
    let last_fast = fast.iter().map(|c| c.1).max().unwrap();
    assert!(last_fast < told_at + Duration::from_secs(4));
    backend.close().await.unwrap();
}
