//! The control stream: where a fleet's control commands are kept, its
//! arguments, and what its messages carry; and the heartbeat stream beside
//! it, where the fleet's workers say what they do.

use queuey_core::control::CANCELLATION_MEMORY;

use super::{QueueArguments, int, text};

/// The default name of the control stream, one per virtual host: every
/// process of a fleet sends its commands there and follows them from
/// there (see [`RabbitMqOptions::control_stream`](crate::RabbitMqOptions::control_stream)
/// to use another).
pub const CONTROL_STREAM: &str = "queuey.control";

/// How large one segment file of the control stream grows, in bytes. The
/// broker drops only whole segments once everything in them is older than
/// the stream's maximum age, so small segments let old commands go soon
/// after they are forgotten.
pub const CONTROL_SEGMENT_BYTES: i64 = 1_000_000;

/// The most bytes the control stream keeps (`x-max-length-bytes`): far
/// more than years of honest use (commands, renewals, snapshots and sync
/// markers are a few hundred bytes each), and a bound on what a flood of
/// records costs the broker's disk and a follower that reads the stream
/// from its start. The broker drops the oldest whole segments past it.
pub const CONTROL_MAX_BYTES: i64 = 100_000_000;

/// The AMQP `type` property of a snapshot of the control state: a message
/// a follower publishes to the control stream every
/// [`RabbitMqOptions::control_snapshot_interval`](crate::RabbitMqOptions::control_snapshot_interval),
/// whose body lists the commands that rebuild the state (the paused
/// queues and the live cancellations) and whose
/// [`SNAPSHOT_OF_HEADER`] says up to which offset the state was read. A
/// follower that starts reads the stream's last few intervals, and from
/// the first snapshot it finds on instead of from the stream's start.
pub const SNAPSHOT_TYPE: &str = "queuey.control.snapshot";

/// Header of a snapshot: the offset of the last record its follower had
/// read when it took the snapshot. A follower that starts from the
/// snapshot reads on from the next offset. A 64-bit integer.
pub const SNAPSHOT_OF_HEADER: &str = "queuey-snapshot-of";

/// The AMQP `type` property of a sync marker: a message a follower
/// publishes to the control stream and waits to read back, to know it has
/// read everything sent before it. Its body is not a command; followers
/// skip markers that are not their own.
pub const SYNC_MARKER_TYPE: &str = "queuey.sync";

/// Header of a pause that a follower published again to keep it in the
/// stream past the stream's maximum age: the stream offset the follower had
/// read up to when it decided. A follower that read a resume of the same
/// queue after that offset ignores the renewal, so a resume sent meanwhile
/// is never undone. A 64-bit integer.
pub const RENEWS_AFTER_HEADER: &str = "queuey-renews-after";

/// The control stream's maximum age as RabbitMQ reads it (`"30D"`):
/// [`CANCELLATION_MEMORY`] in whole days, rounded up.
pub fn control_stream_max_age() -> String {
    let days = CANCELLATION_MEMORY.as_secs().div_ceil(86_400);
    format!("{days}D")
}

/// The arguments of the control stream, the same for every name and every
/// process: RabbitMQ refuses (406 `PRECONDITION_FAILED`) to declare an
/// existing queue with other arguments.
pub fn control_stream_arguments() -> QueueArguments {
    QueueArguments::from([
        ("x-queue-type", text("stream")),
        ("x-max-age", text(control_stream_max_age())),
        ("x-max-length-bytes", int(CONTROL_MAX_BYTES)),
        (
            "x-stream-max-segment-size-bytes",
            int(CONTROL_SEGMENT_BYTES),
        ),
    ])
}

/// The suffix of the heartbeat stream: the control stream `queuey.control`
/// has its workers' heartbeats in `queuey.control.workers`.
pub const HEARTBEAT_STREAM_SUFFIX: &str = ".workers";

/// The longest control stream name, leaving room for the heartbeat
/// stream's suffix within AMQP's 255 bytes.
pub const MAX_CONTROL_STREAM_BYTES: usize = 255 - HEARTBEAT_STREAM_SUFFIX.len();

/// How long the heartbeat stream keeps heartbeats (`"1h"`): the list of
/// workers reads only the last minute, and an hour leaves room for a
/// dashboard to read back more.
pub const HEARTBEAT_MAX_AGE: &str = "1h";

/// The AMQP `type` property of a heartbeat.
pub const HEARTBEAT_TYPE: &str = "queuey.heartbeat";

/// The heartbeat stream of the control stream `control_stream`.
pub fn heartbeat_stream_name(control_stream: &str) -> String {
    format!("{control_stream}{HEARTBEAT_STREAM_SUFFIX}")
}

/// The arguments of the heartbeat stream, the same for every process.
pub fn heartbeat_stream_arguments() -> QueueArguments {
    QueueArguments::from([
        ("x-queue-type", text("stream")),
        ("x-max-age", text(HEARTBEAT_MAX_AGE)),
        (
            "x-stream-max-segment-size-bytes",
            int(CONTROL_SEGMENT_BYTES),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ArgumentValue;

    #[test]
    fn the_stream_keeps_commands_as_long_as_cancellations_are_remembered() {
        assert_eq!(control_stream_max_age(), "30D");
        assert_eq!(
            control_stream_arguments(),
            QueueArguments::from([
                ("x-queue-type", ArgumentValue::Text("stream".into())),
                ("x-max-age", ArgumentValue::Text("30D".into())),
                ("x-max-length-bytes", ArgumentValue::Integer(100_000_000)),
                (
                    "x-stream-max-segment-size-bytes",
                    ArgumentValue::Integer(1_000_000)
                ),
            ])
        );
    }
}
