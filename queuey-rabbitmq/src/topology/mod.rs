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
//! | `q`, classic | [`declare`](queuey_core::backend::Backend::declare) | `x-queue-type = classic`; `x-message-ttl` if the config sets a TTL; `x-max-priority` if it has priority levels |
//! | `q`, [quorum](queuey_core::QueueType::Quorum) | `declare` | `x-queue-type = quorum`, `x-delivery-limit = 20`, `x-message-ttl` if set; with dead-letter queues: `x-dead-letter-exchange = ""`, `x-dead-letter-routing-key = q{dead_suffix}`, `x-dead-letter-strategy = at-least-once`, `x-overflow = reject-publish` |
//! | `q{dead_suffix}` | `declare`, when dead-letter queues are on | `x-queue-type` as `q`'s; a quorum one also `x-delivery-limit = ` [`SAFE_DELIVERY_LIMIT`] |
//! | `q{suspect_suffix}` | `declare`, when the poison guard is on | those of `q` without `x-max-priority` (a quorum suspect queue also has `q`'s delivery limit and dead-letters into `q{dead_suffix}`) |
//! | `q{deferred_suffix}.quorum.{ttl_ms}` | a hold publish with [`HoldQueues::Quorum`] (the default), once per process unless found gone | `x-queue-type = quorum`, `x-message-ttl = ttl_ms`, `x-dead-letter-exchange = ""`, `x-dead-letter-routing-key = q`, `x-dead-letter-strategy = at-least-once`, `x-overflow = reject-publish`; durable; **no** `x-expires`, no delivery limit of its own (see below) |
//! | `q{deferred_suffix}.{ttl_ms}` | a hold publish with [`HoldQueues::Classic`], unless a declaration of it sent less than a quarter of a TTL ago can be relied on | `x-message-ttl = ttl_ms`, `x-dead-letter-exchange = ""`, `x-dead-letter-routing-key = q`, `x-expires = 2 * ttl_ms`, `x-queue-type = classic` |
//! | `CONTROL_STREAM` (`queuey.control`, one per virtual host) | with the `fleet` feature: the first control command a backend sends or follows | `x-queue-type = stream`, `x-max-age = 30D`, `x-stream-max-segment-size-bytes = 1000000`; durable |
//! | its heartbeat stream (`queuey.control.workers`, `heartbeat_stream_name`) | with the `fleet` feature: the first heartbeat a backend sends, or the first list of workers | `x-queue-type = stream`, `x-max-age = 1h`, `x-stream-max-segment-size-bytes = 1000000`; durable |
//! | `{queue}.periodic.{name}` (`schedule_queue_name`) | with the `fleet` feature: every process that campaigns for the schedule | `x-queue-type = quorum`, `x-single-active-consumer = true`, `x-delivery-limit = ` [`SAFE_DELIVERY_LIMIT`]; durable (`schedule_queue_arguments`) |
//! | `{queue}.periodic.{name}.status` (`schedule_status_queue_name`) | the same | `x-queue-type = classic`, `x-max-length = 1`, `x-overflow = drop-head`; durable |
//! | the job exchange ([`RabbitMqOptions::job_exchange`](crate::RabbitMqOptions::job_exchange), none by default) | `declare`, before the work queues | an exchange, not a queue: durable, `direct`; each work queue (and shard) bound to it with its own name as the binding key |
//!
//! # Delivery limits
//!
//! RabbitMQ 4.0 and later give every quorum queue declared without
//! `x-delivery-limit` a limit of 20, and a message returned to the queue
//! more often than that (a reader that closes its channel, a consumer that
//! dies) is dropped, or dead-lettered if the queue has a target. RabbitMQ
//! 3.x has no default. So no quorum queue of this table is left on the
//! broker's default:
//!
//! - a quorum work queue and its suspect queue have [`QUORUM_DELIVERY_LIMIT`]
//!   and dead-letter into `q{dead_suffix}` past it (without dead-letter
//!   queues, the broker drops a message past it);
//! - a quorum dead-letter queue and a schedule queue have
//!   [`SAFE_DELIVERY_LIMIT`], out of reach of any reader: the `queuey` tool
//!   and the dashboard read a dead-letter queue by taking its letters and
//!   handing them back, and a schedule's state goes back to its queue at
//!   every change of leader;
//! - a quorum hold has no limit of its own: it has a target, its work
//!   queue, so a job past the broker's limit (only something reading the
//!   hold could return it that often) goes back to `q` early, and the
//!   consumer holds it again for the rest of its delay.
//!
//! A queue that already exists keeps the arguments it was created with:
//! RabbitMQ refuses (`PRECONDITION_FAILED`) to declare it with a limit it
//! does not have, and cannot add one in place. A `delivery-limit` policy
//! can: `queuey doctor` and `queuey topology verify` find queuey's quorum
//! queues on the broker's default, and `queuey topology apply` sets one.

use std::collections::BTreeMap;

use queuey_core::{Error, QueueConfig};

#[cfg(feature = "fleet")]
mod control;
pub(crate) mod holds;
#[cfg(feature = "fleet")]
mod schedule;

#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
pub use control::{
    CONTROL_MAX_BYTES, CONTROL_SEGMENT_BYTES, CONTROL_STREAM, HEARTBEAT_MAX_AGE,
    HEARTBEAT_STREAM_SUFFIX, HEARTBEAT_TYPE, MAX_CONTROL_STREAM_BYTES, RENEWS_AFTER_HEADER,
    SNAPSHOT_OF_HEADER, SNAPSHOT_TYPE, SYNC_MARKER_TYPE, control_stream_arguments,
    control_stream_max_age, heartbeat_stream_arguments, heartbeat_stream_name,
};
pub use holds::{
    check_room, hold_queue_arguments, hold_queue_name, quorum_hold_queue_arguments,
    quorum_hold_queue_name,
};
#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
pub use schedule::{
    SCHEDULE_INFIX, SCHEDULE_STATUS_SUFFIX, SINGLE_ACTIVE_CONSUMER, schedule_queue_arguments,
    schedule_queue_arguments_without_limit, schedule_queue_name, schedule_status_queue_arguments,
    schedule_status_queue_name,
};

pub(crate) use holds::HoldQueues;
use queuey_core::MAX_QUEUE_NAME_BYTES;

/// Header of a dead letter: why the job died.
pub const REASON_HEADER: &str = "x-death-reason";
/// Header of a dead letter: the work queue the job was consumed from.
pub const ORIGINAL_QUEUE_HEADER: &str = "x-original-queue";
/// Header of a dead letter: the attempts the job had made.
pub const ATTEMPTS_HEADER: &str = "x-attempts";
/// Header of a dead letter: when the job died, in milliseconds since the
/// Unix epoch, as a 64-bit integer.
pub const DIED_AT_HEADER: &str = "x-died-at";
/// Header of a dead letter whose body is not an envelope (reason
/// `malformed envelope`): why it did not decode.
pub const PARSE_ERROR_HEADER: &str = "x-parse-error";
/// Header of every hold publish: when the job becomes due, in milliseconds
/// since the Unix epoch, as a 64-bit integer. Operators' tools and the
/// consumers' never-early check read it under exactly this name.
pub const DUE_AT_HEADER: &str = "queuey-due-at";
/// Header of a job in a suspect queue (and of a job the poison guard
/// dead-lettered): how many of its deliveries in a row ended without being
/// settled (the worker died or lost its connection while it had the job),
/// as a 64-bit integer. Absent means 0. See the
/// [poison guard](crate#poison-guard).
pub const UNSETTLED_DELIVERIES_HEADER: &str = "queuey-unsettled-deliveries";

/// The queue type a classic queue is declared with.
///
/// Always sent, so that a vhost whose default queue type is quorum still
/// gets classic queues where they were asked for (quorum queues refuse
/// `x-max-priority`).
pub const QUEUE_TYPE: &str = "classic";

/// The queue type of quorum work queues, dead-letter queues and holds.
pub const QUORUM_QUEUE_TYPE: &str = "quorum";

/// The `x-delivery-limit` of a quorum work queue: RabbitMQ 4's default of
/// 20 made explicit, so that RabbitMQ 3.x (which has none) behaves alike
/// and a message past it goes to `q{dead_suffix}` (see [Delivery
/// limits](self#delivery-limits)). queuey's own poison guard normally acts
/// long before: this is the backstop for messages that never reach queuey
/// at all (say, a frame the client library cannot parse).
pub const QUORUM_DELIVERY_LIMIT: i64 = 20;

/// The `x-delivery-limit` of the quorum queues whose messages must never
/// be dropped for having been delivered too often: dead-letter queues and
/// schedule queues (and the `delivery-limit` policy `queuey topology apply`
/// sets on such queues created without it).
///
/// A million returns is out of reach of any reader: a dead letter read by
/// the `queuey` tool or the dashboard a thousand times a day would last
/// nearly three years. Measured to keep messages on RabbitMQ 3.10, 4.0 and
/// 4.3. It is not `-1`: RabbitMQ 4.x reads `-1` as unlimited, but 3.10
/// drops a message at its first return.
pub const SAFE_DELIVERY_LIMIT: i64 = 1_000_000;

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

/// An integer argument.
pub(crate) fn int(n: i64) -> ArgumentValue {
    ArgumentValue::Integer(n)
}

/// A text argument.
pub(crate) fn text(s: impl Into<String>) -> ArgumentValue {
    ArgumentValue::Text(s.into())
}

/// The name of `queue`'s dead-letter queue: `{queue}{dead_suffix}`.
pub fn dead_letter_queue_name(queue: &str, dead_suffix: &str) -> String {
    format!("{queue}{dead_suffix}")
}

/// The name of `queue`'s suspect queue: `{queue}{suspect_suffix}`, where
/// the poison guard parks a job that was delivered without being settled.
pub fn suspect_queue_name(queue: &str, suspect_suffix: &str) -> String {
    format!("{queue}{suspect_suffix}")
}

pub(crate) fn no_room(queue: &str, what: &str, name: &str) -> Error {
    Error::invalid_config(format!(
        "queue `{queue}` leaves no room for its {what}: `{name}` is {} bytes, over the \
         {MAX_QUEUE_NAME_BYTES}-byte AMQP limit",
        name.len()
    ))
}

/// The arguments of the work queue `q`, given the name of its dead-letter
/// queue when one is declared (a quorum `q` dead-letters into it).
pub fn work_queue_arguments(
    config: &QueueConfig,
    dead_letter_queue: Option<&str>,
) -> QueueArguments {
    let mut args = queue_type(config);
    if config.is_quorum() {
        args.insert("x-delivery-limit", int(QUORUM_DELIVERY_LIMIT));
        if let Some(dead) = dead_letter_queue {
            insert_at_least_once_dead_lettering(&mut args, dead);
        }
        if config.shard().is_some() {
            // Each shard's leader on the node with the fewest leaders, so
            // the shards of one queue spread over the cluster.
            args.insert("x-queue-leader-locator", text("balanced"));
        }
    }
    if let Some(ttl) = config.settings().message_ttl() {
        // Rounded up, so the broker never discards a message before its TTL.
        let ms = ttl.as_nanos().div_ceil(1_000_000);
        args.insert("x-message-ttl", int(saturating_i64(ms)));
    }
    if let Some(levels) = config.priority_levels() {
        args.insert("x-max-priority", int(i64::from(levels)));
    }
    args
}

/// The arguments of `config`'s suspect queue, given the name of its
/// dead-letter queue when one is declared: those of the work queue (its
/// type and TTL; for a quorum queue its delivery limit and at-least-once
/// dead-lettering) without priorities, since suspects are taken one at a
/// time in the order they came, and without a shard's leader locator: the
/// suspect queue is led where it is declared, like the dead-letter queue.
pub fn suspect_queue_arguments(
    config: &QueueConfig,
    dead_letter_queue: Option<&str>,
) -> QueueArguments {
    let mut args = work_queue_arguments(config, dead_letter_queue);
    args.remove("x-max-priority");
    // The broker's `balanced` locator counts every quorum leader a node
    // has: suspects declared with it between the shards took every other
    // turn, and on three nodes all the shards landed on the same one.
    args.remove("x-queue-leader-locator");
    args
}

/// The arguments of `config`'s dead-letter queue: the work queue's type
/// and, for a quorum queue, the [`SAFE_DELIVERY_LIMIT`], so that reading a
/// dead letter over and over (every read hands it back) never drops it.
pub fn dead_letter_queue_arguments(config: &QueueConfig) -> QueueArguments {
    let mut args = queue_type(config);
    if config.is_quorum() {
        args.insert("x-delivery-limit", int(SAFE_DELIVERY_LIMIT));
    }
    args
}

fn queue_type(config: &QueueConfig) -> QueueArguments {
    if config.is_quorum() {
        quorum()
    } else {
        classic()
    }
}

/// Dead-lettering into `target` through the default exchange that keeps a
/// message in its queue until the target has confirmed it (quorum queues
/// only; without `reject-publish` the broker silently falls back to
/// at-most-once).
pub(crate) fn insert_at_least_once_dead_lettering(args: &mut QueueArguments, target: &str) {
    args.insert("x-dead-letter-exchange", text(""));
    args.insert("x-dead-letter-routing-key", text(target));
    args.insert("x-dead-letter-strategy", text("at-least-once"));
    args.insert("x-overflow", text("reject-publish"));
}

pub(crate) fn classic() -> QueueArguments {
    QueueArguments::from([("x-queue-type", text(QUEUE_TYPE))])
}

pub(crate) fn quorum() -> QueueArguments {
    QueueArguments::from([("x-queue-type", text(QUORUM_QUEUE_TYPE))])
}

pub(crate) fn saturating_i64(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::MAX_DEFERRAL_MS;
    use queuey_core::backend::{effective_granularity_ms, hold_delay_ms, round_up_ms};
    use std::time::Duration;

    #[test]
    fn dead_letter_names() {
        assert_eq!(
            dead_letter_queue_name("app.emails", ".dead"),
            "app.emails.dead"
        );
        assert_eq!(
            dead_letter_queue_name("app.emails", "-dlq"),
            "app.emails-dlq"
        );
    }

    #[test]
    fn work_queue_arguments_follow_the_config() {
        let plain = work_queue_arguments(&QueueConfig::new("q").max_priority(0), Some("q.dead"));
        assert_eq!(
            plain,
            QueueArguments::from([("x-queue-type", text("classic"))])
        );

        let full = work_queue_arguments(
            &QueueConfig::new("q")
                .message_ttl(Duration::from_micros(1_500))
                .max_priority(7),
            None,
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
            work_queue_arguments(&QueueConfig::new("q"), None).get("x-max-priority"),
            Some(&int(10))
        );
    }

    #[test]
    fn a_quorum_work_queue_dead_letters_at_least_once_past_its_delivery_limit() {
        let config = QueueConfig::new("q")
            .queue_type(queuey_core::QueueType::Quorum)
            .message_ttl(Duration::from_secs(60));
        assert_eq!(
            work_queue_arguments(&config, Some("q.dead")),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", int(20)),
                ("x-message-ttl", int(60_000)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text("q.dead")),
                ("x-dead-letter-strategy", text("at-least-once")),
                ("x-overflow", text("reject-publish")),
            ])
        );
        // Without a dead-letter queue there is nothing to dead-letter into.
        assert_eq!(
            work_queue_arguments(&config, None),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", int(20)),
                ("x-message-ttl", int(60_000)),
            ])
        );
    }

    #[test]
    fn suspect_queues_are_the_work_queue_without_priorities() {
        assert_eq!(
            suspect_queue_name("app.emails", ".suspect"),
            "app.emails.suspect"
        );
        let config = QueueConfig::new("q")
            .message_ttl(Duration::from_secs(60))
            .max_priority(7);
        assert_eq!(
            suspect_queue_arguments(&config, Some("q.dead")),
            QueueArguments::from([
                ("x-queue-type", text("classic")),
                ("x-message-ttl", int(60_000)),
            ])
        );
        assert_eq!(
            suspect_queue_arguments(&QueueConfig::new("q"), None),
            QueueArguments::from([("x-queue-type", text("classic"))])
        );
    }

    #[test]
    fn a_quorum_suspect_queue_keeps_the_delivery_limit_and_dead_letters_into_q_dead() {
        let config = QueueConfig::new("q").queue_type(queuey_core::QueueType::Quorum);
        assert_eq!(
            suspect_queue_arguments(&config, Some("q.dead")),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", int(20)),
                ("x-dead-letter-exchange", text("")),
                ("x-dead-letter-routing-key", text("q.dead")),
                ("x-dead-letter-strategy", text("at-least-once")),
                ("x-overflow", text("reject-publish")),
            ])
        );
        assert_eq!(
            suspect_queue_arguments(&config, None),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", int(20)),
            ])
        );
    }

    #[test]
    fn only_a_shard_places_its_leader_by_balance_its_suspect_queue_does_not() {
        let config = QueueConfig::new("q")
            .queue_type(queuey_core::QueueType::Quorum)
            .shards(2);
        let physical = config.physical();
        let (lane, shard) = (&physical[0], &physical[1]);
        let locator = |args: QueueArguments| args.get("x-queue-leader-locator").cloned();
        assert_eq!(locator(work_queue_arguments(lane, Some("q.dead"))), None);
        assert_eq!(
            locator(work_queue_arguments(shard, Some("q.s0.dead"))),
            Some(text("balanced"))
        );
        assert_eq!(
            locator(suspect_queue_arguments(shard, Some("q.s0.dead"))),
            None
        );
    }

    #[test]
    fn room_for_the_suspect_queue_is_checked_when_the_guard_is_on() {
        // The longest classic hold name is 251 bytes: only the suspect queue is long.
        let classic = HoldQueues::Classic;
        let q = "x".repeat(240);
        let suffix = format!(".{}", "s".repeat(15));
        let e = check_room(&q, "", None, Some(&suffix), classic).unwrap_err();
        assert!(e.to_string().contains("suspect queue"), "{e}");
        assert!(check_room(&q, "", None, None, classic).is_ok());
        assert!(check_room(&q, "", None, Some(&suffix[1..]), classic).is_ok());
    }

    #[test]
    fn dead_letter_queues_carry_the_work_queues_type_and_a_quorum_one_a_safe_limit() {
        assert_eq!(
            dead_letter_queue_arguments(&QueueConfig::new("q")),
            QueueArguments::from([("x-queue-type", text("classic"))])
        );
        assert_eq!(
            dead_letter_queue_arguments(
                &QueueConfig::new("q").queue_type(queuey_core::QueueType::Quorum)
            ),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", int(1_000_000)),
            ])
        );
    }

    #[test]
    fn no_quorum_queue_is_left_on_the_brokers_default_delivery_limit() {
        // RabbitMQ 3.10 drops a message at its first return with -1, and
        // 4.x drops it past 20 without a limit: every quorum queue declared
        // has a positive limit, or a target to dead-letter into.
        const { assert!(SAFE_DELIVERY_LIMIT > 0) };
        let quorum = QueueConfig::new("q").queue_type(queuey_core::QueueType::Quorum);
        let safe = |args: &QueueArguments| {
            matches!(args.get("x-delivery-limit"), Some(ArgumentValue::Integer(n)) if *n > 0)
                || args.contains_key("x-dead-letter-routing-key")
        };
        for dead in [None, Some("q.dead")] {
            assert!(safe(&work_queue_arguments(&quorum, dead)));
            assert!(safe(&suspect_queue_arguments(&quorum, dead)));
        }
        assert!(safe(&dead_letter_queue_arguments(&quorum)));
        assert!(safe(&quorum_hold_queue_arguments("q", 5_000)));
        #[cfg(feature = "fleet")]
        {
            assert!(safe(&schedule_queue_arguments()));
            assert_eq!(
                dead_letter_queue_arguments(&quorum).get("x-delivery-limit"),
                schedule_queue_arguments().get("x-delivery-limit")
            );
        }
    }

    #[test]
    fn rounding_is_the_cores() {
        let s = Duration::from_secs(1);
        assert_eq!(round_up_ms(Duration::from_millis(1), s), 1_000);
        assert_eq!(effective_granularity_ms(Duration::ZERO), 1);
        assert!(hold_delay_ms("q", Duration::from_millis(MAX_DEFERRAL_MS - 1), s).is_err());
    }
}
