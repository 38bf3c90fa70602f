//! Pauses and cancellations obeyed by a running worker.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::control::{CANCELLED_REASON, CancelFilter};
use queuey_core::memory::MemoryBackend;
use queuey_core::{JobContext, JobError, JobHandler, handler_fn};
use queuey_tower::Worker;

use crate::support::{MixedA, Single, Task, TestQueues, producer, spawn, wait_until};

/// Records which jobs ran.
#[derive(Clone, Default)]
struct Ledger(Arc<Mutex<Vec<u32>>>);

impl Ledger {
    fn ran(&self) -> Vec<u32> {
        let mut ran = self.0.lock().unwrap().clone();
        ran.sort_unstable();
        ran
    }
}

impl JobHandler for Ledger {
    type Job = Task;
    async fn handle(&self, job: Task, _ctx: JobContext) -> Result<(), JobError> {
        self.0.lock().unwrap().push(job.n);
        Ok(())
    }
}

fn singles(ledger: &Ledger) -> impl JobHandler<Job = Single> + use<> {
    let ledger = ledger.clone();
    handler_fn(move |job: Single, _ctx: JobContext| {
        let ledger = ledger.clone();
        async move {
            ledger.0.lock().unwrap().push(1_000 + job.n);
            Ok::<(), JobError>(())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_paused_queue_waits_while_the_other_queues_flow() {
    let backend = Arc::new(MemoryBackend::new());
    let ledger = Ledger::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(ledger.clone())
        .handler(singles(&ledger))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;

    producer.pause(&TestQueues::Work).await.unwrap();
    wait_until(|| handle.paused_queues() == ["t.work"]).await;
    for n in 0..5 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    producer.enqueue(&Single { n: 1 }).await.unwrap();
    wait_until(|| ledger.ran() == [1_001]).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(ledger.ran(), [1_001], "nothing of the paused queue ran");
    assert_eq!(backend.ready_count("t.work"), 5);

    producer.resume(&TestQueues::Work).await.unwrap();
    wait_until(|| ledger.ran().len() == 6).await;
    assert_eq!(ledger.ran(), [0, 1, 2, 3, 4, 1_001]);
    assert!(handle.paused_queues().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_worker_started_while_its_queue_is_paused_stays_off_it() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    producer.pause(&TestQueues::Work).await.unwrap();
    producer.enqueue(&Task { n: 7 }).await.unwrap();
    let ledger = Ledger::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(ledger.clone())
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    wait_until(|| handle.paused_queues() == ["t.work"]).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(ledger.ran().is_empty());
    producer.resume(&TestQueues::Work).await.unwrap();
    wait_until(|| ledger.ran() == [7]).await;
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pause_hands_back_deliveries_taken_but_not_started() {
    let backend = Arc::new(MemoryBackend::new());
    let ledger = Ledger::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let slow = {
        let (ledger, gate) = (ledger.clone(), Arc::clone(&gate));
        handler_fn(move |job: Task, _ctx: JobContext| {
            let (ledger, gate) = (ledger.clone(), Arc::clone(&gate));
            async move {
                gate.acquire().await.unwrap().forget();
                ledger.0.lock().unwrap().push(job.n);
                Ok::<(), JobError>(())
            }
        })
    };
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(slow)
        .concurrency(2)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    for n in 0..10 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    // Two run (and block), the loop holds a third waiting for a slot.
    wait_until(|| handle.jobs_running() == 2).await;
    producer.pause(&TestQueues::Work).await.unwrap();
    wait_until(|| handle.paused_queues() == ["t.work"]).await;
    assert_eq!(
        backend.ready_count("t.work"),
        8,
        "every delivery not started is back"
    );
    gate.add_permits(2);
    wait_until(|| ledger.ran().len() == 2).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        ledger.ran().len(),
        2,
        "the running jobs finished, nothing more started"
    );
    producer.resume(&TestQueues::Work).await.unwrap();
    gate.add_permits(100);
    wait_until(|| ledger.ran().len() == 10).await;
    assert_eq!(ledger.ran(), (0..10).collect::<Vec<_>>());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_cancelled_in_its_hold_is_dead_lettered_when_it_comes_back() {
    let backend = Arc::new(MemoryBackend::new());
    let ledger = Ledger::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(ledger.clone())
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    let id = producer
        .enqueue_after(&Task { n: 1 }, Duration::from_secs(10))
        .await
        .unwrap();
    producer
        .enqueue_after(&Task { n: 2 }, Duration::from_secs(10))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    producer.cancel(id).await.unwrap();
    wait_until(|| handle.jobs_finished() == 2).await;
    assert_eq!(ledger.ran(), [2]);
    let dead = backend.dead_letters("t.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, CANCELLED_REASON);
    assert_eq!(dead[0].envelope().unwrap().job_id, id);
    assert_eq!(handle.jobs_cancelled(), 1);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_running_job_hears_its_cancellation() {
    let backend = Arc::new(MemoryBackend::new());
    let started = Arc::new(tokio::sync::Notify::new());
    let handler = {
        let started = Arc::clone(&started);
        handler_fn(move |job: Task, ctx: JobContext| {
            let started = Arc::clone(&started);
            async move {
                started.notify_one();
                if job.n == 0 {
                    // Stops at the signal, unfinished.
                    ctx.cancel_signal().cancelled().await;
                    return Err(JobError::retryable("stopped by the cancellation"));
                }
                // Finishes whatever the signal says.
                ctx.cancel_signal().cancelled().await;
                Ok::<(), JobError>(())
            }
        })
    };
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    let stopped = producer.enqueue(&Task { n: 0 }).await.unwrap();
    started.notified().await;
    let finished = producer.enqueue(&Task { n: 1 }).await.unwrap();
    started.notified().await;
    producer.cancel(stopped).await.unwrap();
    producer.cancel(finished).await.unwrap();
    wait_until(|| handle.jobs_finished() == 2).await;
    let dead = backend.dead_letters("t.work");
    assert_eq!(
        dead.len(),
        1,
        "the job its handler completed is acknowledged"
    );
    assert_eq!(dead[0].reason, CANCELLED_REASON);
    assert_eq!(dead[0].envelope().unwrap().job_id, stopped);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn jobs_are_cancelled_by_type_and_payload_and_later_ones_run() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    for n in 0..4 {
        producer
            .enqueue_after(&Task { n }, Duration::from_secs(5))
            .await
            .unwrap();
    }
    producer.enqueue(&MixedA { n: 1 }).await.unwrap();
    let filter = CancelFilter::new().job_type("task").payload_equals("n", 2);
    producer.cancel_matching(filter).await.unwrap();
    assert!(
        producer.cancel_matching(CancelFilter::new()).await.is_err(),
        "a filter with no condition is refused"
    );
    // Enqueue times are the wall clock's, which paused tokio time does not
    // move.
    std::thread::sleep(Duration::from_millis(3));
    producer.enqueue(&Task { n: 2 }).await.unwrap();

    let ledger = Ledger::default();
    let mixed = handler_fn(|_: MixedA, _: JobContext| async { Ok::<(), JobError>(()) });
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(ledger.clone())
        .handler(mixed)
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    wait_until(|| handle.jobs_finished() == 6).await;
    assert_eq!(ledger.ran(), [0, 1, 2, 3], "the later `n = 2` job runs");
    let dead = backend.dead_letters("t.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, CANCELLED_REASON);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_worker_without_control_ignores_pauses() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(backend.clone()).await;
    producer.pause(&TestQueues::Work).await.unwrap();
    producer.enqueue(&Task { n: 3 }).await.unwrap();
    let ledger = Ledger::default();
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(ledger.clone())
        .without_control()
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    wait_until(|| ledger.ran() == [3]).await;
    running.stop().await;
}
