//! Typed jobs bound to one queue of one queue set.

use std::num::NonZeroU32;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::Rate;
use crate::{Queues, RetryPolicy, Unique};

/// A job type: serializable, named, and bound to one queue of one
/// [`Queues`] set. Implement it with `#[derive(Job)]`.
///
/// The binding is static: `Producer<Q, _>::enqueue` accepts only jobs whose
/// `Queues` is `Q`, so a job cannot be sent to another application's queues by
/// mistake.
///
/// ```
/// use queuey_core::{Job, Queues};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// #[queues(prefix = "app")]
/// enum AppQueues {
///     Emails,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Emails, name = "send_email", retry(max_attempts = 3))]
/// struct SendEmail {
///     to: String,
/// }
///
/// assert_eq!(SendEmail::NAME, "send_email");
/// assert_eq!(SendEmail::QUEUE.name(), "app.emails");
/// assert_eq!(SendEmail::retry_policy().unwrap().max_attempts(), 3);
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The queue set the job's queue belongs to.
    type Queues: Queues;

    /// What the job's handler returns on success, sent back to a caller
    /// that waits for it ([`Producer::enqueue_and_wait`](crate::Producer::enqueue_and_wait)).
    /// `()` for a job nobody waits for.
    ///
    /// `#[derive(Job)]` sets it to `()` unless `#[job(output = SomeType)]`
    /// names one; a hand-written `impl Job` writes `type Output = ();`.
    type Output: Serialize + DeserializeOwned + Send + 'static;

    /// The queue jobs of this type are enqueued on.
    const QUEUE: Self::Queues;

    /// The job type's name, stored in the envelope as `job_type`; it picks
    /// the handler on the worker side.
    ///
    /// `#[derive(Job)]` takes it from `#[job(name = "..")]`, else from the
    /// type's name, so renaming a type without `name` renames its jobs: jobs
    /// queued under the old name find no handler and are dead-lettered.
    /// Set `name` (to the old type name, after a rename) to keep it stable.
    const NAME: &'static str;

    /// Which jobs of this type count as the same one while it waits (see
    /// [`Unique`]); `None`, the default, enqueues every job.
    /// `#[job(unique(window = "10m"))]` makes the whole job the key,
    /// `#[job(unique(window = "10m", key = Self::tenant))]` the value a
    /// method of the job gives.
    fn unique(&self) -> Option<Unique> {
        None
    }

    /// The job's key on a [sharded](crate::QueueConfig::shards) queue:
    /// jobs with the same key go to the same shard, so they keep their
    /// order relative to each other; jobs without one (`None`, the
    /// default) are spread round-robin. An unsharded queue ignores it.
    ///
    /// `#[job(key = customer)]` makes a field the key (anything
    /// `Display`), `#[job(key = Self::customer_key)]` the value a method of
    /// the job gives. [`EnqueueOptions::key`](crate::EnqueueOptions::key)
    /// wins over it.
    fn key(&self) -> Option<String> {
        None
    }

    /// The tenant the job belongs to (a customer, an account); `None`, the
    /// default, names none. On a [sharded](crate::QueueConfig::shards)
    /// queue the tenant picks the shard (over [`key`](Job::key)) and
    /// workers share their turns between tenants, so one tenant's backlog
    /// never holds up another's jobs (see
    /// [`EnqueueOptions::tenant`](crate::EnqueueOptions::tenant), which wins
    /// over it). `#[job(tenant = customer)]` makes a field the tenant,
    /// `#[job(tenant = Self::account)]` the value a method gives.
    fn tenant(&self) -> Option<String> {
        None
    }

    /// The job type's own retry policy, which wins over its queue's.
    fn retry_policy() -> Option<RetryPolicy> {
        None
    }

    /// The time a job of this type has to finish, counted from when it is
    /// due (enqueued, or its delay over): the deadline every enqueue of it
    /// gets unless [`EnqueueOptions::deadline`](crate::EnqueueOptions::deadline)
    /// gives one. `None`, the default, gives none.
    /// `#[job(deadline = "30m")]` sets it.
    fn deadline() -> Option<Duration> {
        None
    }

    /// The key whose [`limits`](Job::limits) this job counts against (a
    /// host, a tenant); `None`, the default, runs it without limits.
    /// `#[job(limit(key = Self::host, ..))]` makes it the value a method
    /// of the job gives (`key = tenant`: a field), anything `Display`.
    fn limit_key(&self) -> Option<String> {
        None
    }

    /// How many jobs of this type with the same
    /// [`limit_key`](Job::limit_key) may run at once and start per period,
    /// across every worker sharing a limit store; `None`, the default,
    /// limits nothing. `#[job(limit(key = Self::host, concurrency = 3,
    /// rate = "10/s", burst = 5))]` sets it, checked when the program is
    /// compiled.
    fn limits() -> Option<Limits> {
        None
    }
}

/// The per-key limits a job type declares (see [`Job::limits`]): at most
/// `concurrency` jobs of a key run at once, at most `rate` start per
/// period. A worker given a limit store applies them.
///
/// ```
/// use std::num::NonZeroU32;
/// use queuey_core::Limits;
///
/// let limits = Limits::new()
///     .with_concurrency(NonZeroU32::new(3).unwrap())
///     .with_rate("10/s".parse().unwrap());
/// assert_eq!(limits.concurrency().map(NonZeroU32::get), Some(3));
/// assert_eq!(limits.rate().unwrap().count(), 10);
/// assert!(!limits.is_empty());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    concurrency: Option<NonZeroU32>,
    rate: Option<Rate>,
    fail_open: bool,
}

impl Limits {
    /// No limit.
    pub const fn new() -> Self {
        Limits {
            concurrency: None,
            rate: None,
            fail_open: false,
        }
    }

    /// At most `limit` jobs of a key run at once.
    pub const fn with_concurrency(mut self, limit: NonZeroU32) -> Self {
        self.concurrency = Some(limit);
        self
    }

    /// At most `rate` jobs of a key start per period.
    pub const fn with_rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Runs jobs without their limits while the limit store fails, instead
    /// of deferring them until it answers (the default).
    pub const fn with_fail_open(mut self) -> Self {
        self.fail_open = true;
        self
    }

    /// Whether jobs run without their limits while the limit store fails.
    pub fn fails_open(&self) -> bool {
        self.fail_open
    }

    /// How many jobs of a key run at once, at most, if limited.
    pub fn concurrency(&self) -> Option<NonZeroU32> {
        self.concurrency
    }

    /// How many jobs of a key start per period, at most, if limited.
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// Whether it limits nothing.
    pub fn is_empty(&self) -> bool {
        self.concurrency.is_none() && self.rate.is_none()
    }
}

impl RetryPolicy {
    /// The policy job type `J` sets for itself: its own
    /// (`#[job(retry(..))]`), else its queue's (`#[queue(retry(..))]`), else
    /// none, and a retry layer's own policy applies.
    ///
    /// ```
    /// use queuey_core::{Job, Queues, RetryPolicy};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     #[queue(retry(max_attempts = 3))]
    ///     Emails,
    ///     Reports,
    /// }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Emails, name = "send_email")]
    /// struct SendEmail;
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Emails, name = "send_digest", retry(max_attempts = 7))]
    /// struct SendDigest;
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Reports, name = "build_report")]
    /// struct BuildReport;
    ///
    /// assert_eq!(RetryPolicy::for_job::<SendEmail>().unwrap().max_attempts(), 3);
    /// assert_eq!(RetryPolicy::for_job::<SendDigest>().unwrap().max_attempts(), 7);
    /// assert_eq!(RetryPolicy::for_job::<BuildReport>(), None);
    /// ```
    pub fn for_job<J: Job>() -> Option<RetryPolicy> {
        J::retry_policy().or_else(|| J::QUEUE.config().settings().retry().cloned())
    }
}
