//! A store that is down: every job still runs (at-least-once), and one
//! `WARN` line says so, not one per job.
//!
//! In a test binary of its own, for the reason `dead_letter_log.rs` gives.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use queuey_core::memory::MemoryBackend;
use queuey_core::{JobContext, JobError, handler_fn};
use queuey_tower::Worker;
use queuey_tower::idempotency::IdempotencyLayer;

use support::{Broken, Captured, Task, TestQueues, producer, spawn, wait_until};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_store_that_is_down_lets_every_job_run_with_one_warning() {
    let (captured, _default) = Captured::on_this_thread(tracing::Level::WARN);

    let backend = Arc::new(MemoryBackend::new());
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler_with(
            handler_fn(move |_: Task, _: JobContext| {
                let counted = Arc::clone(&counted);
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), JobError>(())
                }
            }),
            IdempotencyLayer::new(Broken::Down),
        )
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let producer = producer(backend.clone()).await;
    for n in 0..20 {
        producer.enqueue(&Task { n }).await.unwrap();
    }
    wait_until(|| running.handle.jobs_finished() >= 20).await;
    running.stop().await;
    assert_eq!(runs.load(Ordering::SeqCst), 20);

    let text = captured.text();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("idempotency store"))
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("at-least-once"), "{}", warnings[0]);
    assert!(
        warnings[0].contains("connection refused"),
        "{}",
        warnings[0]
    );
}
