//! Holds: parking a job in a hold queue until its delay has passed, without
//! the hold queue's lease running out under it.
//!
//! # Quorum hold queues (the default)
//!
//! A quorum hold queue `q.deferred.quorum.{ttl}` has no lease: the broker
//! never deletes it, so it is declared once per process (and again only if a
//! publish into it comes back unroutable because an operator deleted it),
//! and a confirmed publish is all a job needs. The broker moves the job to
//! `q` when its TTL runs out, keeping it in the hold until `q` has
//! confirmed it (at-least-once dead-lettering), so a broker crash during
//! the move cannot lose it. Everything below is about classic holds.
//!
//! # The lease rule (classic hold queues)
//!
//! A classic hold queue `q.deferred.{ttl}` has `x-message-ttl = ttl` and
//! `x-expires = 2 * ttl`: the broker deletes it, **with the messages in
//! it**, once nobody has declared it for `2 * ttl`. Only a declaration whose
//! reply we waited for counts as renewing that lease; a publish renews
//! nothing. A job lands at `L` and is released at `L + ttl`. So a job is safe
//! when the lease still runs at `L + ttl`.
//!
//! **Reusing a declaration.** Let a declaration of the hold queue be sent at
//! `S` and answered. The broker handled it no earlier than `S`, so the lease
//! runs at least until `S + 2 * ttl`. If a publish into the queue is then
//! confirmed at `C < S + ttl / 2`, the job landed at `L <= C` and is
//! released by `L + ttl < S + 1.5 * ttl`: half a TTL before the lease can
//! end. (`C < S + ttl` would already be inside the lease, but with no room
//! to spare: a broker busy dead-lettering a backlog can handle the lease's
//! expiry before the release of jobs due just before it, and a benchmark run
//! on a loaded machine lost jobs that way. Half a TTL is the margin.) So one
//! declaration serves every publish confirmed within half a TTL of sending
//! it; a hold declares the queue again once the last declaration is older
//! than a quarter of a TTL (`Leases`), keeping the rest as room for the
//! publish's own round trip.
//!
//! **A late confirmation.** A publish confirmed at `C >= S + ttl / 2` is not
//! trusted by itself. The queue is then declared once more, which renews the
//! lease from the moment the broker handles it, `R > C`, to
//! `R + 2 * ttl > L + 2 * ttl`, a whole TTL past the job's release, but only
//! if the queue still existed at `R`: that holds when the reply came back
//! before `S + 2 * ttl`. Otherwise the job may have gone with its queue and
//! is published again (a duplicate at worst), up to [`LATE_HOLD_ATTEMPTS`]
//! times.
//!
//! **A queue already gone.** Every publish is `mandatory`, so a publish
//! into a hold queue that expired (or that an operator deleted) comes back
//! `NO_ROUTE` rather than vanishing; the queue is then declared and the job
//! published again, until the publish bound.
//!
//! **Short holds.** The argument needs the declaration, the publish and its
//! confirmation to fit in about one TTL. Holds shorter than
//! [`SHORTEST_HOLD`](crate::topology::SHORTEST_HOLD) cannot count on that
//! on a loaded broker, so they are rounded up to it: never early, and the
//! lease rule can be honoured.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::Connection;
use queuey_core::backend::{Granularity, HoldKind};
use queuey_core::{BackendError, BackendErrorKind, Error, QueueConfig};
use tokio::time::Instant;

use super::leases::Leases;
use super::publisher::Outgoing;
use super::send::Sender;
use crate::RabbitMqOptions;
use crate::declare::{HOLD_DECLARATION_CHANNELS, HoldDeclarer};
use crate::topology::HoldQueues;

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
}

impl Holds {
    pub(super) fn new() -> Self {
        Holds {
            declarer: HoldDeclarer::new(HOLD_DECLARATION_CHANNELS),
            leases: Leases::default(),
        }
    }

    /// Closes the declaration channels: later holds fail with
    /// [`Error::ShutDown`].
    pub(super) fn close(&self) {
        self.declarer.close();
    }

    /// Publishes `out` into its hold queue, whose TTL is `ttl_ms`, for
    /// `config`'s queue: declaring the hold queue when no usable
    /// declaration is known, and publishing again after each transient
    /// failure until the publish bound has passed.
    pub(super) async fn park(
        &self,
        sender: &Sender,
        config: &QueueConfig,
        ttl_ms: u64,
        out: Outgoing,
    ) -> Result<(), Error> {
        let hold = out.queue.as_str();
        let deadline = Instant::now() + sender.options.publish_timeout;
        sender
            .retrying(
                deadline,
                || format!("holding a job in `{hold}`"),
                || self.hold_once(sender, config, ttl_ms, &out, deadline),
            )
            .await
    }
    /// Publishes `out` into its hold queue on the current connection,
    /// declaring the queue when no usable declaration is known.
    async fn hold_once(
        &self,
        sender: &Sender,
        config: &QueueConfig,
        ttl_ms: u64,
        out: &Outgoing,
        deadline: Instant,
    ) -> Result<(), Error> {
        let hold = out.queue.as_str();
        let current = sender
            .connection(|| format!("declaring hold queue `{hold}`"))
            .await?;
        let result = self
            .hold_on(sender, &current.connection, config, ttl_ms, out, deadline)
            .await;
        if let Err(error) = &result {
            sender.link.saw(current.generation, error);
        }
        result
    }

    async fn hold_on(
        &self,
        sender: &Sender,
        connection: &Connection,
        config: &QueueConfig,
        ttl_ms: u64,
        out: &Outgoing,
        deadline: Instant,
    ) -> Result<(), Error> {
        let hold = out.queue.as_str();
        let ttl = Duration::from_millis(ttl_ms);
        let mut late = 0;
        let mut nacked = 0;
        loop {
            let holds = sender.options.hold_queues;
            let sent = match self.leases.usable(hold, ttl, holds) {
                Some(sent) => sent,
                None => {
                    self.declare_hold(connection, holds, hold, config, ttl_ms)
                        .await?
                }
            };
            match sender.publisher.publish(out.clone(), deadline).await {
                Ok(()) => {
                    if self
                        .lease_covers(connection, holds, hold, config, ttl_ms, sent)
                        .await?
                    {
                        return Ok(());
                    }
                    late += 1;
                    if late >= LATE_HOLD_ATTEMPTS {
                        return Err(Error::Backend(BackendError::new(
                            BackendErrorKind::Other,
                            format!(
                                "could not make sure a job held in `{hold}` outlives the queue's \
                                 {} ms lease ({late} tries): the broker took longer than the \
                                 {ttl_ms} ms hold to confirm it; raise the granularity",
                                2 * ttl_ms
                            ),
                        )));
                    }
                    tracing::warn!(hold = %hold, "a hold's confirmation came too late to prove its queue outlives it; publishing it again");
                }
                Err(Error::Backend(e))
                    if e.kind() == BackendErrorKind::Unroutable && Instant::now() < deadline =>
                {
                    // The hold queue expired before the publish landed (it
                    // waited behind other publishes), or an operator deleted
                    // it: nothing was stored. Declare it and publish again.
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

    /// Declares `hold`, waiting for the reply, and records the lease.
    /// Returns when the declaration was sent.
    async fn declare_hold(
        &self,
        connection: &Connection,
        holds: HoldQueues,
        hold: &str,
        config: &QueueConfig,
        ttl_ms: u64,
    ) -> Result<Instant, Error> {
        // Taken before the declaration is sent: the broker starts the lease
        // when it handles the declaration, which is no earlier.
        let sent = Instant::now();
        self.declarer
            .declare(connection, hold, holds, config, ttl_ms)
            .await?;
        self.leases
            .renewed(hold, sent, Duration::from_millis(ttl_ms));
        Ok(sent)
    }

    /// Whether a job just confirmed into `hold`, relying on the declaration
    /// sent at `sent`, is sure to be released rather than deleted with its
    /// queue (see the module documentation).
    async fn lease_covers(
        &self,
        connection: &Connection,
        holds: HoldQueues,
        hold: &str,
        config: &QueueConfig,
        ttl_ms: u64,
        sent: Instant,
    ) -> Result<bool, Error> {
        let ttl = Duration::from_millis(ttl_ms);
        if holds == HoldQueues::Quorum || sent.elapsed() < ttl / 2 {
            return Ok(true);
        }
        self.declare_hold(connection, holds, hold, config, ttl_ms)
            .await?;
        Ok(sent.elapsed() < 2 * ttl)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
