//! The default and limit of each setting.

use std::time::Duration;

use queuey_core::backend::Granularity;

/// The most publishing channels a backend opens.
pub const MAX_PUBLISH_CONCURRENCY: usize = 1024;

/// The default number of publishing channels, chosen by measurement
/// (`BENCHMARKS.md`): four let the broker work on several channel
/// processes at once, and more gained nothing.
pub const DEFAULT_PUBLISH_CONCURRENCY: usize = 4;
/// The default number of publishes in flight on one publishing channel.
pub const DEFAULT_PUBLISH_WINDOW: usize = 128;
/// The most publishes in flight on one publishing channel.
pub const MAX_PUBLISH_WINDOW: usize = 65_536;

/// The default granularity of both kinds of hold with classic hold queues:
/// a fixed 1 s step, as the first version had.
pub const DEFAULT_CLASSIC_GRANULARITY: Granularity = Granularity::fixed(Duration::from_secs(1));
/// The default granularity of both kinds of hold with quorum hold queues:
/// whole seconds up to 10 s, then buckets 10 % apart. Quorum hold queues
/// are never deleted, so the granularity bounds how many a work queue ever
/// has: about 150 from 1 s to 24 days, where a 1 s step would allow one per
/// second of delay.
pub const DEFAULT_QUORUM_GRANULARITY: Granularity =
    Granularity::relative(10, Duration::from_secs(1));

/// The default heartbeat interval: a silent peer is noticed within two.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// The default bound on opening one TCP + AMQP connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default bound on one broker call other than a publish: a
/// declaration, an ack or nack, opening a channel, closing.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The default bound on one publish, from the call to the broker's
/// confirmation, including any wait for a reconnection.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// The default bound on waiting for the first connection: two minutes,
/// about what a RabbitMQ node takes to boot or a rolling restart to reach
/// the next node, so that a worker started during one connects when the
/// broker is back instead of failing.
pub const DEFAULT_CONNECT_WAIT: Duration = Duration::from_secs(120);
/// The default first pause between reconnection attempts.
pub const DEFAULT_RECONNECT_DELAY_MIN: Duration = Duration::from_millis(100);
/// The default longest pause between reconnection attempts.
pub const DEFAULT_RECONNECT_DELAY_MAX: Duration = Duration::from_secs(5);
/// RabbitMQ's own default `consumer_timeout`, 30 minutes (3.8.15 to 4.x):
/// the default of [`RabbitMqOptions::consumer_timeout`](crate::RabbitMqOptions::consumer_timeout).
pub const DEFAULT_CONSUMER_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long a quorum hold queue the backend used may go unused before the
/// backend deletes it, when it is empty: one hour, the default of
/// [`RabbitMqOptions::prune_holds_after`](crate::RabbitMqOptions::prune_holds_after).
pub const DEFAULT_PRUNE_HOLDS_AFTER: Duration = Duration::from_secs(60 * 60);
/// The default limit of the [poison guard](crate#poison-guard): a job is
/// dead-lettered once 5 of its deliveries in a row ended without being
/// settled. Enough to absorb the innocent redeliveries of a lost connection
/// or a graceful shutdown handing back prefetched jobs, few enough that a
/// job that crashes its worker stops doing so within minutes.
pub const DEFAULT_POISON_GUARD_LIMIT: u32 = 5;

/// How long a delivery dropped unsettled (its retry, deferral or dead
/// letter failed, or its job was abandoned) stays unacknowledged before it
/// is handed back (`basic.nack` with requeue): it would otherwise hold a
/// prefetch slot until its channel closed, and the pause keeps a failure
/// that repeats from becoming a busy loop.
pub const REQUEUE_DELAY: Duration = Duration::from_secs(1);

/// The default interval between snapshots of the control state:
/// [`RabbitMqOptions::control_snapshot_interval`](crate::RabbitMqOptions::control_snapshot_interval).
#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
pub const DEFAULT_CONTROL_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// The shortest interval between snapshots of the control state.
#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
pub const MIN_CONTROL_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(1);
/// The longest interval between snapshots of the control state: a day,
/// well inside the stream's 30 days.
#[cfg(feature = "fleet")]
#[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
pub const MAX_CONTROL_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(24 * 3600);
