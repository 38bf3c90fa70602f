//! Retry, exhaustion and deferral through a worker on RabbitMQ.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuey::job::Envelope;
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqOptions;
use queuey::retry::{Backoff, RetryPolicy};

use crate::scenario::{backend, wait_for};
use crate::support::{header, within};

scenario!(FlakyQueues, FlakyJob, "flaky", |c| c.prefetch(4).retry(
    RetryPolicy::new(
        3,
        Backoff::fixed(std::time::Duration::from_secs(1)).unwrap()
    )
    .unwrap()
));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_waits_in_a_hold_queue_and_succeeds_on_retry() {
    let broker = broker!("a_failing_job_waits_in_a_hold_queue_and_succeeds_on_retry");
    let q = FlakyQueues::Work.name();
    let hold = format!("{q}.deferred.quorum.1000");
    for name in [q, &format!("{q}.dead"), &hold] {
        broker.track(name);
    }
    let backend = backend(&broker, "flaky", RabbitMqOptions::default()).await;
    let calls: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let log = Arc::clone(&calls);
    let worker = Worker::<FlakyQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: FlakyJob, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((ctx.attempt(), Instant::now()));
                if ctx.attempt() < 3 {
                    return Err(JobError::retryable("upstream 503"));
                }
                Ok(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    let producer = Producer::<FlakyQueues, _>::new(backend.clone())
        .await
        .unwrap();
    producer.enqueue(&FlakyJob { n: 1 }).await.unwrap();
    wait_for("the first attempt", || !calls.lock().unwrap().is_empty()).await;
    // The retry waits in a hold queue named after its delay.
    wait_for("the first settle", || handle.jobs_settled() >= 1).await;
    assert!(
        broker.exists(&hold).await,
        "{hold} exists while the retry waits"
    );
    wait_for("three attempts", || handle.jobs_settled() == 3).await;

    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), vec![1, 2, 3]);
    for pair in calls.windows(2) {
        let waited = pair[1].1 - pair[0].1;
        assert!(
            waited >= Duration::from_secs(1),
            "released early: {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(10),
            "released very late: {waited:?}"
        );
    }
    assert_eq!(handle.settle_failures(), 0);
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    assert_eq!(
        broker.ready_and_unacked(&format!("{q}.dead")).await,
        Some((0, 0))
    );
    backend.close().await.unwrap();
}

scenario!(DoomedQueues, DoomedJob, "doomed", |c| c.retry(
    RetryPolicy::new(
        2,
        Backoff::fixed(std::time::Duration::from_millis(500)).unwrap()
    )
    .unwrap()
));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_exhausted_land_in_q_dead_with_their_headers() {
    let broker = broker!("attempts_exhausted_land_in_q_dead_with_their_headers");
    let q = DoomedQueues::Work.name();
    let dead = format!("{q}.dead");
    for name in [q, &dead, &format!("{q}.deferred.500")] {
        broker.track(name);
    }
    let options = RabbitMqOptions::default().retry_granularity(Duration::from_millis(100));
    let backend = backend(&broker, "doomed", options).await;
    let worker = Worker::<DoomedQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: DoomedJob, _: JobContext| async {
            Err::<(), _>(JobError::retryable("upstream 503"))
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    let producer = Producer::<DoomedQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let id = producer.enqueue(&DoomedJob { n: 7 }).await.unwrap();
    wait_for("two attempts settled", || handle.jobs_settled() == 2).await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();

    let message = broker.get(&dead).await.expect("a dead letter");
    assert_eq!(
        header(&message, "x-death-reason").as_deref(),
        Some("attempts exhausted (2 of 2): upstream 503")
    );
    assert_eq!(header(&message, "x-original-queue").as_deref(), Some(q));
    assert_eq!(header(&message, "x-attempts").as_deref(), Some("i64:2"));
    let envelope = Envelope::decode(&message.delivery.data).expect("the envelope, verbatim");
    assert_eq!((envelope.job_id, envelope.attempt), (id, 2));
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    backend.close().await.unwrap();
}

scenario!(LimitedQueues, LimitedJob, "limited", |c| c);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_deferred_at_the_top_priority_without_spending_an_attempt() {
    let broker = broker!("a_429_is_deferred_at_the_top_priority_without_spending_an_attempt");
    let q = LimitedQueues::Work.name();
    for name in [
        q.to_owned(),
        format!("{q}.dead"),
        format!("{q}.deferred.1000"),
    ] {
        broker.track(&name);
    }
    let backend = backend(&broker, "limited", RabbitMqOptions::default()).await;
    // (attempt, deferrals, priority, when) of each call.
    type Seen = Vec<(u32, u32, u8, Instant)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let log = Arc::clone(&seen);
    let worker = Worker::<LimitedQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: LimitedJob, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((
                    ctx.attempt(),
                    ctx.deferrals(),
                    ctx.priority(),
                    Instant::now(),
                ));
                if ctx.deferrals() == 0 {
                    return Err(JobError::deferred_msg(Duration::from_millis(700), "429"));
                }
                Ok(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    Producer::<LimitedQueues, _>::new(backend.clone())
        .await
        .unwrap()
        .enqueue(&LimitedJob { n: 1 })
        .await
        .unwrap();
    wait_for("the deferral and the second run", || {
        handle.jobs_settled() == 2
    })
    .await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!((seen[0].0, seen[0].1, seen[0].2), (1, 0, 0));
    // Parked in the 1 s hold, released when due: after the 700 ms asked,
    // never early.
    assert_eq!((seen[1].0, seen[1].1, seen[1].2), (1, 1, 10));
    assert!(seen[1].3 - seen[0].3 >= Duration::from_millis(700));
    backend.close().await.unwrap();
}

scenario!(DroppedQueues, DroppedJob, "dropped", |c| c);

/// The broker drops the worker's connection: the worker keeps running on
/// the backend's next connection and handles a job enqueued afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_keeps_running_when_the_connection_drops() {
    let broker = broker!("the_worker_keeps_running_when_the_connection_drops");
    let q = DroppedQueues::Work.name();
    broker.track(q);
    broker.track(&format!("{q}.dead"));
    let backend = backend(&broker, "dropped", RabbitMqOptions::default()).await;
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&handled);
    let worker = Worker::<DroppedQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |job: DroppedJob, _: JobContext| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(job.n);
                Ok::<(), JobError>(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    wait_for("the consumer", || backend.is_connected()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    broker
        .close_connection(&broker.connection_name("dropped"))
        .await;

    let producer = Producer::<DroppedQueues, _>::new_undeclared(backend.clone());
    within(
        "enqueue after the drop",
        producer.enqueue(&DroppedJob { n: 7 }),
    )
    .await
    .expect("the enqueue waits for the reconnect");
    wait_for("the job after the drop", || {
        handled.lock().unwrap().contains(&7)
    })
    .await;
    assert!(!running.is_finished(), "the worker is still running");
    assert!(backend.is_connected());
    handle.shutdown();
    within("run", running).await.unwrap().expect("a clean stop");
}

scenario!(BusyQueues, BusyJob, "busy", |c| c.prefetch(200));

/// A job's acknowledgement is handed to its channel's writer and the job
/// ends before it is sent; `run` returns only once every one is out, so a
/// process that stops right after it (its runtime gone, its backend never
/// closed) leaves none of its jobs to be delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_returns_with_every_acknowledgement_sent() {
    let broker = broker!("run_returns_with_every_acknowledgement_sent");
    let q = BusyQueues::Work.name();
    for name in [q, &format!("{q}.dead")] {
        broker.track(name);
    }
    const JOBS: u64 = 2_000;
    // The worker's process: a runtime of its own, shut down the moment
    // `run` returns, which ends every task it had and drops the connection.
    let process = async {
        let backend = backend(&broker, "busy", RabbitMqOptions::default()).await;
        let producer = Producer::<BusyQueues, _>::new(backend.clone())
            .await
            .unwrap();
        let jobs: Vec<BusyJob> = (0..JOBS as u32).map(|n| BusyJob { n }).collect();
        for enqueued in producer.enqueue_batch(&jobs).await {
            enqueued.unwrap();
        }
        let worker = Worker::<BusyQueues, _>::builder(backend.clone())
            .concurrency(200)
            .handler(handler_fn(|_: BusyJob, _: JobContext| async {
                Ok::<(), JobError>(())
            }))
            .build()
            .await
            .expect("built");
        let handle = worker.handle();
        let running = tokio::spawn(worker.run());
        wait_for("every job settled", || handle.jobs_settled() == JOBS).await;
        handle.shutdown();
        within("run", running).await.unwrap().unwrap();
        handle.settle_failures()
    };
    let settle_failures = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .unwrap();
                    let failures = runtime.block_on(process);
                    runtime.shutdown_background();
                    failures
                })
                .join()
                .unwrap()
        })
    });
    assert_eq!(settle_failures, 0);
    within("the connection to go", async {
        loop {
            let (ready, unacked) = broker.ready_and_unacked(q).await.unwrap_or_default();
            assert_eq!(ready, 0, "jobs came back to the queue");
            if unacked == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}
