//! The worker across a lost connection and at shutdown: a lost consumer is
//! noticed with every job slot busy, a shutdown settles what it started,
//! and a deleted dead-letter queue comes back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::fault::chaos;
use crate::fault::scenario::fault_queue;
use crate::support::{Broker, within};

fault_queue!(BusyQueues, BusyJob, "busy", |c| c.prefetch(4));
fault_queue!(StopQueues, StopJob, "shutdown", |c| c.prefetch(2));
fault_queue!(DeadQueues, DeadJob, "dead-gone", |c| c.prefetch(4));

/// Polls `done` every 20 ms until it holds, failing after the harness's bound.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    within(what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

async fn backend(broker: &Broker, label: &str) -> Arc<RabbitMqBackend> {
    let options =
        broker.isolate(RabbitMqOptions::default().connection_name(broker.connection_name(label)));
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(&broker.url, options),
    )
    .await
    .expect("connects");
    Arc::new(backend)
}

/// Consumers of `queue` the broker lists.
async fn consumers(queue: &str) -> Option<u32> {
    let listing = chaos::ctl(
        None,
        &[
            "list_queues",
            "name",
            "consumers",
            "-q",
            "--no-table-headers",
        ],
    )
    .await
    .ok()?;
    listing.lines().find_map(|line| {
        let (name, count) = line.split_once('\t')?;
        (name == queue).then(|| count.trim().parse().ok())?
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_noticed_while_every_job_slot_is_busy() {
    let broker = broker!("a_lost_connection_is_noticed_while_every_job_slot_is_busy");
    let q = BusyQueues::Work.name();
    broker.track(q);
    broker.track(&format!("{q}.dead"));
    let backend = backend(&broker, "busy-worker").await;
    let producer = Producer::<BusyQueues, _>::new(Arc::clone(&backend))
        .await
        .unwrap();

    let release = Arc::new(AtomicBool::new(false));
    let runs: Arc<Mutex<Vec<(u32, bool)>>> = Arc::default();
    let (gate, log) = (Arc::clone(&release), Arc::clone(&runs));
    let worker = Worker::<BusyQueues, _>::builder(Arc::clone(&backend))
        .handler(handler_fn(move |job: BusyJob, ctx: JobContext| {
            let (gate, log) = (Arc::clone(&gate), Arc::clone(&log));
            async move {
                use crate::fault::scenario::Numbered as _;
                log.lock().unwrap().push((job.number(), ctx.redelivered()));
                while !gate.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok::<(), JobError>(())
            }
        }))
        .concurrency(1)
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    use crate::fault::scenario::Numbered as _;
    producer.enqueue(&BusyJob::numbered(7)).await.unwrap();
    wait_for("the job to start", || handle.in_flight() == 1).await;

    // The broker drops the connection while the only slot is busy.
    broker
        .close_connection(&broker.connection_name("busy-worker"))
        .await;
    within(
        "the worker to consume again with its slot still busy",
        async {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if backend.is_connected() && consumers(q).await == Some(1) {
                    return;
                }
            }
        },
    )
    .await;
    assert_eq!(handle.in_flight(), 1, "the first run is still going");

    // The first run ends on a dead channel: its ack cannot count. The broker
    // had requeued the job; the worker runs it again, redelivered.
    release.store(true, Ordering::Release);
    wait_for("the redelivered run to settle", || {
        handle.jobs_settled() == 1 && handle.settle_failures() == 1
    })
    .await;
    assert_eq!(*runs.lock().unwrap(), vec![(7, false), (7, true)]);
    handle.shutdown();
    within("run", running)
        .await
        .unwrap()
        .expect("run ends cleanly");
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    within("close", backend.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_settles_every_job_it_started_and_hands_back_the_rest() {
    let broker = broker!("a_shutdown_settles_every_job_it_started_and_hands_back_the_rest");
    let q = StopQueues::Work.name();
    broker.track(q);
    broker.track(&format!("{q}.dead"));
    let backend = backend(&broker, "stop-worker").await;
    let producer = Producer::<StopQueues, _>::new(Arc::clone(&backend))
        .await
        .unwrap();
    use crate::fault::scenario::Numbered as _;
    for n in 0..6 {
        producer.enqueue(&StopJob::numbered(n)).await.unwrap();
    }

    let worker_for = |log: Arc<Mutex<Vec<u32>>>, pause: Duration| {
        Worker::<StopQueues, _>::builder(Arc::clone(&backend))
            .handler(handler_fn(move |job: StopJob, _ctx: JobContext| {
                let log = Arc::clone(&log);
                async move {
                    tokio::time::sleep(pause).await;
                    log.lock().unwrap().push(job.number());
                    Ok::<(), JobError>(())
                }
            }))
            .concurrency(1)
            .shutdown_timeout(Duration::from_secs(10))
    };
    let first: Arc<Mutex<Vec<u32>>> = Arc::default();
    let worker = worker_for(Arc::clone(&first), Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    // One job runs, the next is already delivered (prefetch 2) when the
    // shutdown comes.
    wait_for("a job to start", || handle.jobs_started() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.shutdown();
    within("run after the shutdown", running)
        .await
        .unwrap()
        .expect("run ends cleanly");
    assert_eq!(
        handle.jobs_started(),
        handle.jobs_settled(),
        "a started job was abandoned"
    );
    assert_eq!(handle.settle_failures(), 0);
    let done_first = first.lock().unwrap().clone();
    assert!(!done_first.is_empty());

    // A second worker on the same backend gets everything else, and nothing
    // the first one finished comes back.
    let second: Arc<Mutex<Vec<u32>>> = Arc::default();
    let worker = worker_for(Arc::clone(&second), Duration::ZERO)
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    let expected = 6 - done_first.len();
    wait_for("the second worker to finish the rest", || {
        second.lock().unwrap().len() >= expected
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();
    let mut all: Vec<u32> = done_first
        .iter()
        .chain(second.lock().unwrap().iter())
        .copied()
        .collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..6).collect::<Vec<_>>(),
        "first {done_first:?}, second {:?}",
        second.lock().unwrap()
    );
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    within("close", backend.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_dead_letter_queue_comes_back() {
    let broker = broker!("a_deleted_dead_letter_queue_comes_back");
    let q = DeadQueues::Work.name();
    let dead = format!("{q}.dead");
    broker.track(q);
    broker.track(&dead);
    let backend = backend(&broker, "dead-worker").await;
    let producer = Producer::<DeadQueues, _>::new(Arc::clone(&backend))
        .await
        .unwrap();
    let worker = Worker::<DeadQueues, _>::builder(Arc::clone(&backend))
        .handler(handler_fn(|_: DeadJob, _ctx: JobContext| async {
            Err::<(), JobError>(JobError::fatal("this job always fails"))
        }))
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    // An operator deletes q.dead; then a malformed body and a failing job arrive.
    broker.delete_raw(&dead).await;
    broker
        .publish_raw(q, b"not an envelope", lapin::BasicProperties::default())
        .await;
    use crate::fault::scenario::Numbered as _;
    producer.enqueue(&DeadJob::numbered(1)).await.unwrap();

    within("q.dead to be declared again", async {
        while !broker.exists(&dead).await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    broker.wait_ready(&dead, 2).await;
    // Settled for good: nothing loops back into the work queue.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    assert_eq!(broker.ready(&dead).await, 2);
    assert!(
        handle.jobs_started() <= 1,
        "the failing job ran {} times",
        handle.jobs_started()
    );
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();
    within("close", backend.close()).await.unwrap();
}
