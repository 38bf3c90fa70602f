//! Holds: parking a job in a hold queue until its delay has passed, without
//! the hold queue's lease running out under it, and without a prune
//! deleting it under it.
//!
//! # Quorum hold queues (the default)
//!
//! A quorum hold queue `q.deferred.quorum.{ttl}` has no lease: the broker
//! never deletes it by itself, and keeps a job in the hold until `q` has
//! confirmed it (at-least-once dead-lettering). What can delete it is a
//! prune (see `retire`): the backend's own, another process's, or the
//! operator tool's. Deleting a quorum queue takes its jobs with it, and
//! RabbitMQ even confirms a publish that was on its way into the queue when
//! it was deleted (measured on 3.10.8); quorum queues refuse a delete
//! conditional on being empty. So publishers and pruners keep a handshake
//! with two durations, [`TRUSTED_CONFIRM`] and the pruner's longer
//! [`RETIRE_GRACE`]:
//!
//! - a **pruner** first consumes the hold, then watches it for
//!   [`RETIRE_GRACE`]; any job that reaches it means the hold is in use, and
//!   the pruner gives it back and keeps the queue. Only then does it delete
//!   the queue, and it republishes what still reaches its consumer before
//!   the broker cancels it.
//! - a **publisher** declares the hold (waiting for the answer) and relies
//!   only on a declaration that counted **no consumer**: one that counts a
//!   consumer means a prune is under way, so it steps over that hold to the
//!   hold one millisecond longer (never early). A job it publishes counts as
//!   held only when its confirmation came within [`TRUSTED_CONFIRM`] of
//!   sending that declaration; otherwise it publishes the job again (a
//!   duplicate at worst).
//!
//! Why no trusted job can be deleted: the declaration was handled at `h`,
//! after it was sent at `t0`, and counted no consumer, so a pruner's
//! consumer came at `c > h`. The job was stored at `L`, before its
//! confirmation: `L < t0 + TRUSTED_CONFIRM < c + TRUSTED_CONFIRM`. Stored
//! before `c`, it is delivered to the pruner as soon as it consumes; after,
//! as soon as it is stored. Either way the pruner receives it before
//! `c + TRUSTED_CONFIRM` plus the network's delay, well inside its
//! [`RETIRE_GRACE`], and keeps the hold. A declaration is reused for
//! [`QUORUM_REUSE`], so that a publish relying on it has the rest of
//! [`TRUSTED_CONFIRM`] for its round trip.
//!
//! A hold that something else consumes (which would take held jobs before
//! they are due) is stepped over the same way; after [`STEPS`] consumed
//! holds in a row the hold fails with an error that says so.
//!
//! # The lease rule (classic hold queues)
//!
//! A classic hold queue `q.deferred.{ttl}` has `x-message-ttl = ttl` and
//! `x-expires = 2 * ttl`: the broker deletes it, **with the messages in
//! it**, once nobody has declared it for `2 * ttl`. Only a declaration whose
//! reply we waited for renews that lease; a publish renews nothing. A job
//! lands at `L` and is released at `L + ttl`, so it is safe when the lease
//! still runs at `L + ttl`.
//!
//! **Reusing a declaration.** A declaration sent at `S` and answered was
//! handled no earlier than `S`, so the lease runs at least until
//! `S + 2 * ttl`. A publish confirmed at `C < S + ttl / 2` landed at
//! `L <= C` and is released by `L + ttl < S + 1.5 * ttl`: half a TTL before
//! the lease can end. (`C < S + ttl` would do with no room to spare: a
//! broker busy dead-lettering a backlog can expire the lease before
//! releasing jobs due just before it, and a loaded benchmark lost jobs that
//! way.) So one declaration serves every publish confirmed within half a
//! TTL of sending it; a hold declares the queue again once the last
//! declaration is older than a quarter of a TTL (`Leases`), keeping the
//! rest for the publish's round trip.
//!
//! **A late confirmation.** A publish confirmed at `C >= S + ttl / 2` is not
//! trusted by itself. The queue is declared once more, renewing the lease
//! from `R > C` to `R + 2 * ttl > L + 2 * ttl`, but only if the queue still
//! existed at `R`: that holds when the reply came back before
//! `S + 2 * ttl`. Otherwise the job may have gone with its queue and is
//! published again (a duplicate at worst), up to [`LATE_HOLD_ATTEMPTS`]
//! times.
//!
//! **A queue already gone.** Every publish is `mandatory`, so a publish
//! into a hold queue that expired (or was deleted) comes back `NO_ROUTE`;
//! the queue is then declared and the job published again, until the
//! publish bound.
//!
//! **Short holds.** The argument needs the declaration, the publish and its
//! confirmation to fit in about one TTL, so holds shorter than
//! [`SHORTEST_HOLD`](crate::topology::SHORTEST_HOLD) are rounded up to it:
//! never early.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::Connection;
use queuey_core::backend::{Granularity, HoldKind};
use queuey_core::{BackendErrorKind, Error, QueueConfig};
use tokio::time::Instant;

use super::leases::Leases;
use super::publisher::Outgoing;
use super::send::Sender;
use super::used::Used;
use crate::RabbitMqOptions;
use crate::declare::{HOLD_DECLARATION_CHANNELS, HoldDeclarer};
use crate::error::backend;
use crate::topology::HoldQueues;

/// How long a pruner watches a quorum hold, consuming it, before it may
/// delete it (see the module documentation).
pub(super) const RETIRE_GRACE: Duration = Duration::from_secs(10);

/// A job published into a quorum hold counts as held when its confirmation
/// came within this long of sending the declaration it relied on.
pub(super) const TRUSTED_CONFIRM: Duration = Duration::from_secs(5);

/// How long a declaration of a quorum hold that counted no consumer serves
/// later publishes.
pub(super) const QUORUM_REUSE: Duration = Duration::from_millis(2_500);

/// How many quorum holds in a row, each a millisecond longer than the one
/// before, a job steps over because they are consumed (being pruned).
const STEPS: u64 = 16;

/// What became of one try to park a job.
enum Parked {
    /// The job is held.
    Held,
    /// The hold is consumed (being pruned): try the next one.
    Consumed(u32),
}

/// How often a hold whose lease could not be shown to cover its job is
/// published again before the hold fails.
const LATE_HOLD_ATTEMPTS: u32 = 5;

/// How often a hold publish the broker refused (nacked) is published again
/// before the hold fails. A quorum hold queue occasionally refuses a
/// publish (a few in 20,000 on a busy broker, measured): nothing was
/// stored, so publishing again is safe, and it saves the delivery a trip
/// back through the broker.
const NACKED_HOLD_ATTEMPTS: u32 = 3;

/// The hold queues of a backend: the channels they are declared on, and
/// the declarations later holds may rely on.
#[derive(Debug)]
pub(super) struct Holds {
    declarer: HoldDeclarer,
    leases: Leases,
    /// When each quorum hold was last used, for the backend's pruner.
    pub(super) used: Used,
}

impl Holds {
    pub(super) fn new() -> Self {
        Holds {
            declarer: HoldDeclarer::new(HOLD_DECLARATION_CHANNELS),
            leases: Leases::default(),
            used: Used::default(),
        }
    }

    /// Closes the declaration channels: later holds fail with
    /// [`Error::ShutDown`].
    pub(super) fn close(&self) {
        self.declarer.close();
    }

    /// Publishes `out` into its hold queue, whose TTL is `ttl_ms`, of the
    /// family `holds`, for `config`'s queue: declaring the hold queue when
    /// no usable declaration is known, and publishing again after each
    /// transient failure until the publish bound has passed.
    pub(super) async fn park(
        &self,
        sender: &Sender,
        config: &QueueConfig,
        mut ttl_ms: u64,
        mut out: Outgoing,
        holds: HoldQueues,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + sender.options.publish_timeout;
        let mut consumers = 0;
        for _ in 0..=STEPS {
            let spot = Spot {
                hold: out.queue.as_str(),
                config,
                ttl_ms,
                holds,
                deadline,
            };
            let parked = sender
                .retrying(
                    deadline,
                    || format!("holding a job in `{}`", spot.hold),
                    || self.hold_once(sender, &spot, &out),
                )
                .await?;
            match parked {
                Parked::Held => {
                    if holds == HoldQueues::Quorum {
                        self.used.touch(&out.queue, config.name());
                    }
                    return Ok(());
                }
                Parked::Consumed(n) => {
                    consumers = n;
                    let suffix = sender.options.settings().deferred_suffix();
                    let next = holds.name(config.name(), suffix, ttl_ms + 1)?;
                    tracing::debug!(hold = %out.queue, next = %next, consumers, "the hold queue is consumed (being pruned); holding the job one millisecond longer in the next");
                    ttl_ms += 1;
                    out.queue = next;
                }
            }
        }
        let text = format!(
            "the {} hold queues up to `{}` are all consumed ({consumers} consumer(s) on the \
             last): a prune does not consume that many holds at once, so something else \
             consumes them and takes held jobs before they are due; remove those consumers",
            STEPS + 1,
            out.queue
        );
        Err(backend(BackendErrorKind::Other, text))
    }

    /// Publishes `out` into its hold queue on the current connection,
    /// declaring the queue when no usable declaration is known.
    async fn hold_once(
        &self,
        sender: &Sender,
        spot: &Spot<'_>,
        out: &Outgoing,
    ) -> Result<Parked, Error> {
        let hold = spot.hold;
        let current = sender
            .connection(|| format!("declaring hold queue `{hold}`"))
            .await?;
        let result = self.hold_on(sender, &current.connection, spot, out).await;
        if let Err(error) = &result {
            sender.link.saw(current.generation, error);
        }
        result
    }

    async fn hold_on(
        &self,
        sender: &Sender,
        connection: &Connection,
        spot: &Spot<'_>,
        out: &Outgoing,
    ) -> Result<Parked, Error> {
        let hold = spot.hold;
        let deadline = spot.deadline;
        let mut late = 0;
        let mut nacked = 0;
        loop {
            let sent = match self.leases.usable(hold) {
                Some(sent) => sent,
                None => match self.declare_hold(connection, spot).await? {
                    Ok(sent) => sent,
                    Err(consumers) => return Ok(Parked::Consumed(consumers)),
                },
            };
            match sender.publisher.publish(out.clone(), deadline).await {
                Ok(()) => {
                    if self.lease_covers(connection, spot, sent).await? {
                        return Ok(Parked::Held);
                    }
                    late += 1;
                    if late >= LATE_HOLD_ATTEMPTS {
                        return Err(late_error(spot, late));
                    }
                    tracing::warn!(hold = %hold, "a hold's confirmation came too late to prove its queue outlives it; publishing it again");
                }
                Err(Error::Backend(e))
                    if e.kind() == BackendErrorKind::Unroutable && Instant::now() < deadline =>
                {
                    // The hold queue expired before the publish landed (it
                    // waited behind other publishes), or it was deleted:
                    // nothing was stored. Declare it and publish again.
                    tracing::info!(hold = %hold, "the hold queue was gone at publish time; declaring it again");
                    self.leases.forget(hold);
                }
                Err(Error::Backend(e))
                    if e.kind() == BackendErrorKind::Nacked
                        && nacked + 1 < NACKED_HOLD_ATTEMPTS
                        && Instant::now() < deadline =>
                {
                    nacked += 1;
                    tracing::info!(hold = %hold, nacked, "the broker refused a hold publish; publishing it again");
                    tokio::time::sleep(Duration::from_millis(50) * nacked).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Declares the hold, waiting for the reply, and records the
    /// declaration for later publishes. Returns when the declaration was
    /// sent, or, for a quorum hold the broker counts consumers on (a prune
    /// is under way), how many, without recording anything.
    async fn declare_hold(
        &self,
        connection: &Connection,
        spot: &Spot<'_>,
    ) -> Result<Result<Instant, u32>, Error> {
        let Spot { hold, holds, .. } = *spot;
        // Taken before the declaration is sent: the broker starts the lease
        // (and counts consumers) when it handles the declaration, which is
        // no earlier.
        let sent = Instant::now();
        let consumers = self
            .declarer
            .declare(connection, hold, holds, spot.config, spot.ttl_ms)
            .await?;
        if holds == HoldQueues::Classic {
            let reuse = Duration::from_millis(spot.ttl_ms) / 4;
            self.leases.renewed(hold, sent, reuse);
            return Ok(Ok(sent));
        }
        if consumers > 0 {
            return Ok(Err(consumers));
        }
        self.leases.renewed(hold, sent, QUORUM_REUSE);
        Ok(Ok(sent))
    }

    /// Whether a job just confirmed into the hold, relying on the
    /// declaration sent at `sent`, is sure to be released rather than
    /// deleted with its queue (see the module documentation).
    async fn lease_covers(
        &self,
        connection: &Connection,
        spot: &Spot<'_>,
        sent: Instant,
    ) -> Result<bool, Error> {
        if spot.holds == HoldQueues::Quorum {
            // Not trusted: the next round declares the hold again, since
            // the declaration is older than its reuse window.
            return Ok(sent.elapsed() < TRUSTED_CONFIRM);
        }
        let ttl = Duration::from_millis(spot.ttl_ms);
        if sent.elapsed() < ttl / 2 {
            return Ok(true);
        }
        // A classic hold is never counted as consumed here.
        let _ = self.declare_hold(connection, spot).await?;
        Ok(sent.elapsed() < 2 * ttl)
    }
}

/// One hold publish: the hold queue, whose queue it holds for, its TTL and
/// family, and the publish bound.
#[derive(Debug, Clone, Copy)]
struct Spot<'a> {
    hold: &'a str,
    config: &'a QueueConfig,
    ttl_ms: u64,
    holds: HoldQueues,
    deadline: Instant,
}

/// The error of a hold whose confirmations kept coming too late to rely on.
fn late_error(spot: &Spot<'_>, late: u32) -> Error {
    let Spot { hold, ttl_ms, .. } = *spot;
    let text = match spot.holds {
        HoldQueues::Quorum => format!(
            "could not make sure a job held in `{hold}` was stored before any prune of the \
             queue ({late} tries): the broker took longer than {} s to confirm it each time",
            TRUSTED_CONFIRM.as_secs()
        ),
        _ => format!(
            "could not make sure a job held in `{hold}` outlives the queue's {} ms lease \
             ({late} tries): the broker took longer than the {ttl_ms} ms hold to confirm it; \
             raise the granularity",
            2 * ttl_ms
        ),
    };
    backend(BackendErrorKind::Other, text)
}

/// The TTL of the hold queue a job waiting `delay` goes to: `delay`
/// rounded up to `kind`'s granularity, or 0 for a job to publish at once.
///
/// A delay longer than one hold queue keeps a job
/// ([`LONGEST_WAIT`](queuey_core::LONGEST_WAIT), 24 days) is held in
/// legs: the first leg waits 24 days, and the consumer that gets the job
/// back before its due time holds it again for the rest (see
/// [`rehold`](crate::rehold)). With
/// [`RabbitMqOptions::refuse_long_delays`] such a delay is refused
/// instead, as the first version did.
pub(super) fn ttl_ms(
    queue: &str,
    delay: Duration,
    kind: HoldKind,
    options: &RabbitMqOptions,
) -> Result<u64, Error> {
    let granularity: Granularity = match kind {
        HoldKind::Retry => options.settings().retry_granularity(),
        HoldKind::Deferral => options.settings().deferred_granularity(),
    };
    if !queuey_core::backend::fits_a_hold(delay) && !options.refuse_long_delays {
        // A whole number of seconds under the cap: a hold queue like any
        // other, whatever the granularity.
        return Ok(u64::try_from(queuey_core::LONGEST_WAIT.as_millis()).unwrap_or(u64::MAX));
    }
    match queuey_core::backend::hold_delay_ms(queue, delay, granularity) {
        // A delay that fits one hold queue but whose bucket does not (a
        // relative granularity rounds 23 days past the cap): the longest
        // hold queue is still long enough.
        Err(Error::DelayTooLong { .. }) if !options.refuse_long_delays => {
            Ok(queuey_core::MAX_DEFERRAL_MS)
        }
        other => other,
    }
}

/// When a job held for `delay` from now becomes due, in milliseconds since
/// the Unix epoch (the `queuey-due-at` header).
pub(super) fn due_at_ms(delay: Duration) -> u64 {
    // Rounded up, so that a due time is never earlier than asked.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from((now + delay).as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// The per-message expiration of a job due at `due_at_ms` parked now
/// (`now_ms`) in a hold queue of `ttl_ms`: what remains until it is due,
/// when that is shorter than the queue's TTL, so that the broker releases
/// it at its due time rather than at the end of its bucket (RabbitMQ
/// applies the smaller of the two). Never below
/// [`SHORTEST_HOLD_MS`](crate::topology::SHORTEST_HOLD_MS), never early:
/// a message expires only at the head of its queue, so at worst it waits
/// for one due earlier in the same hold, and never past the queue's TTL.
/// `None` when the TTL is no longer than what remains.
pub(super) fn expiration_ms(due_at_ms: u64, now_ms: u64, ttl_ms: u64) -> Option<u64> {
    let remaining = due_at_ms
        .saturating_sub(now_ms)
        .max(crate::topology::SHORTEST_HOLD_MS);
    (remaining < ttl_ms).then_some(remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_job_expires_when_due_within_its_bucket() {
        // 1.5 s due in a 10 s bucket: released after 1.5 s.
        assert_eq!(expiration_ms(11_500, 10_000, 10_000), Some(1_500));
        // Due at the bucket's end, or later (the first leg of a long
        // hold): the queue's TTL alone.
        assert_eq!(expiration_ms(20_000, 10_000, 10_000), None);
        assert_eq!(expiration_ms(90_000, 10_000, 10_000), None);
        // Due already, or nearly: the shortest hold.
        assert_eq!(expiration_ms(9_000, 10_000, 1_000), Some(50));
        assert_eq!(expiration_ms(10_010, 10_000, 1_000), Some(50));
        assert_eq!(expiration_ms(10_010, 10_000, 50), None);
    }

    #[test]
    fn a_delay_past_one_hold_is_held_in_legs_unless_refused() {
        let options = RabbitMqOptions::default();
        let longest = u64::try_from(queuey_core::LONGEST_WAIT.as_millis()).unwrap();
        let year = Duration::from_secs(365 * 86_400);
        assert_eq!(
            ttl_ms("q", year, HoldKind::Retry, &options).unwrap(),
            longest
        );
        assert_eq!(
            ttl_ms("q", Duration::ZERO, HoldKind::Retry, &options).unwrap(),
            0
        );
        let refusing = RabbitMqOptions::default().refuse_long_delays(true);
        assert!(matches!(
            ttl_ms("q", year, HoldKind::Deferral, &refusing),
            Err(Error::DelayTooLong { .. })
        ));
    }

    #[test]
    fn due_at_is_now_plus_the_delay() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let due = due_at_ms(Duration::from_millis(1_500));
        assert!(due >= now + 1_500 && due < now + 1_500 + 60_000, "{due}");
    }
}
