//! Leadership of periodic schedules, elected by RabbitMQ.
//!
//! Each schedule has a durable quorum queue with a single active consumer
//! (`x-single-active-consumer`), named by its key
//! (`{queue}.periodic.{name}`). Every process that leads schedules consumes
//! it; the broker delivers to one consumer at a time, the first
//! registered, and on its loss to the next in line.
//!
//! The queue holds the schedule's *state message*: the last tick fired.
//! The rule: **the process holding the state message unacknowledged is the
//! leader.** Only the active consumer receives messages, so only it can
//! hold one.
//!
//! - **Campaign.** Declare the queue; if it has no ready message, publish
//!   a state with the last tick the status queue records (see below; "never
//!   fired" when it records none). A process joining while a leader holds
//!   the state also sees none, and its extra message is folded away by the
//!   leader. Consume, and wait: the first delivery means this process is
//!   the active consumer. It then takes in every other ready state message
//!   (counted by a passive declare) and keeps the latest tick, acknowledging
//!   the rest.
//! - **Take over.** The new leader publishes the state again at once (with
//!   the status queue's last tick if that is later) and holds the fresh
//!   message. Every change of leader hands the state back to the queue, and
//!   RabbitMQ counts each return as a delivery; a fresh message starts from
//!   none, so no number of leader changes, however fast, adds up to a
//!   delivery limit.
//! - **Wait, and look.** A process in line checks every [`PROBE_EVERY`]
//!   that the queue still has a state message; when none is ready it
//!   publishes one with the status queue's last tick. A leader folds it
//!   away; but if the state was lost (the broker dropped it, someone
//!   deleted it), the next consumer in line is active with nothing to
//!   receive, and this message is what makes it the leader, with the last
//!   tick kept.
//! - **Fire.** Right before a tick, a round trip on the lease's channel
//!   checks that the lease still holds (a leader that hung past its
//!   heartbeat learns here that it lost it). Then the job is enqueued and
//!   confirmed first; then a
//!   new state (this tick) is published and confirmed, received back (the
//!   leader is the active consumer), and the old state acknowledged. A
//!   crash between the two leaves both in the queue, and the next leader
//!   keeps the later.
//! - **Stay within the consumer timeout.** The broker closes a channel
//!   holding a delivery unacknowledged past its `consumer_timeout` (30 min
//!   by default). The leader re-publishes its state every minute, so the
//!   message it holds is never older than that.
//! - **Step down.** Losing the channel or the connection ends the lease:
//!   the broker requeues the state message and activates the next
//!   consumer, which receives it and so learns the last tick. A clean
//!   release (shutdown) closes the channel for the same effect, at once.
//!
//! - **Tell operators.** The state message cannot be read while a leader
//!   holds it, so the leader copies the last tick, the next one and the
//!   schedule into `{key}.status`, a one-message classic queue that
//!   `queuey schedules` reads (see `status`), and that a process taking
//!   over reads as well. A state or status is believed only from this
//!   backend's own user or a `worker_senders` user, and not when its last
//!   tick lies in the future.
//!
//! The schedule queue has the
//! [`SAFE_DELIVERY_LIMIT`](crate::topology::SAFE_DELIVERY_LIMIT), out of
//! reach; one created before it had a limit is used as it is (RabbitMQ
//! cannot add an argument to an existing queue), on the broker's default,
//! which the two rules above make harmless.
//!
//! Limits, measured on RabbitMQ 3.10: a leader that exits or is killed is
//! replaced in about 60 ms; a leader that hangs without closing its socket
//! is noticed only through missed heartbeats (about 4 s at a 2 s heartbeat,
//! 20 to 30 s at the backend's 10 s default). A leader whose connection dies
//! between enqueueing a tick and recording it, or that stalls between the
//! check and the enqueue, can have that tick enqueued again by its
//! successor: the same job id both times, so a uniqueness check by job id
//! suppresses the second.

mod lease;
mod state;
mod status;

use std::sync::Arc;
use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel};
use queuey_core::Error;
use queuey_core::periodic::Lease;
use tokio::time::Instant;

use crate::channel::{consume, open_confirmed};
use crate::declare::field_table;
use crate::error::Failure;
use crate::link::Link;
use crate::properties::short;
use crate::topology::{self, SINGLE_ACTIVE_CONSUMER};
use crate::trust::Senders;
use lease::RabbitLease;

/// How often a leader re-publishes its state, well within RabbitMQ's
/// default consumer timeout (30 minutes).
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(60);
/// How long a leader waits for the broker to confirm a state message, and
/// to deliver it back.
pub(crate) const RECEIVE_BOUND: Duration = Duration::from_secs(10);
/// How many state messages a leader may hold while folding them.
const PREFETCH: u16 = 64;
/// How long a process waits in line before it checks that the schedule
/// queue still has a state message (see [`RabbitLease::probe`]).
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(10);

/// The arguments a schedule queue is declared with: those of
/// [`schedule_queue_arguments`] (or, for a queue created without a
/// delivery limit, [`schedule_queue_arguments_without_limit`]) and a
/// single active consumer.
fn arguments(with_limit: bool) -> FieldTable {
    let args = if with_limit {
        topology::schedule_queue_arguments()
    } else {
        topology::schedule_queue_arguments_without_limit()
    };
    let mut table = field_table(&args);
    table.insert(SINGLE_ACTIVE_CONSUMER.into(), AMQPValue::Boolean(true));
    table
}

/// Declares the schedule queue `key` and returns the channel to go on
/// with and how many state messages are ready. One created before schedule
/// queues had a delivery limit is refused (which closes the channel): it is
/// declared again as it was, on a new channel, and used (leaders publish
/// the state afresh as they take over, so no limit is reached).
async fn declare_schedule_queue(
    connection: &lapin::Connection,
    channel: Channel,
    key: &str,
    what: &str,
) -> Result<(Channel, u32), Error> {
    let failure = match declare(&channel, key, arguments(true)).await {
        Ok(ready) => return Ok((channel, ready)),
        Err(e) => Failure::of(&e, connection.status().connected()),
    };
    if !crate::declare::created_without(&failure, "x-delivery-limit") {
        return Err(failure.into_error(what));
    }
    tracing::warn!(
        queue = key,
        "the schedule queue was created without a delivery limit and runs on the broker's \
         default (20 on RabbitMQ 4); `queuey topology apply` sets a `delivery-limit` policy on it"
    );
    let channel = open_confirmed(connection, what).await?;
    let ready = declare(&channel, key, arguments(false))
        .await
        .map_err(|e| Failure::of(&e, connection.status().connected()).into_error(what))?;
    Ok((channel, ready))
}

/// Declares `queue` durable with `args` on `channel`; how many messages it
/// has ready.
async fn declare(channel: &Channel, queue: &str, args: FieldTable) -> lapin::Result<u32> {
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let declared = channel.queue_declare(short(queue), durable, args).await?;
    Ok(declared.message_count())
}

/// Campaigns for `key`: returns once this process leads it. What it
/// publishes is signed by `senders`; a state from a sender it does not
/// trust as a worker counts as no state at all.
pub(crate) async fn lead(
    link: &Link,
    senders: Arc<Senders>,
    key: &str,
) -> Result<Box<dyn Lease>, Error> {
    let what = format!("campaigning for schedule queue `{key}`");
    // A backend that cannot sign its states cannot lead: no one would
    // believe them.
    senders.sign(BasicProperties::default(), &what)?;
    let current = link.connection(&what).await?;
    let connection = &current.connection;
    let fail = |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(&what);
    let channel = open_confirmed(connection, &what).await?;
    let (channel, ready) = declare_schedule_queue(connection, channel, key, &what).await?;
    let status = topology::schedule_status_queue_name(key);
    let args = field_table(&topology::schedule_status_queue_arguments());
    declare(&channel, &status, args).await.map_err(fail)?;
    let tag = format!("queuey.periodic.{}", queuey_core::Uuid::new_v4().simple());
    // With a prefetch to fold state messages with.
    let consumer = consume(&channel, key, &tag, PREFETCH, FieldTable::default())
        .await
        .map_err(fail)?;
    let mut lease = RabbitLease {
        queue: key.to_owned(),
        channel,
        consumer,
        held: None,
        published_at: Instant::now(),
        announced: None,
        released: false,
        senders,
    };
    if ready == 0 {
        // A new schedule, or one whose leader holds the state (which folds
        // this one away), or one whose state is lost: the status queue
        // still knows the last tick.
        lease.publish_recorded("publishing the first state").await?;
    }
    // Waiting in line: the first delivery makes this process the leader.
    let first = loop {
        if let Some(delivery) = lease.next_until(Instant::now() + PROBE_EVERY).await? {
            break delivery;
        }
        lease.probe().await?;
    };
    lease.fold(first).await?;
    lease.take_in_the_rest().await?;
    lease.take_over().await?;
    tracing::debug!(queue = key, consumer_tag = %tag, last_tick = ?lease.last_tick(), "leading");
    Ok(Box::new(lease))
}
