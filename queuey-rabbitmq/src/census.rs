//! What a pruner must know of a hold queue that AMQP does not tell.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use queuey_core::Error;

/// Counts every job a hold queue holds, as AMQP cannot: those whose delay
/// is over and that wait to be dead-lettered back to the work queue
/// included (RabbitMQ shows them only in the management API's statistics,
/// a queue's `messages`).
///
/// A pruner asks it before it watches a hold (jobs counted keep it at once)
/// and again before it deletes it, and keeps the hold unless that second
/// answer is `Some(0)`. So the statistics must be emitted more often than
/// every ten seconds (RabbitMQ's `collect_statistics_interval`, 5 s by
/// default), for the second answer to be younger than the watch. A backend
/// has one only when given one
/// ([`RabbitMqOptions::hold_census`](crate::RabbitMqOptions::hold_census))
/// or built with the `management` feature; see [Pruning hold
/// queues](crate#pruning-hold-queues).
pub trait HoldCensus: Send + Sync {
    /// Every job `hold` holds, or `None` when it cannot be told.
    fn jobs<'a>(&'a self, hold: &'a str) -> BoxFuture<'a, Result<Option<u64>, Error>>;
}

/// A [`HoldCensus`] kept in the options: compared by identity, shown as
/// its presence only.
#[derive(Clone, Default)]
pub(crate) struct SharedCensus(pub(crate) Option<Arc<dyn HoldCensus>>);

impl PartialEq for SharedCensus {
    fn eq(&self, other: &Self) -> bool {
        let at = |census: &Self| census.0.as_ref().map(|c| Arc::as_ptr(c).cast::<()>());
        at(self) == at(other)
    }
}

impl Eq for SharedCensus {}

impl fmt::Debug for SharedCensus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(HoldCensus)"
        } else {
            "None"
        })
    }
}
