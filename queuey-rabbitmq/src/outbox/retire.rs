//! Retiring one quorum hold queue: deleting it only when it is empty and
//! unused, without ever deleting a job with it.
//!
//! The pruner's half of the handshake documented in `hold`:
//!
//! 1. a passive declare: a hold with jobs waiting, or with a consumer (a
//!    prune under way elsewhere), is kept; so is one in which the
//!    [`HoldCensus`] counts jobs. AMQP counts only the jobs whose delay is not
//!    over: jobs past their delay that wait to be dead-lettered back to
//!    the work queue (a hold whose dead-letter worker stopped, or whose
//!    work queue refuses them) show in neither a declaration nor a
//!    deletion's count (measured on 3.10.8), only in the management API's
//!    statistics, and a deletion would take them;
//! 2. the hold is consumed (manual acknowledgements) and watched for
//!    [`RETIRE_GRACE`]: a job that reaches the consumer means the hold is in
//!    use, so the consumer is cancelled and its channel closed, which gives
//!    the job back to the hold unacknowledged, and the hold is kept;
//! 3. the census is asked again (its figures are now younger than the
//!    watch's start), and the queue is deleted on another channel only if
//!    it counts no job (a census that cannot tell keeps the hold), and
//!    unless the grace ran late by more than half of itself (then a
//!    publisher could have trusted a declaration older than the consumer's
//!    view: the hold is kept);
//! 4. every job the consumer still receives before the broker cancels it
//!    (they raced the deletion; their publishers did not trust their
//!    confirmation and publish them again) is published to the work queue,
//!    where the consumer holds it again until its due time (never early),
//!    or, when the work queue is gone, into the hold declared again.

use std::time::Duration;

use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::QueueDeleteOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use queuey_core::{BackendErrorKind, Error, QueueConfig};
use tokio::time::Instant;

use super::Outbox;
use super::hold::RETIRE_GRACE;
use super::publisher::Outgoing;
use crate::census::HoldCensus;
use crate::error::Failure;
use crate::topology::HoldQueues;
use crate::{channel, properties};

/// How many jobs the pruner's consumer may be handed at once: far more
/// than can race a deletion, so none waits in the queue unseen.
const RETIRE_PREFETCH: u16 = 1_000;

/// How long the pruner waits, after deleting a hold, for the broker to
/// cancel its consumer (which comes after every job the queue sent it).
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// What [`RabbitMqBackend::prune_hold`](crate::RabbitMqBackend::prune_hold)
/// did with a hold queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoldPruned {
    /// The hold queue was deleted. `rescued` jobs were published into it
    /// while it was being deleted; they were moved to the work queue (or
    /// into the hold again) and their publishers hold them again too: a
    /// duplicate, never a loss.
    Deleted {
        /// Jobs that reached the hold while it was being deleted.
        rescued: usize,
    },
    /// Kept: jobs wait in it, or reached it while the pruner watched it.
    InUse {
        /// The jobs seen: waiting at the check, or arrived during the watch.
        jobs: u64,
    },
    /// Kept: it has consumers, so another prune is under way (or something
    /// consumes the hold, which takes held jobs before they are due).
    Consumed {
        /// Consumers the broker counts on the hold.
        consumers: u32,
    },
    /// No queue of that name exists: nothing to do.
    Missing,
    /// Kept: the census could not tell how many jobs it holds (the
    /// management API's statistics are not there yet, or it failed).
    Unverified,
}

impl Outbox {
    /// Retires `hold`, a quorum hold queue of `queue` (see the module
    /// documentation). Takes at least [`RETIRE_GRACE`] for a hold that is
    /// empty.
    pub(crate) async fn retire_hold(
        &self,
        queue: &str,
        hold: &str,
        census: &dyn HoldCensus,
    ) -> Result<HoldPruned, Error> {
        let suffix = self.options().settings().deferred_suffix();
        let Some(ttl_ms) = HoldQueues::Quorum.parse(queue, suffix, hold) else {
            return Err(Error::invalid_config(format!(
                "`{hold}` is not a quorum hold queue of `{queue}` (with the deferred suffix \
                 `{suffix}`): only quorum holds are pruned; classic ones expire by themselves"
            )));
        };
        let what = format!("pruning hold queue `{hold}`");
        let current = self.sender.connection(|| what.clone()).await?;
        let connection = &current.connection;
        let fail =
            |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(&what);

        // 1. A passive declare, on a channel of its own: a missing queue
        //    closes the channel it is asked on.
        let (jobs, consumers) = match passive_counts(connection, hold).await {
            Ok(Some(counts)) => counts,
            Ok(None) => return Ok(HoldPruned::Missing),
            Err(e) => return Err(fail(e)),
        };
        if jobs > 0 {
            return Ok(HoldPruned::InUse {
                jobs: u64::from(jobs),
            });
        }
        if consumers > 0 {
            return Ok(HoldPruned::Consumed { consumers });
        }
        // Counted jobs keep the hold at once; a census that cannot tell yet
        // (a hold younger than the broker's first statistics) is asked
        // again after the watch, which decides.
        if let Some(jobs @ 1..) = census.jobs(hold).await? {
            return Ok(HoldPruned::InUse { jobs });
        }

        // 2. Consume it and watch it for the grace.
        let watch = connection.create_channel().await.map_err(fail)?;
        let result = self
            .watch_and_delete(connection, &watch, (queue, hold), ttl_ms, census, fail)
            .await;
        // Gives back whatever the consumer holds unacknowledged (kept
        // holds), or closes a channel whose queue is gone.
        channel::close(&watch).await;
        result
    }

    /// Steps 2 to 4 for `hold` of `queue`, consuming on `watch`; `fail`
    /// names a failure of the broker.
    async fn watch_and_delete(
        &self,
        connection: &Connection,
        watch: &Channel,
        (queue, hold): (&str, &str),
        ttl_ms: u64,
        census: &dyn HoldCensus,
        fail: impl Fn(lapin::Error) -> Error,
    ) -> Result<HoldPruned, Error> {
        let tag = format!("queuey-prune-{}", uuid::Uuid::new_v4());
        let mut consumer =
            channel::consume(watch, hold, &tag, RETIRE_PREFETCH, FieldTable::default())
                .await
                .map_err(&fail)?;
        let watched = Instant::now();
        match tokio::time::timeout(RETIRE_GRACE, consumer.next()).await {
            Err(_) => {}
            Ok(Some(Ok(_))) => {
                // In use: the channel's close hands it back.
                tracing::debug!(hold = %hold, "a job reached the hold while it was watched; keeping it");
                return Ok(HoldPruned::InUse { jobs: 1 });
            }
            // Cancelled by the broker: someone else deleted it.
            Ok(None) => return Ok(HoldPruned::Missing),
            Ok(Some(Err(e))) => return Err(fail(e)),
        }
        match census.jobs(hold).await? {
            Some(0) => {}
            Some(jobs) => return Ok(HoldPruned::InUse { jobs }),
            None => return Ok(HoldPruned::Unverified),
        }
        if watched.elapsed() > RETIRE_GRACE + RETIRE_GRACE / 2 {
            tracing::debug!(hold = %hold, "the watch of the hold ran late; keeping it");
            return Ok(HoldPruned::InUse { jobs: 0 });
        }

        // 3. Delete it, on another channel.
        let deleter = connection.create_channel().await.map_err(&fail)?;
        let deleted = deleter
            .queue_delete(properties::short(hold), QueueDeleteOptions::default())
            .await;
        channel::close(&deleter).await;
        let unseen = deleted.map_err(fail)?;
        if unseen > 0 {
            // Jobs the queue held that never reached the consumer (it was
            // handed none during the grace, and may take a thousand):
            // only jobs whose publishers did not trust their confirmation,
            // and which those publishers hold again, can be among them.
            tracing::warn!(hold = %hold, jobs = unseen, "jobs reached the hold as it was deleted without reaching the pruner; their publishers hold them again");
        }

        // 4. Rescue what raced the deletion.
        let mut raced = Vec::new();
        let cancel_by = Instant::now() + CANCEL_WAIT;
        loop {
            match tokio::time::timeout_at(cancel_by, consumer.next()).await {
                Ok(Some(Ok(delivery))) => raced.push(delivery),
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    tracing::warn!(hold = %hold, error = %e, "the pruner's consumer failed after the deletion");
                    break;
                }
                Err(_) => {
                    tracing::warn!(hold = %hold, "the broker did not cancel the pruner's consumer after the deletion");
                    break;
                }
            }
        }
        let rescued = raced.len();
        for delivery in raced {
            self.rescue(delivery, queue, hold, ttl_ms).await?;
        }
        if rescued > 0 {
            tracing::info!(hold = %hold, rescued, "jobs reached the hold while it was deleted; moved them to the work queue");
        }
        tracing::info!(hold = %hold, "deleted an unused hold queue");
        Ok(HoldPruned::Deleted { rescued })
    }

    /// Publishes a job that reached a hold as it was deleted to the work
    /// queue, or, when the work queue is gone, into the hold again.
    async fn rescue(
        &self,
        delivery: Delivery,
        queue: &str,
        hold: &str,
        ttl_ms: u64,
    ) -> Result<(), Error> {
        let message_id = properties::message_id_or_new(&delivery.properties);
        let out = Outgoing {
            exchange: None,
            queue: queue.to_owned(),
            body: delivery.data.into(),
            message_id,
            properties: delivery.properties,
        };
        match self.sender.send(out.clone()).await {
            Err(Error::Backend(e)) if e.kind() == BackendErrorKind::Unroutable => {
                let config = self
                    .declared(queue)
                    .unwrap_or_else(|| std::sync::Arc::new(QueueConfig::new(queue)));
                let back = Outgoing {
                    exchange: None,
                    queue: hold.to_owned(),
                    ..out
                };
                self.holds
                    .park(&self.sender, &config, ttl_ms, back, HoldQueues::Quorum)
                    .await
            }
            other => other,
        }
    }
}

/// A queue's waiting jobs and consumers by a passive declare, or `None`
/// when it does not exist.
async fn passive_counts(
    connection: &Connection,
    queue: &str,
) -> Result<Option<(u32, u32)>, lapin::Error> {
    let channel = connection.create_channel().await?;
    match crate::declare::passive(&channel, queue).await {
        Ok(q) => {
            channel::close(&channel).await;
            Ok(Some((q.message_count(), q.consumer_count())))
        }
        Err(e) if Failure::of(&e, true).reply_code == Some(404) => Ok(None),
        Err(e) => Err(e),
    }
}
