//! Whether the worker's jobs fit under the broker's consumer timeout.
//!
//! A broker's consumer timeout (RabbitMQ's `consumer_timeout`, 30 minutes by
//! default) redelivers a delivery unacknowledged that long, while its first
//! run may still go on (RabbitMQ also closes the channel, returning its
//! other deliveries). It counts from delivery, so a prefetched delivery ages
//! while it waits for a slot. For each queue with one
//! ([`Backend::consumer_timeout`]):
//!
//! - the job timeout plus a [settle margin](settle_margin) must stay under
//!   it, or the worker refuses to build ([`Error::InvalidConfig`]);
//! - with more prefetched deliveries than job slots, the last may wait
//!   `rounds − 1` job timeouts (`rounds`: deliveries over slots, rounded
//!   up); if `rounds` job timeouts plus the margin reach it, the worker
//!   logs a warning.

use std::time::Duration;

use queuey_core::Error;
use queuey_core::backend::Backend;

use super::consume::QueueRoutes;

/// The longest [settle margin](settle_margin).
pub(crate) const MAX_SETTLE_MARGIN: Duration = Duration::from_secs(60);

/// The part of a consumer timeout kept for settling a job after its handler
/// (publish, confirm, acknowledge): a tenth, at most [`MAX_SETTLE_MARGIN`].
pub(crate) fn settle_margin(consumer_timeout: Duration) -> Duration {
    (consumer_timeout / 10).min(MAX_SETTLE_MARGIN)
}

/// Refuses a job timeout that does not fit under a queue's consumer timeout,
/// and warns where prefetched deliveries may wait past it.
pub(crate) fn check<B: Backend>(
    backend: &B,
    queues: &[QueueRoutes],
    job_timeout: Duration,
    concurrency: usize,
) -> Result<(), Error> {
    let prefetched: usize = queues
        .iter()
        .flat_map(|q| &q.physical.queues)
        .map(|physical| usize::from(physical.settings().prefetch()))
        .sum();
    let rounds = prefetched.div_ceil(concurrency.max(1)).max(1);
    for queue in queues {
        let Some(limit) = backend.consumer_timeout(&queue.config) else {
            continue;
        };
        let margin = settle_margin(limit);
        if job_timeout.saturating_add(margin) >= limit {
            return Err(too_long(&queue.queue, job_timeout, limit, margin));
        }
        let held = job_timeout.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX));
        if rounds > 1 && held.saturating_add(margin) >= limit {
            tracing::warn!(
                queue = %queue.queue,
                prefetched,
                concurrency,
                ?job_timeout,
                consumer_timeout = ?limit,
                "the worker holds up to {prefetched} prefetched deliveries for {concurrency} job \
                 slot(s), so one may wait for a slot and be settled up to {rounds} job timeouts \
                 ({held:?}) after the broker delivered it, past the broker's consumer timeout of \
                 {limit:?}: the broker would then deliver it (and the rest of its channel) again. \
                 Lower the queues' prefetch, raise the worker's concurrency, or lower its \
                 job_timeout"
            );
        }
    }
    Ok(())
}

fn too_long(queue: &str, job_timeout: Duration, limit: Duration, margin: Duration) -> Error {
    Error::invalid_config(format!(
        "the job timeout of {job_timeout:?} does not fit under the consumer timeout of {limit:?} \
         that the broker applies to queue `{queue}`: a job running that long, with up to \
         {margin:?} to settle it, would still be unacknowledged when the broker takes it back and \
         delivers it again while its first run still runs. Lower `WorkerBuilder::job_timeout` \
         below {:?}, or raise the broker's consumer timeout (RabbitMQ: `consumer_timeout` in \
         rabbitmq.conf) and tell the backend (`RabbitMqOptions::consumer_timeout`)",
        limit.saturating_sub(margin)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_a_tenth_of_the_timeout_and_at_most_a_minute() {
        let s = Duration::from_secs;
        assert_eq!(settle_margin(s(3)), Duration::from_millis(300));
        assert_eq!(settle_margin(s(300)), s(30));
        assert_eq!(settle_margin(s(600)), s(60));
        assert_eq!(settle_margin(s(30 * 60)), s(60));
        assert_eq!(settle_margin(Duration::MAX), MAX_SETTLE_MARGIN);
    }

    #[test]
    fn the_refusal_names_both_timeouts_and_both_fixes() {
        let s = Duration::from_secs;
        let e = too_long("app.reports", s(45 * 60), s(30 * 60), s(60));
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        let text = e.to_string();
        for needed in [
            "job timeout of 2700s",
            "consumer timeout of 1800s",
            "queue `app.reports`",
            "`WorkerBuilder::job_timeout` below 1740s",
            "`consumer_timeout` in rabbitmq.conf",
            "`RabbitMqOptions::consumer_timeout`",
        ] {
            assert!(text.contains(needed), "{needed:?} missing from: {text}");
        }
    }
}
