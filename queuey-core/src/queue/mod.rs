//! Queues: their settings, and the typed sets an application declares.

mod config;
mod queue_type;

pub use config::{MAX_QUEUE_NAME_BYTES, QueueConfig, validate_queue_name};
pub use queue_type::QueueType;

/// A set of queues an application uses, normally an enum with one fieldless
/// variant per queue, implemented with `#[derive(Queues)]`.
///
/// Jobs name their queue as a value of such a set (`Job::QUEUE`), and
/// producers and workers are generic over the set, so a job of one set cannot
/// be enqueued through or handled by another set's producer or worker.
///
/// ```
/// use queuey_core::{QueueConfig, Queues};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// #[queues(prefix = "app")]
/// enum AppQueues {
///     #[queue(prefetch = 32)]
///     Emails,
///     #[queue(name = "hooks", max_priority = 0)]
///     Webhooks,
/// }
///
/// assert_eq!(AppQueues::Emails.name(), "app.emails");
/// assert_eq!(AppQueues::Webhooks.config().priority_levels(), None);
/// assert_eq!(AppQueues::configs().len(), 2);
/// ```
pub trait Queues: Sized + Send + Sync + 'static {
    /// Every queue of the set, in declaration order.
    const ALL: &'static [Self];

    /// The queue's full name on the broker, prefix included.
    fn name(&self) -> &'static str;

    /// The queue's settings.
    fn config(&self) -> QueueConfig;

    /// The settings of every queue of the set.
    fn configs() -> Vec<QueueConfig> {
        Self::ALL.iter().map(Queues::config).collect()
    }
}
