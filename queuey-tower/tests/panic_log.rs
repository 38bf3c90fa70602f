//! A handler that panics: the panic is caught, the job retried, and the
//! panic is one WARN line naming the job and the panic's message.
//!
//! In a test binary of its own: `tracing` caches, per log call site, whether
//! any subscriber wants it, and a test running beside this one on another
//! thread, with no subscriber, could cache "nobody" for these lines.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::{Envelope, JobContext, JobError, handler_fn};
use queuey_tower::Worker;

use support::{Captured, Task, TestQueues, spawn, wait_until};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_panic_is_retried_and_logged_once_with_its_job() {
    // The default hook would print the panic to stderr too; an application
    // may silence it the same way.
    std::panic::set_hook(Box::new(|_| {}));
    let (captured, _default) = Captured::on_this_thread(tracing::Level::WARN);
    let backend = Arc::new(MemoryBackend::new());
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&attempts);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: Task, ctx: JobContext| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if ctx.attempt() == 1 {
                    panic!("index out of bounds: the len is 0 but the index is 3");
                }
                Ok::<(), JobError>(())
            }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let payload = serde_json::value::to_raw_value(&serde_json::json!({ "n": 1 })).unwrap();
    let envelope = Envelope::new("task", "t.work", payload);
    backend.publish(&envelope).await.unwrap();
    wait_until(|| attempts.load(Ordering::SeqCst) == 2 && backend.unacked_count("t.work") == 0)
        .await;
    running.stop().await;
    let _ = std::panic::take_hook();

    assert!(backend.dead_letters("t.work").is_empty());
    let out = captured.text();
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("panicked")).collect();
    assert_eq!(lines.len(), 1, "one line per panic:\n{out}");
    let line = lines[0];
    assert!(line.contains(" WARN "), "{out}");
    assert!(
        line.contains("the handler panicked: index out of bounds: the len is 0 but the index is 3"),
        "{out}"
    );
    assert!(
        line.contains("queue=t.work") && line.contains("job_type=task"),
        "{out}"
    );
    assert!(
        line.contains(&format!("job_id={}", envelope.job_id)),
        "{out}"
    );
    assert!(line.contains("attempt=1"), "{out}");
}
