//! The queues of a periodic schedule: the schedule queue, where its leader
//! is elected and its last tick kept, and the status queue beside it.

use super::{QUEUE_TYPE, QueueArguments, SAFE_DELIVERY_LIMIT, int, quorum, text};

/// The infix of a schedule queue's name: `{queue}.periodic.{name}`.
pub const SCHEDULE_INFIX: &str = ".periodic.";

/// The suffix of a schedule's status queue: `{queue}.periodic.{name}.status`.
pub const SCHEDULE_STATUS_SUFFIX: &str = ".status";

/// The boolean argument that makes a schedule queue deliver to one
/// consumer at a time, always `true` on a schedule queue.
pub const SINGLE_ACTIVE_CONSUMER: &str = "x-single-active-consumer";

/// The name of the schedule queue of schedule `name` on `queue`:
/// `{queue}.periodic.{name}`.
pub fn schedule_queue_name(queue: &str, name: &str) -> String {
    format!("{queue}{SCHEDULE_INFIX}{name}")
}

/// The name of the status queue of the schedule queue `key`: `{key}.status`.
pub fn schedule_status_queue_name(key: &str) -> String {
    format!("{key}{SCHEDULE_STATUS_SUFFIX}")
}

/// The arguments of a schedule queue: a quorum queue with the
/// [`SAFE_DELIVERY_LIMIT`]. It is declared with
/// [`SINGLE_ACTIVE_CONSUMER`]` = true` besides (a boolean, which
/// [`ArgumentValue`](super::ArgumentValue) does not carry): its single active consumer is the
/// schedule's leader.
///
/// The leader holds the schedule's state message unacknowledged and hands
/// it back by closing its channel; every such return counts as a delivery.
/// Without a limit of its own, RabbitMQ 4.0 and later would drop the state
/// after 20 leader changes (the queue has no dead-letter target, and must
/// not have one: the state belongs in this queue).
pub fn schedule_queue_arguments() -> QueueArguments {
    let mut args = schedule_queue_arguments_without_limit();
    args.insert("x-delivery-limit", int(SAFE_DELIVERY_LIMIT));
    args
}

/// The arguments schedule queues had before they carried a delivery limit.
///
/// RabbitMQ refuses to declare an existing queue with arguments it does
/// not have, and cannot add one in place, so a schedule queue created
/// without a limit is declared with these: it keeps working, on the
/// broker's default limit, until a `delivery-limit` policy (which
/// `queuey topology apply` offers) gives it one. Its leaders publish the
/// state again as they take over, so the returns never add up.
pub fn schedule_queue_arguments_without_limit() -> QueueArguments {
    quorum()
}

/// The arguments of a schedule's status queue: a classic queue (so no
/// delivery limit applies to the reads of operators' tools) that keeps only
/// its latest message.
pub fn schedule_status_queue_arguments() -> QueueArguments {
    QueueArguments::from([
        ("x-queue-type", text(QUEUE_TYPE)),
        ("x-max-length", int(1)),
        ("x-overflow", text("drop-head")),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::{int, text};
    use super::*;

    #[test]
    fn a_schedule_queue_has_one_leader_and_a_limit_out_of_reach() {
        assert_eq!(schedule_queue_name("app", "beat"), "app.periodic.beat");
        assert_eq!(
            schedule_status_queue_name("app.periodic.beat"),
            "app.periodic.beat.status"
        );
        assert_eq!(
            schedule_queue_arguments(),
            QueueArguments::from([
                ("x-queue-type", text("quorum")),
                ("x-delivery-limit", int(1_000_000)),
            ])
        );
        let mut older = schedule_queue_arguments();
        older.remove("x-delivery-limit");
        assert_eq!(schedule_queue_arguments_without_limit(), older);
    }

    #[test]
    fn a_status_queue_is_classic_and_keeps_one_message() {
        assert_eq!(
            schedule_status_queue_arguments(),
            QueueArguments::from([
                ("x-queue-type", text("classic")),
                ("x-max-length", int(1)),
                ("x-overflow", text("drop-head")),
            ])
        );
    }
}
