//! A worker that prefetches more deliveries than it has job slots, so
//! that one may wait past the broker's consumer timeout before it is
//! settled: it builds, with one `WARN` line per queue saying so; a worker
//! with a slot per prefetched delivery says nothing.
//!
//! In a test binary of its own, for the reason `dead_letter_log.rs` gives.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use queuey_core::{JobContext, JobError, handler_fn};
use queuey_tower::Worker;

use support::{Captured, Task, TestQueues, WithConsumerTimeout};

#[tokio::test(flavor = "current_thread")]
async fn prefetched_deliveries_that_may_wait_past_the_consumer_timeout_are_warned_about() {
    let (captured, _default) = Captured::on_this_thread(tracing::Level::WARN);

    let backend = WithConsumerTimeout::new(Duration::from_secs(30 * 60));
    let build = |concurrency: Option<usize>| {
        let builder = Worker::<TestQueues, _>::builder(backend.clone())
            .handler(handler_fn(|_: Task, _: JobContext| async {
                Ok::<(), JobError>(())
            }))
            .job_timeout(Duration::from_secs(4 * 60));
        let builder = match concurrency {
            Some(n) => builder.concurrency(n),
            None => builder,
        };
        builder.build()
    };
    // `t.work` prefetches 64: with one slot, the last delivery may wait 63
    // jobs of up to 4 minutes.
    build(Some(1)).await.expect("a warning, not a refusal");
    let warned = text(&captured);
    let lines: Vec<&str> = warned
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("consumer timeout"))
        .collect();
    assert_eq!(lines.len(), 1, "{warned}");
    for needed in [
        "queue=t.work",
        "up to 64 prefetched deliveries for 1 job slot(s)",
        "64 job timeouts (15360s)",
        "consumer timeout of 1800s",
        "Lower the queues' prefetch, raise the worker's concurrency, or lower its job_timeout",
    ] {
        assert!(
            lines[0].contains(needed),
            "{needed:?} missing: {}",
            lines[0]
        );
    }

    // Seven rounds of 4 minutes plus the margin stay under 30 minutes.
    captured.0.lock().unwrap().clear();
    build(Some(10)).await.unwrap();
    // The default concurrency has a slot for every prefetched delivery.
    build(None).await.unwrap();
    assert_eq!(text(&captured), "", "no warning when it fits");
}

fn text(captured: &Captured) -> String {
    captured.text()
}
