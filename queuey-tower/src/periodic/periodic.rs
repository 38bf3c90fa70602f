//! Declaring a periodic job.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use queuey_core::backend::Backend;
use queuey_core::periodic::{Schedule, check_name, tick_job_id};
use queuey_core::{EnqueueOptions, Error, Job, Producer, Queues, Uuid};

use super::{Clock, Missed};

/// How long after its instant a tick still fires as usual, whatever the
/// [`Missed`] policy: 1 second.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(1);

/// A job enqueued at every tick of a [`Schedule`], once per tick across
/// every process that declares it.
///
/// Each tick's job is an ordinary job of `J` on `J`'s queue, with the id
/// [`tick_job_id`] of the name and the tick (the same from any process) and
/// the correlation id `periodic:{name}@{tick in ms}`. Give it to
/// [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic), or to a
/// [`Scheduler`](super::Scheduler) in a process that only produces.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::periodic::Schedule;
/// use queuey_core::{Job, Queues};
/// use queuey_tower::periodic::{Missed, Periodic};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// enum AppQueues {
///     Maintenance,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Maintenance, name = "cleanup")]
/// struct Cleanup {
///     older_than_days: u32,
/// }
///
/// let nightly = Periodic::new(
///     "nightly-cleanup",
///     Schedule::cron("0 0 3 * * *", "Europe/Amsterdam")?,
///     || Cleanup { older_than_days: 30 },
/// )
/// .missed(Missed::FireOnce);
/// let heartbeat = Periodic::new("heartbeat", Schedule::every(Duration::from_secs(10))?, || {
///     Cleanup { older_than_days: 0 }
/// })
/// .missed(Missed::Skip);
/// # let _ = (nightly, heartbeat);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Periodic<J> {
    spec: Spec,
    make: Arc<dyn Fn(SystemTime) -> J + Send + Sync>,
}

/// A periodic job but for its job type: what its schedule's loop reads.
pub(crate) struct Spec {
    pub(crate) name: String,
    pub(crate) schedule: Schedule,
    pub(crate) missed: Missed,
    pub(crate) grace: Duration,
    pub(crate) priority: u8,
    pub(crate) clock: Clock,
}

impl<J: Job> Periodic<J> {
    /// A periodic job named `name` (1 to 120 letters, digits, `-`, `_`, `.`;
    /// checked at build), enqueueing the job `make` returns at every tick of
    /// `schedule`. The name identifies the schedule across the fleet and
    /// deploys: the same name shares its ticks, a new name is a new schedule.
    pub fn new(
        name: impl Into<String>,
        schedule: Schedule,
        make: impl Fn() -> J + Send + Sync + 'static,
    ) -> Self {
        Self::for_tick(name, schedule, move |_| make())
    }

    /// Like [`new`](Self::new), with the tick's instant given to `make`
    /// (for a job about the period that just ended, say).
    pub fn for_tick(
        name: impl Into<String>,
        schedule: Schedule,
        make: impl Fn(SystemTime) -> J + Send + Sync + 'static,
    ) -> Self {
        Periodic {
            spec: Spec {
                name: name.into(),
                schedule,
                missed: Missed::default(),
                grace: DEFAULT_GRACE,
                priority: 0,
                clock: Clock::system(),
            },
            make: Arc::new(make),
        }
    }

    /// What to do with ticks no process fired in time (default
    /// [`Missed::FireOnce`]).
    pub fn missed(mut self, missed: Missed) -> Self {
        self.spec.missed = missed;
        self
    }

    /// How late a tick may be handled and still fire as usual (default
    /// [`DEFAULT_GRACE`]); an older one is missed ([`missed`](Self::missed)).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.spec.grace = grace;
        self
    }

    /// The priority of each tick's job (default 0).
    pub fn priority(mut self, priority: u8) -> Self {
        self.spec.priority = priority;
        self
    }

    /// Where the scheduler reads the time (default [`Clock::system`]).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.spec.clock = clock;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.spec.schedule
    }

    /// The id of the job enqueued for `tick`.
    pub fn job_id(&self, tick: SystemTime) -> Uuid {
        tick_job_id(&self.spec.name, tick)
    }
}

impl<J> fmt::Debug for Periodic<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = &self.spec;
        f.debug_struct("Periodic")
            .field("name", &spec.name)
            .field("schedule", &spec.schedule)
            .field("job", &std::any::type_name::<J>())
            .field("missed", &spec.missed)
            .field("grace", &spec.grace)
            .field("priority", &spec.priority)
            .finish()
    }
}

/// Refuses `name` when an `earlier` periodic job has it.
pub(crate) fn check_unique<'a>(
    name: &str,
    mut earlier: impl Iterator<Item = &'a str>,
) -> Result<(), Error> {
    if earlier.any(|e| e == name) {
        return Err(Error::invalid_config(format!(
            "two periodic jobs are named `{name}`; give each its own name"
        )));
    }
    Ok(())
}

/// A periodic job with its job type erased: what the schedule loop runs.
pub(crate) trait Entry<Q, B>: Send + Sync {
    fn spec(&self) -> &Spec;
    fn name(&self) -> &str {
        &self.spec().name
    }
    /// The queue of the job type, by its name in the queue set.
    fn queue(&self) -> &'static str;
    /// Checks the declaration.
    fn check(&self) -> Result<(), Error>;
    /// Enqueues the job of `tick`; answers its id.
    fn enqueue<'a>(
        &'a self,
        producer: &'a Producer<Q, B>,
        tick: SystemTime,
    ) -> BoxFuture<'a, Result<Uuid, Error>>;
}

impl<J, B> Entry<J::Queues, B> for Periodic<J>
where
    J: Job,
    B: Backend,
{
    fn spec(&self) -> &Spec {
        &self.spec
    }

    fn queue(&self) -> &'static str {
        J::QUEUE.name()
    }

    fn check(&self) -> Result<(), Error> {
        check_name(&self.spec.name).map_err(|e| Error::invalid_config(e.to_string()))
    }

    fn enqueue<'a>(
        &'a self,
        producer: &'a Producer<J::Queues, B>,
        tick: SystemTime,
    ) -> BoxFuture<'a, Result<Uuid, Error>> {
        Box::pin(async move {
            let job = (self.make)(tick);
            let ms = tick
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let options = EnqueueOptions::default()
                .job_id(self.job_id(tick))
                .priority(self.spec.priority)
                .correlation_id(format!("periodic:{}@{ms}", self.spec.name));
            producer.enqueue_with(&job, options).await
        })
    }
}
