//! The broker objects this backend creates, as pure functions: queue names,
//! queue arguments, delay rounding and the limits that apply to them.
//!
//! Nothing here talks to a broker, so every rule can be checked in a unit
//! test: a hold queue's arguments depend on its name alone, names never pass
//! AMQP's 255-byte limit without an error, and rounding never releases a job
//! early.
//!
//! | queue | created by | arguments |
//! |---|---|---|
//! | `q` | [`declare`](queuey_core::Backend::declare) | `x-queue-type = classic`; `x-message-ttl` if the config sets a TTL; `x-max-priority` if it has priority levels |
//! | `q{dead_suffix}` | `declare`, when dead-letter queues are on | `x-queue-type = classic` only |
//! | `q{deferred_suffix}.{ttl_ms}` | a hold publish, unless a declaration of it sent less than a quarter of a TTL ago can be relied on | `x-message-ttl = ttl_ms`, `x-dead-letter-exchange = ""`, `x-dead-letter-routing-key = q`, `x-expires = 2 * ttl_ms`, `x-queue-type = classic` |

use std::collections::BTreeMap;

use queuey_core::{Error, QueueConfig};

pub use queuey_core::MAX_DEFERRAL_MS;
pub use queuey_core::backend::{effective_granularity_ms, hold_delay_ms, round_up_ms};
pub use queuey_core::queue::MAX_QUEUE_NAME_BYTES;

/// Header of a dead letter: why the job died.
pub const REASON_HEADER: &str = "x-death-reason";
/// Header of a dead letter: the work queue the job was consumed from.
pub const ORIGINAL_QUEUE_HEADER: &str = "x-original-queue";
/// Header of a dead letter: the attempts the job had made.
pub const ATTEMPTS_HEADER: &str = "x-attempts";
/// Header of every hold publish: when the job becomes due, in milliseconds
/// since the Unix epoch, as a 64-bit integer. Operators' tools and the
/// consumers' never-early check read it under exactly this name.
pub const DUE_AT_HEADER: &str = "queuey-due-at";

/// The queue type every queue is declared with.
///
/// Sent explicitly so that a vhost whose default queue type is quorum still
/// gets classic queues: quorum queues refuse `x-max-priority`, and hold
/// queues must never be quorum queues.
pub const QUEUE_TYPE: &str = "classic";

/// The shortest hold, in milliseconds: shorter holds are rounded up to it.
///
/// A hold queue's lease (`x-expires = 2 * ttl`) only protects a job whose
/// declaration, publish and confirmation fit in about one TTL; with a few
/// milliseconds that fails on any loaded broker, and the job would have to be
/// published again and again. Rounding up keeps holds never early.
pub const SHORTEST_HOLD_MS: u64 = 50;

/// A queue argument's value, free of any AMQP client type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgumentValue {
    /// An integer (sent as a 32-bit integer when it fits, else 64-bit).
    Integer(i64),
    /// A string (always sent as an AMQP long string).
    Text(String),
}

/// The arguments of one queue declaration, by argument name.
pub type QueueArguments = BTreeMap<&'static str, ArgumentValue>;

/// The name of `queue`'s dead-letter queue: `{queue}{dead_suffix}`.
pub fn dead_letter_queue_name(queue: &str, dead_suffix: &str) -> String {
    format!("{queue}{dead_suffix}")
}

/// The name of the hold queue for `ttl_ms`: `{queue}{deferred_suffix}.{ttl_ms}`.
///
/// Fails for a TTL of 0 (a zero delay needs no hold), for one over
/// [`MAX_DEFERRAL_MS`], and when the name would pass
/// [`MAX_QUEUE_NAME_BYTES`].
pub fn hold_queue_name(queue: &str, deferred_suffix: &str, ttl_ms: u64) -> Result<String, Error> {
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
    let name = format!("{queue}{deferred_suffix}.{ttl_ms}");
    if name.len() > MAX_QUEUE_NAME_BYTES {
        return Err(no_room(queue, "hold queues", &name));
    }
    Ok(name)
}

/// The longest hold-queue name `queue` can ever need: the one for
/// [`MAX_DEFERRAL_MS`].
pub fn longest_hold_queue_name(queue: &str, deferred_suffix: &str) -> String {
    format!("{queue}{deferred_suffix}.{MAX_DEFERRAL_MS}")
}

/// Checks up front that every name derived from `queue` fits in
/// [`MAX_QUEUE_NAME_BYTES`]: its longest hold queue and, when given, its
/// dead-letter queue.
pub fn check_room(
    queue: &str,
    deferred_suffix: &str,
    dead_suffix: Option<&str>,
) -> Result<(), Error> {
    let hold = longest_hold_queue_name(queue, deferred_suffix);
    if hold.len() > MAX_QUEUE_NAME_BYTES {
        return Err(no_room(queue, "hold queues", &hold));
    }
    if let Some(suffix) = dead_suffix {
        let dead = dead_letter_queue_name(queue, suffix);
        if dead.len() > MAX_QUEUE_NAME_BYTES {
            return Err(no_room(queue, "dead-letter queue", &dead));
        }
    }
    Ok(())
}

fn no_room(queue: &str, what: &str, name: &str) -> Error {
    Error::invalid_config(format!(
        "queue `{queue}` leaves no room for its {what}: `{name}` is {} bytes, over the \
         {MAX_QUEUE_NAME_BYTES}-byte AMQP limit",
        name.len()
    ))
}

/// The arguments of the work queue `q`.
pub fn work_queue_arguments(config: &QueueConfig) -> QueueArguments {
    let mut args = classic();
    if let Some(ttl) = config.settings().message_ttl() {
        // Rounded up, so the broker never discards a message before its TTL.
        let ms = ttl.as_nanos().div_ceil(1_000_000);
        args.insert("x-message-ttl", ArgumentValue::Integer(saturating_i64(ms)));
    }
    if let Some(levels) = config.priority_levels() {
        args.insert("x-max-priority", ArgumentValue::Integer(i64::from(levels)));
    }
    args
}

/// The arguments of a dead-letter queue: only the queue type.
pub fn dead_letter_queue_arguments() -> QueueArguments {
    classic()
}

/// The arguments of `queue`'s hold queue for `ttl_ms`.
///
/// They are a function of the name alone (never of a setting), so every
/// process computes the same arguments for the same hold queue and none is
/// refused with `PRECONDITION_FAILED`. Never `x-max-priority`.
pub fn hold_queue_arguments(queue: &str, ttl_ms: u64) -> QueueArguments {
    let ttl = saturating_i64(u128::from(ttl_ms));
    let mut args = classic();
    args.insert("x-message-ttl", ArgumentValue::Integer(ttl));
    args.insert("x-dead-letter-exchange", ArgumentValue::Text(String::new()));
    args.insert(
        "x-dead-letter-routing-key",
        ArgumentValue::Text(queue.to_owned()),
    );
    args.insert("x-expires", ArgumentValue::Integer(ttl.saturating_mul(2)));
    args
}

fn classic() -> QueueArguments {
    QueueArguments::from([("x-queue-type", ArgumentValue::Text(QUEUE_TYPE.to_owned()))])
}

fn saturating_i64(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn int(n: i64) -> ArgumentValue {
        ArgumentValue::Integer(n)
    }

    fn text(s: &str) -> ArgumentValue {
        ArgumentValue::Text(s.to_owned())
    }

    #[test]
    fn names() {
        assert_eq!(
            dead_letter_queue_name("app.emails", ".dead"),
            "app.emails.dead"
        );
        assert_eq!(
            dead_letter_queue_name("app.emails", "-dlq"),
            "app.emails-dlq"
        );
        assert_eq!(
            hold_queue_name("app.emails", ".deferred", 30_000).unwrap(),
            "app.emails.deferred.30000"
        );
        assert_eq!(
            longest_hold_queue_name("q", ".deferred"),
            "q.deferred.2147483647"
        );
    }

    #[test]
    fn hold_names_refuse_zero_and_too_long_delays() {
        assert!(hold_queue_name("q", ".deferred", 0).is_err());
        assert!(hold_queue_name("q", ".deferred", MAX_DEFERRAL_MS).is_ok());
        let e = hold_queue_name("q", ".deferred", MAX_DEFERRAL_MS + 1).unwrap_err();
        assert!(matches!(e, Error::DelayTooLong { .. }), "{e:?}");
    }

    #[test]
    fn room_for_hold_queues_is_checked_with_the_seed_message() {
        // ".deferred.2147483647" is 20 bytes: 235 fits exactly, 236 does not.
        assert!(check_room(&"x".repeat(235), ".deferred", Some(".dead")).is_ok());
        let q = "x".repeat(241);
        let e = check_room(&q, ".deferred", Some(".dead")).unwrap_err();
        let expected = format!(
            "queue `{q}` leaves no room for its hold queues: `{q}.deferred.2147483647` is 261 bytes, \
             over the 255-byte AMQP limit"
        );
        assert!(
            matches!(e, Error::InvalidConfig(ref m) if *m == expected),
            "{e}"
        );
    }

    #[test]
    fn room_for_the_dead_letter_queue_is_checked_when_it_is_declared() {
        let q = "x".repeat(230);
        let long_dead = "-".repeat(30);
        let e = check_room(&q, "", Some(&long_dead)).unwrap_err();
        assert!(e.to_string().contains("dead-letter queue"), "{e}");
        assert!(check_room(&q, "", None).is_ok());
    }

    #[test]
    fn work_queue_arguments_follow_the_config() {
        let plain = work_queue_arguments(&QueueConfig::new("q").max_priority(0));
        assert_eq!(
            plain,
            QueueArguments::from([("x-queue-type", text("classic"))])
        );

        let full = work_queue_arguments(
            &QueueConfig::new("q")
                .message_ttl(Duration::from_micros(1_500))
                .max_priority(7),
        );
        assert_eq!(
            full,
            QueueArguments::from([
                ("x-queue-type", text("classic")),
                ("x-message-ttl", int(2)),
                ("x-max-priority", int(7)),
            ])
        );
        // The default config has ten priority levels.
        assert_eq!(
            work_queue_arguments(&QueueConfig::new("q")).get("x-max-priority"),
            Some(&int(10))
        );
    }

    #[test]
    fn dead_letter_queues_carry_only_the_queue_type() {
        assert_eq!(
            dead_letter_queue_arguments(),
            QueueArguments::from([("x-queue-type", text("classic"))])
        );
    }

    #[test]
    fn hold_queue_arguments_expire_after_twice_the_ttl() {
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
    fn rounding_is_the_cores() {
        let s = Duration::from_secs(1);
        assert_eq!(round_up_ms(Duration::from_millis(1), s), 1_000);
        assert_eq!(effective_granularity_ms(Duration::ZERO), 1);
        assert!(hold_delay_ms("q", Duration::from_millis(MAX_DEFERRAL_MS - 1), s).is_err());
    }

    fn queue_name() -> impl Strategy<Value = String> {
        // ASCII and multi-byte characters, up to and past the limit.
        proptest::string::string_regex("[a-z.é日_-]{1,140}").expect("valid regex")
    }

    proptest! {
        #[test]
        fn hold_names_fit_or_fail(queue in queue_name(), ttl in 1u64..=MAX_DEFERRAL_MS) {
            match hold_queue_name(&queue, ".deferred", ttl) {
                Ok(name) => prop_assert!(name.len() <= MAX_QUEUE_NAME_BYTES),
                Err(_) => prop_assert!(queue.len() + ".deferred.".len() + ttl.to_string().len() > MAX_QUEUE_NAME_BYTES),
            }
        }

        #[test]
        fn a_declared_queue_has_room_for_every_hold(queue in queue_name(), ttl in 1u64..=MAX_DEFERRAL_MS) {
            if check_room(&queue, ".deferred", Some(".dead")).is_ok() {
                prop_assert!(hold_queue_name(&queue, ".deferred", ttl).is_ok());
            }
        }

        #[test]
        fn hold_names_are_injective(
            a in queue_name(), b in queue_name(),
            ta in 1u64..=MAX_DEFERRAL_MS, tb in 1u64..=MAX_DEFERRAL_MS,
        ) {
            if let (Ok(na), Ok(nb)) = (hold_queue_name(&a, ".deferred", ta), hold_queue_name(&b, ".deferred", tb)) {
                prop_assert_eq!(na == nb, a == b && ta == tb);
            }
        }

        #[test]
        fn holds_are_never_early(delay_us in 0u64..5_000_000_000, g_ms in 0u64..600_000) {
            let delay = Duration::from_micros(delay_us);
            let g = Duration::from_millis(g_ms);
            if let Ok(ttl) = hold_delay_ms("q", delay, g) {
                prop_assert!(Duration::from_millis(ttl) >= delay);
                prop_assert!(ttl <= MAX_DEFERRAL_MS);
                let args = hold_queue_arguments("q", ttl);
                prop_assert_eq!(args.get("x-message-ttl"), Some(&int(ttl as i64)));
                prop_assert_eq!(args.get("x-expires"), Some(&int(2 * ttl as i64)));
            }
        }
    }
}
