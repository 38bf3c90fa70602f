//! Hold queues: their two families, names and arguments.
//!
//! A hold queue's arguments are a function of its name alone, so processes
//! of different versions or settings never disagree about one queue (which
//! the broker would answer with `PRECONDITION_FAILED`, forever). The two
//! families therefore have names of their own: a fleet that mixes them
//! keeps working, each process using its own family, both releasing into
//! the same work queue.

use queuey_core::{Error, MAX_DEFERRAL_MS, MAX_QUEUE_NAME_BYTES};

use super::{
    QueueArguments, classic, dead_letter_queue_name, insert_at_least_once_dead_lettering, int,
    no_room, quorum, saturating_i64, suspect_queue_name, text,
};

/// Which kind of hold queue a backend parks delayed jobs in.
///
/// - [`HoldQueues::Quorum`] (the default): durable quorum queues that
///   release their jobs with at-least-once dead-lettering. A job in a hold
///   survives a broker crash and is moved back to its work queue only once
///   the work queue has it. Measured: no job lost in 10 broker `kill -9`s
///   (29,593 held jobs), nor in the crash tests of this crate's suite.
///   The broker never deletes them (quorum queues renew `x-expires` only on
///   reads, so no lease can be kept by a producer), so their number per work
///   queue is bounded by the granularity instead: see
///   [`RabbitMqOptions::hold_queues`](crate::RabbitMqOptions::hold_queues).
///   The backend prunes the empty ones it stopped using only when it can
///   count their jobs, which AMQP cannot: with the `management` feature or
///   a [`RabbitMqOptions::hold_census`](crate::RabbitMqOptions::hold_census).
///   In the default build it prunes none; `queuey holds prune` does (see
///   [Pruning hold queues](crate#pruning-hold-queues)).
///   Needs RabbitMQ 3.10 or later.
/// - [`HoldQueues::Classic`]: the first version's holds, classic queues with
///   an `x-expires` lease. The broker releases their jobs **at most once**:
///   a broker crash while jobs move from the hold to the work queue loses
///   them (108 and 221 jobs lost in 2 of 5 `kill -9`s in our measurements).
///   They can never feed a quorum work queue, which loses the held jobs on
///   any broker restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldQueues {
    /// Durable quorum hold queues, at-least-once release (the default).
    #[default]
    Quorum,
    /// The first version's classic hold queues, at-most-once release.
    Classic,
}

impl HoldQueues {
    /// The name of `queue`'s hold queue for `ttl_ms` in this family.
    ///
    /// Fails for a TTL of 0 (a zero delay needs no hold), for one over
    /// [`MAX_DEFERRAL_MS`], and when the name would pass
    /// [`MAX_QUEUE_NAME_BYTES`].
    pub fn name(self, queue: &str, deferred_suffix: &str, ttl_ms: u64) -> Result<String, Error> {
        if ttl_ms == 0 {
            return Err(Error::invalid_config(format!(
                "queue `{queue}`: a hold needs a delay of at least 1 ms"
            )));
        }
        if ttl_ms > MAX_DEFERRAL_MS {
            return Err(Error::DelayTooLong {
                queue: queue.to_owned(),
                delay_ms: u128::from(ttl_ms),
                max_ms: MAX_DEFERRAL_MS,
            });
        }
        let name = self.unchecked_name(queue, deferred_suffix, ttl_ms);
        if name.len() > MAX_QUEUE_NAME_BYTES {
            return Err(no_room(queue, "hold queues", &name));
        }
        Ok(name)
    }

    /// The arguments of `queue`'s hold queue for `ttl_ms` in this family.
    /// Never `x-max-priority`.
    pub fn arguments(self, queue: &str, ttl_ms: u64) -> QueueArguments {
        let ttl = saturating_i64(u128::from(ttl_ms));
        match self {
            HoldQueues::Quorum => {
                let mut args = quorum();
                args.insert("x-message-ttl", int(ttl));
                insert_at_least_once_dead_lettering(&mut args, queue);
                args
            }
            HoldQueues::Classic => {
                let mut args = classic();
                args.insert("x-message-ttl", int(ttl));
                args.insert("x-dead-letter-exchange", text(""));
                args.insert("x-dead-letter-routing-key", text(queue));
                args.insert("x-expires", int(ttl.saturating_mul(2)));
                args
            }
        }
    }

    /// Whether the name's hold queue belongs to this family, and for which
    /// TTL: `Some(ttl_ms)` for `{queue}{deferred_suffix}[.quorum].{ttl_ms}`.
    pub fn parse(self, queue: &str, deferred_suffix: &str, name: &str) -> Option<u64> {
        let rest = name.strip_prefix(queue)?.strip_prefix(deferred_suffix)?;
        let digits = match self {
            HoldQueues::Quorum => rest.strip_prefix(".quorum.")?,
            HoldQueues::Classic => rest.strip_prefix('.')?,
        };
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || digits.starts_with('0')
        {
            return None;
        }
        digits
            .parse()
            .ok()
            .filter(|ttl| (1..=MAX_DEFERRAL_MS).contains(ttl))
    }

    /// The longest hold-queue name `queue` can ever need in this family: the
    /// one for [`MAX_DEFERRAL_MS`].
    pub fn longest_name(self, queue: &str, deferred_suffix: &str) -> String {
        self.unchecked_name(queue, deferred_suffix, MAX_DEFERRAL_MS)
    }

    fn unchecked_name(self, queue: &str, deferred_suffix: &str, ttl_ms: u64) -> String {
        match self {
            HoldQueues::Quorum => format!("{queue}{deferred_suffix}.quorum.{ttl_ms}"),
            HoldQueues::Classic => format!("{queue}{deferred_suffix}.{ttl_ms}"),
        }
    }
}

/// The name of the classic hold queue for `ttl_ms`:
/// `{queue}{deferred_suffix}.{ttl_ms}` (see [`HoldQueues::name`]).
pub fn hold_queue_name(queue: &str, deferred_suffix: &str, ttl_ms: u64) -> Result<String, Error> {
    HoldQueues::Classic.name(queue, deferred_suffix, ttl_ms)
}

/// The name of the quorum hold queue for `ttl_ms`:
/// `{queue}{deferred_suffix}.quorum.{ttl_ms}` (see [`HoldQueues::name`]).
pub fn quorum_hold_queue_name(
    queue: &str,
    deferred_suffix: &str,
    ttl_ms: u64,
) -> Result<String, Error> {
    HoldQueues::Quorum.name(queue, deferred_suffix, ttl_ms)
}

/// The arguments of `queue`'s classic hold queue for `ttl_ms`, with its
/// `x-expires = 2 * ttl_ms` lease.
pub fn hold_queue_arguments(queue: &str, ttl_ms: u64) -> QueueArguments {
    HoldQueues::Classic.arguments(queue, ttl_ms)
}

/// The arguments of `queue`'s quorum hold queue for `ttl_ms`: at-least-once
/// release into `queue`, and no `x-expires`.
pub fn quorum_hold_queue_arguments(queue: &str, ttl_ms: u64) -> QueueArguments {
    HoldQueues::Quorum.arguments(queue, ttl_ms)
}

/// Checks up front that every name derived from `queue` fits in
/// [`MAX_QUEUE_NAME_BYTES`]: its longest hold queue of the family `holds`
/// and, when given, its dead-letter queue and its suspect queue.
pub fn check_room(
    queue: &str,
    deferred_suffix: &str,
    dead_suffix: Option<&str>,
    suspect_suffix: Option<&str>,
    holds: HoldQueues,
) -> Result<(), Error> {
    let hold = holds.longest_name(queue, deferred_suffix);
    if hold.len() > MAX_QUEUE_NAME_BYTES {
        return Err(no_room(queue, "hold queues", &hold));
    }
    if let Some(suffix) = dead_suffix {
        let dead = dead_letter_queue_name(queue, suffix);
        if dead.len() > MAX_QUEUE_NAME_BYTES {
            return Err(no_room(queue, "dead-letter queue", &dead));
        }
    }
    if let Some(suffix) = suspect_suffix {
        let suspect = suspect_queue_name(queue, suffix);
        if suspect.len() > MAX_QUEUE_NAME_BYTES {
            return Err(no_room(queue, "suspect queue", &suspect));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{int, text};
    use super::*;
    use proptest::prelude::*;
    use queuey_core::backend::hold_delay_ms;
    use std::time::Duration;

    const FAMILIES: [HoldQueues; 2] = [HoldQueues::Quorum, HoldQueues::Classic];

    #[test]
    fn names() {
        assert_eq!(
            hold_queue_name("app.emails", ".deferred", 30_000).unwrap(),
            "app.emails.deferred.30000"
        );
        assert_eq!(
            quorum_hold_queue_name("app.emails", ".deferred", 30_000).unwrap(),
            "app.emails.deferred.quorum.30000"
        );
        assert_eq!(
            HoldQueues::Classic.longest_name("q", ".deferred"),
            "q.deferred.2147483647"
        );
        assert_eq!(
            HoldQueues::Quorum.longest_name("q", ".deferred"),
            "q.deferred.quorum.2147483647"
        );
    }

    #[test]
    fn hold_names_refuse_zero_and_too_long_delays() {
        for family in FAMILIES {
            assert!(family.name("q", ".deferred", 0).is_err());
            assert!(family.name("q", ".deferred", MAX_DEFERRAL_MS).is_ok());
            let e = family
                .name("q", ".deferred", MAX_DEFERRAL_MS + 1)
                .unwrap_err();
            assert!(matches!(e, Error::DelayTooLong { .. }), "{e:?}");
        }
    }

    #[test]
    fn names_parse_back_within_their_family_only() {
        assert_eq!(
            HoldQueues::Quorum.parse("q", ".deferred", "q.deferred.quorum.5000"),
            Some(5_000)
        );
        assert_eq!(
            HoldQueues::Classic.parse("q", ".deferred", "q.deferred.5000"),
            Some(5_000)
        );
        assert_eq!(
            HoldQueues::Classic.parse("q", ".deferred", "q.deferred.quorum.5000"),
            None
        );
        assert_eq!(
            HoldQueues::Quorum.parse("q", ".deferred", "q.deferred.5000"),
            None
        );
        for odd in [
            "q.deferred.",
            "q.deferred.05",
            "q.deferred.0",
            "q.deferred.1x",
            "q.dead",
        ] {
            assert_eq!(
                HoldQueues::Classic.parse("q", ".deferred", odd),
                None,
                "{odd}"
            );
        }
    }

    #[test]
    fn room_for_hold_queues_is_checked_with_the_documented_message() {
        // ".deferred.2147483647" is 20 bytes: 235 fits exactly, 236 does not.
        let classic = HoldQueues::Classic;
        assert!(
            check_room(
                &"x".repeat(235),
                ".deferred",
                Some(".dead"),
                Some(".suspect"),
                classic
            )
            .is_ok()
        );
        let q = "x".repeat(241);
        let e = check_room(&q, ".deferred", Some(".dead"), None, classic).unwrap_err();
        let expected = format!(
            "queue `{q}` leaves no room for its hold queues: `{q}.deferred.2147483647` is 261 bytes, \
             over the 255-byte AMQP limit"
        );
        assert!(
            matches!(e, Error::InvalidConfig(ref m) if *m == expected),
            "{e}"
        );
        // Quorum hold names are 7 bytes longer.
        assert!(
            check_room(
                &"x".repeat(228),
                ".deferred",
                None,
                None,
                HoldQueues::Quorum
            )
            .is_ok()
        );
        assert!(
            check_room(
                &"x".repeat(229),
                ".deferred",
                None,
                None,
                HoldQueues::Quorum
            )
            .is_err()
        );
    }

    #[test]
    fn room_for_the_dead_letter_queue_is_checked_when_it_is_declared() {
        let q = "x".repeat(220);
        let long_dead = "-".repeat(40);
        let e = check_room(&q, "", Some(&long_dead), None, HoldQueues::Quorum).unwrap_err();
        assert!(e.to_string().contains("dead-letter queue"), "{e}");
        assert!(check_room(&q, "", None, None, HoldQueues::Quorum).is_ok());
    }

    #[test]
    fn classic_hold_arguments_expire_after_twice_the_ttl() {
        let args = hold_queue_arguments("app.emails", 30_000);
        assert_eq!(
            args,
            QueueArguments::from([
                ("x-queue-type", text("classic")),
                ("x-message-ttl", int(30_000)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text("app.emails")),
                ("x-expires", int(60_000)),
            ])
        );
        // At the cap, x-expires no longer fits in 32 bits.
        let max = hold_queue_arguments("q", MAX_DEFERRAL_MS);
        assert_eq!(max.get("x-expires"), Some(&int(4_294_967_294)));
        assert!(!max.contains_key("x-max-priority"));
    }

    #[test]
    fn quorum_hold_arguments_release_at_least_once_and_never_expire() {
        assert_eq!(
            quorum_hold_queue_arguments("app.emails", 30_000),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-message-ttl", int(30_000)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text("app.emails")),
                ("x-dead-letter-strategy", text("at-least-once")),
                ("x-overflow", text("reject-publish")),
            ])
        );
    }

    fn queue_name() -> impl Strategy<Value = String> {
        // ASCII and multi-byte characters, up to and past the limit.
        proptest::string::string_regex("[a-z.é日_-]{1,140}").expect("valid regex")
    }

    fn family() -> impl Strategy<Value = HoldQueues> {
        prop_oneof![Just(HoldQueues::Quorum), Just(HoldQueues::Classic)]
    }

    proptest! {
        #[test]
        fn hold_names_fit_or_fail(queue in queue_name(), ttl in 1u64..=MAX_DEFERRAL_MS, f in family()) {
            match f.name(&queue, ".deferred", ttl) {
                Ok(name) => {
                    prop_assert!(name.len() <= MAX_QUEUE_NAME_BYTES);
                    prop_assert_eq!(f.parse(&queue, ".deferred", &name), Some(ttl));
                }
                Err(_) => prop_assert!(f.unchecked_name(&queue, ".deferred", ttl).len() > MAX_QUEUE_NAME_BYTES),
            }
        }

        #[test]
        fn a_declared_queue_has_room_for_every_hold(queue in queue_name(), ttl in 1u64..=MAX_DEFERRAL_MS, f in family()) {
            if check_room(&queue, ".deferred", Some(".dead"), Some(".suspect"), f).is_ok() {
                prop_assert!(f.name(&queue, ".deferred", ttl).is_ok());
            }
        }

        #[test]
        fn hold_names_are_injective_across_both_families(
            a in queue_name(), b in queue_name(),
            ta in 1u64..=MAX_DEFERRAL_MS, tb in 1u64..=MAX_DEFERRAL_MS,
            fa in family(), fb in family(),
        ) {
            if let (Ok(na), Ok(nb)) = (fa.name(&a, ".deferred", ta), fb.name(&b, ".deferred", tb)) {
                prop_assert_eq!(na == nb, a == b && ta == tb && fa == fb);
            }
        }

        #[test]
        fn holds_are_never_early(delay_us in 0u64..5_000_000_000, g_ms in 0u64..600_000) {
            let delay = Duration::from_micros(delay_us);
            let g = Duration::from_millis(g_ms);
            if let Ok(ttl) = hold_delay_ms("q", delay, g) {
                prop_assert!(Duration::from_millis(ttl) >= delay);
                prop_assert!(ttl <= MAX_DEFERRAL_MS);
                for f in FAMILIES {
                    let args = f.arguments("q", ttl);
                    prop_assert_eq!(args.get("x-message-ttl"), Some(&int(ttl as i64)));
                }
                let args = hold_queue_arguments("q", ttl);
                prop_assert_eq!(args.get("x-expires"), Some(&int(2 * ttl as i64)));
                prop_assert!(!quorum_hold_queue_arguments("q", ttl).contains_key("x-expires"));
            }
        }
    }
}
