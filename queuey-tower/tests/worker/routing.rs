//! Which stack a delivery reaches, and what happens when none fits.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::backend::Backend;

use queuey_core::{BoxError, Envelope, JobContext, JobError, handler_fn};

use queuey_core::Disposition;
use queuey_core::memory::MemoryBackend;
use queuey_tower::{JobRequest, Worker};
use tower::service_fn;

use crate::support::{MixedA, MixedB, Task, TestQueues, producer, spawn, wait_until};

#[tokio::test(start_paused = true)]
async fn two_job_types_share_a_queue_and_each_keeps_its_own_policy() {
    let backend = Arc::new(MemoryBackend::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (a_log, b_log) = (Arc::clone(&seen), Arc::clone(&seen));
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |job: MixedA, ctx: JobContext| {
            let log = Arc::clone(&a_log);
            async move {
                log.lock()
                    .unwrap()
                    .push(("a", job.n, ctx.attempt(), ctx.max_attempts()));
                Ok::<(), JobError>(())
            }
        }))
        .handler(handler_fn(move |job: MixedB, ctx: JobContext| {
            let log = Arc::clone(&b_log);
            async move {
                log.lock()
                    .unwrap()
                    .push(("b", job.n, ctx.attempt(), ctx.max_attempts()));
                Err::<(), JobError>(JobError::retryable("b fails"))
            }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    producer.enqueue(&MixedA { n: 1 }).await.unwrap();
    let started = tokio::time::Instant::now();
    producer.enqueue(&MixedB { n: 2 }).await.unwrap();
    wait_until(|| backend.dead_letters("t.mixed").len() == 1).await;

    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    // `a` runs once with the default policy's five attempts; `b` has its own
    // two attempts, five seconds apart.
    assert_eq!(seen, vec![("a", 1, 1, 5), ("b", 2, 1, 2), ("b", 2, 2, 2)]);
    assert!(started.elapsed() >= Duration::from_secs(5));
    let dead = backend.dead_letters("t.mixed").remove(0);
    assert_eq!(
        (dead.attempts, dead.reason.as_str()),
        (2, "attempts exhausted (2 of 2): b fails")
    );
    running.stop().await;
}

fn counting_worker_log() -> Arc<Mutex<u32>> {
    Arc::new(Mutex::new(0))
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_is_not_the_job_is_dead_lettered_without_calling_the_handler() {
    let backend = Arc::new(MemoryBackend::new());
    let calls = counting_worker_log();
    let log = Arc::clone(&calls);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: Task, _: JobContext| {
            *log.lock().unwrap() += 1;
            async { Ok::<(), JobError>(()) }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let payload =
        serde_json::value::to_raw_value(&serde_json::json!({"n": "not a number"})).unwrap();
    backend
        .publish(&Envelope::new("task", "t.work", payload))
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 1).await;
    let dead = backend.dead_letters("t.work").remove(0);
    assert!(
        dead.reason
            .starts_with("payload does not decode as job type `task`: invalid type"),
        "{}",
        dead.reason
    );
    assert_eq!(dead.attempts, 1);
    assert_eq!(*calls.lock().unwrap(), 0);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_type_without_a_handler_is_dead_lettered_with_a_reason_saying_so() {
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let payload = serde_json::value::to_raw_value(&1).unwrap();
    backend
        .publish(&Envelope::new("legacy_job", "t.work", payload))
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 1).await;
    assert_eq!(
        backend.dead_letters("t.work")[0].reason,
        "no handler for job type `legacy_job` on queue `t.work` in this worker (a job type's \
         name is its `#[job(name = ..)]`, else its Rust type's name: renaming a type without \
         `name` changes it)"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stack_of_your_own_gets_no_layers_added() {
    let backend = Arc::new(MemoryBackend::new());
    let stack = service_fn(|request: JobRequest<Task>| async move {
        Ok::<_, BoxError>(match request.job().n {
            0 => Disposition::Ack,
            1 => Disposition::DeadLetter {
                reason: "mine".into(),
            },
            _ => return Err("an error reaching the worker".into()),
        })
    });
    // A layer that puts a service of its own in the handler's place.
    let instead = tower::layer::layer_fn(move |_handler| stack);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_without_default_stack(
            handler_fn(|_: Task, _: JobContext| async { Ok::<(), JobError>(()) }),
            instead,
        )
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let handle = running.handle.clone();
    let producer = producer(backend.clone()).await;
    for n in 0..3 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    wait_until(|| handle.jobs_settled() == 3).await;
    let reasons: Vec<String> = backend
        .dead_letters("t.work")
        .into_iter()
        .map(|d| d.reason)
        .collect();
    assert_eq!(
        reasons,
        vec!["mine".to_owned(), "an error reaching the worker".to_owned()]
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_the_default_stack_only_the_given_layers_wrap_the_handler() {
    let backend = Arc::new(MemoryBackend::new());
    let before = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_without_default_stack(
            handler_fn(|_: Task, _: JobContext| async { Err::<(), _>(JobError::retryable("x")) }),
            queuey_tower::dead_letter::DeadLetterLayer::new(),
        )
        .build()
        .await
        .unwrap();
    let running = spawn(before);
    producer(backend.clone())
        .await
        .enqueue(&Task { n: 1 })
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 1).await;
    // Only the dead-letter layer: no retry happened.
    assert_eq!(backend.dead_letters("t.work")[0].reason, "x");
    running.stop().await;
}
