//! The log line of every dead letter: one `WARN` line naming its reason.
//!
//! In a test binary of its own: `tracing` caches, per log call site, whether
//! any subscriber wants it, and a test running beside this one on another
//! thread, with no subscriber, can cache "nobody" for the dead-letter line
//! between this test setting its subscriber and the line being logged.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;

use queuey_core::backend::Backend;

use queuey_core::{Envelope, JobContext, JobError, handler_fn};

use queuey_core::memory::MemoryBackend;
use queuey_tower::Worker;

use support::{Captured, Task, TestQueues, spawn, wait_until};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_dead_letter_is_one_warn_line_naming_its_reason() {
    let (captured, _default) = Captured::on_this_thread(tracing::Level::WARN);
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let payload = |json| serde_json::value::to_raw_value(&json).unwrap();
    let not_a_task = payload(serde_json::json!({"n": "x"}));
    backend
        .publish(&Envelope::new("task", "t.work", not_a_task))
        .await
        .unwrap();
    let unknown = payload(serde_json::json!({}));
    backend
        .publish(&Envelope::new("nobody_handles_this", "t.work", unknown))
        .await
        .unwrap();
    wait_until(|| backend.dead_letters("t.work").len() == 2).await;
    running.stop().await;

    let out = captured.text();
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("dead-lettered"))
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines.iter().all(|l| l.contains(" WARN ")), "{out}");
    assert!(
        lines[0].contains("reason=payload does not decode as job type `task`"),
        "{out}"
    );
    assert!(
        lines[1].contains("reason=no handler for job type `nobody_handles_this`"),
        "{out}"
    );
}
