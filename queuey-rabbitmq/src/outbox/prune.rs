//! The backend's own pruner: the quorum hold queues this backend parked
//! jobs in, once it has not used one for
//! [`prune_holds_after`](crate::RabbitMqOptions::prune_holds_after), are
//! retired (see `retire`): deleted when they are empty and nobody uses
//! them, kept otherwise and looked at again on the next sweep.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;

use super::Outbox;
use super::retire::HoldPruned;
use crate::census::HoldCensus;

/// How many holds one sweep retires at once (each takes at least the
/// retirement grace).
const RETIRED_AT_ONCE: usize = 8;

/// The shortest and the longest time between two sweeps.
const SWEEP_MIN: Duration = Duration::from_secs(1);
const SWEEP_MAX: Duration = Duration::from_secs(15 * 60);

/// How long the pruner sleeps between two sweeps: a quarter of the idle
/// time, within [`SWEEP_MIN`] and [`SWEEP_MAX`].
fn sweep_period(after: Duration) -> Duration {
    (after / 4).clamp(SWEEP_MIN, SWEEP_MAX)
}

/// Retires, every sweep, the holds `outbox`'s backend has not used for
/// `after`, asking `census` for the jobs AMQP cannot see; returns once the
/// backend is gone or closed.
pub(crate) async fn prune_idle_holds(
    outbox: Weak<Outbox>,
    after: Duration,
    census: Arc<dyn HoldCensus>,
) {
    let period = sweep_period(after);
    loop {
        tokio::time::sleep(period).await;
        let Some(outbox) = outbox.upgrade() else {
            return;
        };
        if outbox.sender.link.is_closed() {
            return;
        }
        let idle = outbox.holds.used.idle(after);
        let outbox = &outbox;
        let census = &*census;
        futures::stream::iter(idle)
            .for_each_concurrent(RETIRED_AT_ONCE, |(hold, queue)| async move {
                match outbox.retire_hold(&queue, &hold, census).await {
                    Ok(HoldPruned::Deleted { .. } | HoldPruned::Missing) => {
                        outbox.holds.used.forget_idle(&hold, after);
                    }
                    Ok(kept) => {
                        tracing::debug!(hold = %hold, ?kept, "kept an idle hold queue");
                    }
                    Err(error) => {
                        tracing::debug!(hold = %hold, %error, "could not prune an idle hold queue; trying again on the next sweep");
                    }
                }
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_come_every_quarter_of_the_idle_time_within_bounds() {
        assert_eq!(sweep_period(Duration::from_secs(3_600)), SWEEP_MAX);
        assert_eq!(sweep_period(Duration::from_secs(2)), SWEEP_MIN);
        assert_eq!(
            sweep_period(Duration::from_secs(120)),
            Duration::from_secs(30)
        );
    }
}
