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
//! than a quarter of a TTL ([`Leases`]), keeping the rest as room for the
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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::Connection;
use queuey_core::backend::HoldKind;
use queuey_core::{BackendError, BackendErrorKind, Envelope, Error, QueueConfig};
use tokio::time::Instant;

use crate::backend::Inner;
use crate::publisher::Outgoing;
use crate::topology::HoldQueues;
use crate::{properties, topology};

/// How often a hold whose lease could not be shown to cover its job is
/// published again before the hold fails.
const LATE_HOLD_ATTEMPTS: u32 = 5;

/// How often a hold publish the broker refused (nacked) is published again
/// before the hold fails. A quorum hold queue occasionally refuses a
/// publish (a few in 20,000 on a busy broker, measured): nothing was
/// stored, so publishing again is safe, and it saves the delivery a trip
/// back through the broker.
const NACKED_HOLD_ATTEMPTS: u32 = 3;

/// Remembered leases past this many are pruned of those no longer usable.
const LEASES_KEPT: usize = 1024;

/// The last waited-for declaration of each hold queue: when it was sent.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    sent: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Leases {
    /// When the declaration a publish into `hold` may rely on was sent: for
    /// a classic hold, if it is younger than a quarter of `ttl`; for a
    /// quorum hold, which has no lease, any declaration still remembered.
    fn usable(&self, hold: &str, ttl: Duration, holds: HoldQueues) -> Option<Instant> {
        let sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.get(hold)
            .map(|(at, _)| *at)
            .filter(|at| holds == HoldQueues::Quorum || at.elapsed() < ttl / 4)
    }

    /// Records a declaration of `hold` sent at `at` that was answered.
    fn renewed(&self, hold: &str, at: Instant, ttl: Duration) {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if sent.len() >= LEASES_KEPT && !sent.contains_key(hold) {
            sent.retain(|_, (at, ttl)| at.elapsed() < *ttl / 4);
        }
        let entry = sent.entry(hold.to_owned()).or_insert((at, ttl));
        if entry.0 < at {
            *entry = (at, ttl);
        }
    }

    /// Forgets the lease of a hold queue found missing.
    fn forget(&self, hold: &str) {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(hold);
    }
}

impl Inner {
    /// Parks `envelope` in the hold queue for `delay` (rounded up), or
    /// publishes it at once for a zero delay. Every refusal happens before
    /// anything is declared or published.
    pub(crate) async fn hold(
        &self,
        envelope: &Envelope,
        delay: Duration,
        kind: HoldKind,
    ) -> Result<(), Error> {
        self.hold_until(envelope, delay, due_at_ms(delay), kind)
            .await
    }

    /// Parks `envelope` for `delay`, stamping `due_at_ms` as its due time
    /// (a job held again after coming back early keeps its first one).
    ///
    /// A delay longer than one hold queue keeps a job
    /// ([`LONGEST_WAIT`](queuey_core::LONGEST_WAIT), 24 days) is held in
    /// legs: the first leg waits 24 days, and the consumer that gets the job
    /// back before its due time holds it again for the rest (see
    /// [`rehold`](crate::rehold)). With
    /// [`RabbitMqOptions::refuse_long_delays`](crate::RabbitMqOptions::refuse_long_delays)
    /// such a delay is refused instead, as the first version did.
    pub(crate) async fn hold_until(
        &self,
        envelope: &Envelope,
        delay: Duration,
        due_at_ms: u64,
        kind: HoldKind,
    ) -> Result<(), Error> {
        let queue = envelope.queue.as_str();
        let config = self.declared(queue).ok_or_else(|| Error::UnknownQueue {
            queue: queue.to_owned(),
        })?;
        let granularity = match kind {
            HoldKind::Retry => self.options.settings().retry_granularity(),
            HoldKind::Deferral => self.options.settings().deferred_granularity(),
        };
        let chained = delay > queuey_core::LONGEST_WAIT && !self.options.refuse_long_delays;
        let ttl_ms = if chained {
            // A whole number of seconds under the cap: a hold queue like any
            // other, whatever the granularity.
            u64::try_from(queuey_core::LONGEST_WAIT.as_millis()).unwrap_or(u64::MAX)
        } else {
            match topology::hold_delay_ms(queue, delay, granularity) {
                // A delay that fits one hold queue but whose bucket does
                // not (a relative granularity rounds 23 days past the cap):
                // the longest hold queue is still long enough.
                Err(Error::DelayTooLong { .. }) if !self.options.refuse_long_delays => {
                    topology::MAX_DEFERRAL_MS
                }
                other => other?,
            }
        };
        let prepared = match kind {
            HoldKind::Deferral if envelope.priority != config.top_priority() => {
                self.prepare(&envelope.clone().with_priority(config.top_priority()))?
            }
            _ => self.prepare(envelope)?,
        };
        if ttl_ms == 0 {
            return self.send(prepared.outgoing(queue)).await;
        }
        let ttl_ms = ttl_ms.max(topology::SHORTEST_HOLD_MS);
        let hold = self.options.hold_queues.name(
            queue,
            self.options.settings().deferred_suffix(),
            ttl_ms,
        )?;
        let mut out = prepared.outgoing(&hold);
        out.properties = properties::with_due_at(out.properties, due_at_ms);
        let deadline = Instant::now() + self.options.publish_timeout;
        self.retrying(
            deadline,
            || format!("holding a job in `{hold}`"),
            || self.hold_once(&config, ttl_ms, &out, deadline),
        )
        .await
    }

    /// Publishes `out` into its hold queue on the current connection,
    /// declaring the queue when no usable declaration is known.
    async fn hold_once(
        &self,
        config: &QueueConfig,
        ttl_ms: u64,
        out: &Outgoing,
        deadline: Instant,
    ) -> Result<(), Error> {
        let hold = out.queue.as_str();
        let current = self
            .publishing_connection(|| format!("declaring hold queue `{hold}`"))
            .await?;
        let result = self
            .hold_on(&current.connection, config, ttl_ms, out, deadline)
            .await;
        if let Err(error) = &result {
            self.saw(current.generation, error);
        }
        result
    }

    async fn hold_on(
        &self,
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
            let holds = self.options.hold_queues;
            let sent = match self.leases.usable(hold, ttl, holds) {
                Some(sent) => sent,
                None => self.declare_hold(connection, hold, config, ttl_ms).await?,
            };
            match self.publisher.publish(out.clone(), deadline).await {
                Ok(()) => {
                    if self
                        .lease_covers(connection, hold, config, ttl_ms, sent)
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
        hold: &str,
        config: &QueueConfig,
        ttl_ms: u64,
    ) -> Result<Instant, Error> {
        // Taken before the declaration is sent: the broker starts the lease
        // when it handles the declaration, which is no earlier.
        let sent = Instant::now();
        self.holds
            .declare(connection, hold, self.options.hold_queues, config, ttl_ms)
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
        hold: &str,
        config: &QueueConfig,
        ttl_ms: u64,
        sent: Instant,
    ) -> Result<bool, Error> {
        let ttl = Duration::from_millis(ttl_ms);
        if self.options.hold_queues == HoldQueues::Quorum || sent.elapsed() < ttl / 2 {
            return Ok(true);
        }
        self.declare_hold(connection, hold, config, ttl_ms).await?;
        Ok(sent.elapsed() < 2 * ttl)
    }
}

/// When a job held for `delay` from now becomes due, in milliseconds since
/// the Unix epoch (the `queuey-due-at` header).
fn due_at_ms(delay: Duration) -> u64 {
    // Rounded up, so that a due time is never earlier than asked.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from((now + delay).as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch, rounded down: the clock a consumer
/// reads due times on, so that a job is never taken for due early.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_reused_for_a_quarter_of_a_ttl() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(1_000);
        let classic = HoldQueues::Classic;
        assert_eq!(leases.usable("h", ttl, classic), None);
        let sent = Instant::now();
        leases.renewed("h", sent, ttl);
        tokio::time::advance(Duration::from_millis(249)).await;
        assert_eq!(leases.usable("h", ttl, classic), Some(sent));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(leases.usable("h", ttl, classic), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quorum_hold_is_declared_once_until_found_gone() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(1_000);
        let quorum = HoldQueues::Quorum;
        assert_eq!(leases.usable("h", ttl, quorum), None);
        let sent = Instant::now();
        leases.renewed("h", sent, ttl);
        tokio::time::advance(Duration::from_secs(3_600)).await;
        assert_eq!(leases.usable("h", ttl, quorum), Some(sent));
        leases.forget("h");
        assert_eq!(leases.usable("h", ttl, quorum), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_declaration_never_replaces_a_newer_one() {
        let leases = Leases::default();
        let ttl = Duration::from_secs(10);
        let old = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        let new = Instant::now();
        leases.renewed("h", new, ttl);
        leases.renewed("h", old, ttl);
        assert_eq!(leases.usable("h", ttl, HoldQueues::Classic), Some(new));
        leases.forget("h");
        assert_eq!(leases.usable("h", ttl, HoldQueues::Classic), None);
    }

    #[tokio::test(start_paused = true)]
    async fn stale_leases_are_pruned() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(10);
        for i in 0..LEASES_KEPT {
            leases.renewed(&format!("h{i}"), Instant::now(), ttl);
        }
        tokio::time::advance(ttl).await;
        leases.renewed("fresh", Instant::now(), ttl);
        let kept = leases.sent.lock().unwrap().len();
        assert_eq!(kept, 1);
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
