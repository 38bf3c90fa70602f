//! Every line about a job's retry, deferral or dead letter names the job
//! with fields of its own — `queue`, `job_type`, `job_id` — so the line is
//! whole under a `warn` filter (which drops the INFO span of the job), and
//! names the job once under an `info` filter (where that span is printed
//! too).
//!
//! In a test binary of its own: `tracing` caches, per log call site, whether
//! any subscriber wants it, and a test running beside this one on another
//! thread, with no subscriber, could cache "nobody" for these lines.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::{Envelope, JobContext, JobError, Uuid, handler_fn};
use queuey_tower::Worker;
use tracing::Level;

use support::{Captured, Task, TestQueues, spawn, wait_until};

/// What the handler does with a job of a given `n`.
const RETRIED: u32 = 1;
const DEFERRED: u32 = 2;
const DEAD: u32 = 3;

/// The ids of the retried, deferred and dead-lettered jobs.
struct Ids {
    retried: Uuid,
    deferred: Uuid,
    dead: Uuid,
}

/// Runs one job of each fate through a worker, with every line at `level`
/// or above captured, and returns the captured text.
async fn run_at(level: Level) -> (String, Ids) {
    let (captured, _default) = Captured::on_this_thread(level);
    let backend = Arc::new(MemoryBackend::new());
    let succeeded = Arc::new(AtomicUsize::new(0));
    let done = Arc::clone(&succeeded);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |task: Task, ctx: JobContext| {
            let done = Arc::clone(&done);
            async move {
                match task.n {
                    RETRIED if ctx.attempt() == 1 => {
                        Err(JobError::retryable("the upstream timed out"))
                    }
                    DEFERRED if ctx.deferrals() == 0 => {
                        Err(JobError::deferred(Duration::from_secs(5)))
                    }
                    DEAD => Err(JobError::fatal("the account is gone")),
                    _ => {
                        done.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    }
                }
            }
        }))
        .build()
        .await
        .unwrap();
    let running = spawn(worker);
    let publish = async |n: u32| {
        let payload = serde_json::value::to_raw_value(&serde_json::json!({ "n": n })).unwrap();
        let envelope = Envelope::new("task", "t.work", payload);
        backend.publish(&envelope).await.unwrap();
        envelope.job_id
    };
    let ids = Ids {
        retried: publish(RETRIED).await,
        deferred: publish(DEFERRED).await,
        dead: publish(DEAD).await,
    };
    wait_until(|| {
        succeeded.load(Ordering::SeqCst) == 2 && backend.dead_letters("t.work").len() == 1
    })
    .await;
    running.stop().await;
    let out = captured.text();
    (out, ids)
}

/// The one line of `out` containing `message`.
fn line<'a>(out: &'a str, message: &str) -> &'a str {
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(message)).collect();
    assert_eq!(lines.len(), 1, "one `{message}` line expected in:\n{out}");
    lines[0]
}

/// Whether `line` names the job of id `id` on `t.work`, of type `task`.
fn names(line: &str, id: Uuid) -> bool {
    line.contains("queue=t.work")
        && line.contains("job_type=task")
        && line.contains(&format!("job_id={id}"))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn job_lines_name_their_job_once_at_any_filter() {
    // At WARN, the job's span is off: the lines name the job themselves.
    let (out, ids) = run_at(Level::WARN).await;
    let retry = line(&out, "job failed, will retry");
    assert!(
        retry.contains(" WARN ") && names(retry, ids.retried),
        "{out}"
    );
    assert!(retry.contains("error=the upstream timed out"), "{out}");
    let dead = line(&out, "job dead-lettered");
    assert!(dead.contains(" WARN ") && names(dead, ids.dead), "{out}");
    // A deferral is routine, logged at INFO: nothing of it at WARN.
    assert!(!out.contains("job deferred"), "{out}");
    assert!(!out.contains("job{"), "no span at WARN: {out}");

    // At INFO, the span is printed too, and does not repeat the fields.
    let (out, ids) = run_at(Level::INFO).await;
    let lines = [
        (line(&out, "job failed, will retry"), ids.retried),
        (line(&out, "job deferred"), ids.deferred),
        (line(&out, "job dead-lettered"), ids.dead),
    ];
    for (line, id) in lines {
        assert!(names(line, id), "{out}");
        for field in ["queue=", "job_type=", "job_id="] {
            assert_eq!(line.matches(field).count(), 1, "{field} once in: {line}");
        }
    }
    assert!(
        lines[0].0.contains("job{"),
        "the retry line is inside the span: {out}"
    );
    assert!(
        lines[1].0.contains(" INFO ") && lines[1].0.contains("delay_ms=5000"),
        "{out}"
    );
}
