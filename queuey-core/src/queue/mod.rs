//! Queues: their settings, and the typed sets an application declares.
//!
//! # Reading settings back
//!
//! Every settings builder ([`QueueConfig`], `RabbitMqOptions`): set a value
//! with the builder method, read it back with `.settings()` and the same
//! name (no `get_` prefix, no second spelling):
//!
//! ```
//! use queuey_core::QueueConfig;
//!
//! let config = QueueConfig::new("app.emails").prefetch(32);
//! assert_eq!(config.settings().prefetch(), 32);
//! ```
//!
//! What is derived from several settings stays on the config:
//! [`QueueConfig::name`],
//! [`priority_levels`](QueueConfig::priority_levels),
//! [`top_priority`](QueueConfig::top_priority),
//! [`validate`](QueueConfig::validate).

mod config;
mod namespace;
mod queue_type;
mod settings;
pub mod shard;

pub use config::{MAX_QUEUE_NAME_BYTES, QueueConfig};
pub use namespace::Namespace;
pub(crate) use namespace::QueueNames;
pub use queue_type::QueueType;
pub use settings::QueueSettings;

/// A set of queues an application uses, normally an enum with one fieldless
/// variant per queue, implemented with `#[derive(Queues)]`.
///
/// Jobs name their queue in a set (`Job::QUEUE`), and producers and workers
/// are generic over it, so one set's job cannot go through another's. For
/// names known only at run time (per tenant), use a [`Namespace`].
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

    /// The queue's name in the set, prefix included: its broker name in the
    /// root namespace (a [`Namespace`] puts itself in front).
    fn name(&self) -> &'static str;

    /// The queue's settings.
    fn config(&self) -> QueueConfig;

    /// The settings of every queue of the set.
    fn configs() -> Vec<QueueConfig> {
        Self::ALL.iter().map(Queues::config).collect()
    }
}
