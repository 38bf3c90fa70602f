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
//!   a state saying "never fired" (a process joining while a leader holds
//!   the state also sees none, and its extra message is folded away by the
//!   leader). Consume, and wait: the first delivery means this process is
//!   the active consumer. It then takes in every other ready state message
//!   (counted by a passive declare) and keeps the latest tick, acknowledging
//!   the rest.
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
//!   `queuey schedules` reads (see `status`).
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

use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Confirmation};
use queuey_core::Error;
use queuey_core::periodic::Lease;
use tokio::time::Instant;

use crate::error::Failure;
use crate::link::Link;
use crate::properties::short;
use crate::trust::Senders;
use lease::RabbitLease;
use state::State;

/// How often a leader re-publishes its state, well within RabbitMQ's
/// default consumer timeout (30 minutes).
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(60);
/// How long a leader waits for the broker to confirm a state message, and
/// to deliver it back.
pub(crate) const RECEIVE_BOUND: Duration = Duration::from_secs(10);
/// How many state messages a leader may hold while folding them.
const PREFETCH: u16 = 64;

/// The arguments of a schedule queue.
fn arguments() -> FieldTable {
    let mut table = FieldTable::default();
    table.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    table.insert("x-single-active-consumer".into(), AMQPValue::Boolean(true));
    table
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
    let signed = senders.sign(BasicProperties::default().with_delivery_mode(2), &what)?;
    let current = link.connection(&what).await?;
    let connection = &current.connection;
    let fail = |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(&what);
    let channel = connection.create_channel().await.map_err(fail)?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(fail)?;
    channel
        .basic_qos(PREFETCH, BasicQosOptions { global: false })
        .await
        .map_err(fail)?;
    let queue = channel
        .queue_declare(
            short(key),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            arguments(),
        )
        .await
        .map_err(fail)?;
    if queue.message_count() == 0 {
        let confirm = channel
            .basic_publish(
                ShortString::default(),
                short(key),
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                &State::new(None).encode(),
                signed,
            )
            .await
            .map_err(fail)?;
        match confirm.await.map_err(fail)? {
            Confirmation::Ack(None) => {}
            other => {
                return Err(Error::Backend(queuey_core::BackendError::new(
                    queuey_core::BackendErrorKind::Nacked,
                    format!("{what}: the broker did not take the first state ({other:?})"),
                )));
            }
        }
    }
    channel
        .queue_declare(
            short(&status::status_queue(key)),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            status::arguments(),
        )
        .await
        .map_err(fail)?;
    let tag = format!("queuey.periodic.{}", queuey_core::Uuid::new_v4().simple());
    let consumer = channel
        .basic_consume(
            short(key),
            short(&tag),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
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
    // Waiting in line: the first delivery makes this process the leader.
    let first = loop {
        let far = Instant::now() + Duration::from_secs(3_600);
        if let Some(delivery) = lease.next_until(far).await? {
            break delivery;
        }
    };
    lease.fold(first).await?;
    lease.take_in_the_rest().await?;
    tracing::debug!(queue = key, consumer_tag = %tag, last_tick = ?lease.last_tick(), "leading");
    Ok(Box::new(lease))
}
