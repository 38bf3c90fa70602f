//! Enqueueing typed jobs.

mod builder;
mod control;
mod outcome;
mod pace;
mod wait;
mod watch;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

use crate::backend::Backend;
use crate::queue::QueueNames;
use crate::store::Store;
use crate::unique::{self, Claim};
use crate::{BackendError, BackendErrorKind, Envelope, Error, Job, Namespace, Queues, Unique};

pub use builder::ProducerBuilder;
pub use outcome::WaitError;
use pace::{Booking, Pacer};
pub use watch::JobWatch;

/// Options for [`Producer::enqueue_with`].
///
/// ```
/// use std::time::Duration;
/// use queuey_core::EnqueueOptions;
///
/// let options = EnqueueOptions {
///     priority: 5,
///     correlation_id: Some("order-42".into()),
///     ..Default::default()
/// };
/// let later = EnqueueOptions::default().delay(Duration::from_secs(30));
/// let at_nine = EnqueueOptions::default()
///     .run_at(std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
/// # let _ = (options, later, at_nine);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnqueueOptions {
    /// The message priority (0 by default); higher is served first, values
    /// above the queue's top level count as the top level.
    pub priority: u8,
    /// An id tying the job to what caused it; it shows up in the handler's
    /// context and in traces.
    pub correlation_id: Option<String>,
    /// Deliver the job only after this delay (rounded up to the retry
    /// granularity; the queue must be declared through the backend). Not
    /// with [`run_at`](Self::run_at).
    pub delay: Option<Duration>,
    /// Deliver the job at this wall-clock instant, never earlier (rounded up
    /// like a [`delay`](Self::delay); a past one is at once). Not with `delay`.
    pub run_at: Option<SystemTime>,
    /// Run the job only before this instant: taken, or due back, later, it is
    /// dead-lettered as `deadline passed`. The handler sees the time left in
    /// [`JobContext::remaining`](crate::JobContext::remaining).
    pub deadline: Option<SystemTime>,
    /// The job's id instead of a random one: an id derived from the work (a
    /// tick, an order number) makes two enqueues of it recognisable. It stays
    /// the job's through retries, deferrals, holds and dead letters.
    ///
    /// It also recovers an enqueue whose outcome is unknown
    /// ([`Error::is_transient`]): enqueue again with the same id. A job that
    /// reached the broker twice under one id runs once with the worker's
    /// idempotency layer, and a unique job's claim already belongs to the id
    /// (no [`Error::Duplicate`]).
    pub job_id: Option<Uuid>,
    /// Makes this enqueue a unique job (see [`Unique`]), whatever the type
    /// declares; needs a [`store`](ProducerBuilder::store). A window of zero
    /// or over 365 days is an [`Error::InvalidConfig`]
    /// ([`check_window`](crate::store::check_window)).
    pub unique: Option<Unique>,
    /// The job's key on a [sharded](crate::QueueConfig::shards) queue,
    /// whatever the job type declares ([`Job::key`]): jobs with one key go
    /// to one shard and keep their order.
    pub key: Option<String>,
    /// The tenant the job belongs to, whatever the job type declares
    /// ([`Job::tenant`]). On a [sharded](crate::QueueConfig::shards) queue
    /// it picks the shard instead of the key (a tenant's jobs keep their
    /// order), and workers take turns between shards by the weight of each
    /// one's tenant (1 unless the worker's `tenant_weights` says otherwise),
    /// so a tenant's backlog does not hold up another tenant's jobs. Any
    /// name: adding a tenant needs no configuration.
    pub tenant: Option<String>,
}

impl EnqueueOptions {
    /// Sets the priority.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the correlation id.
    pub fn correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// Sets a delay.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Sets the instant the job is due at.
    pub fn run_at(mut self, at: SystemTime) -> Self {
        self.run_at = Some(at);
        self
    }

    /// The wait before the job is due, from now: its `delay`, or the time
    /// left until `run_at` (`None` for a `run_at` that has passed).
    fn wait(&self, queue: &str) -> Result<Option<Duration>, Error> {
        match (self.delay, self.run_at) {
            (Some(_), Some(_)) => Err(Error::invalid_config(format!(
                "a job for queue `{queue}` was given both a delay and a run_at time; \
                 keep one of them"
            ))),
            (delay, None) => Ok(delay),
            (None, Some(at)) => Ok(at
                .duration_since(SystemTime::now())
                .ok()
                .filter(|wait| !wait.is_zero())),
        }
    }

    /// Sets a deadline.
    pub fn deadline(mut self, deadline: SystemTime) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets the job's id (see [`job_id`](EnqueueOptions::job_id)).
    pub fn job_id(mut self, job_id: Uuid) -> Self {
        self.job_id = Some(job_id);
        self
    }

    /// Makes the job unique (see [`unique`](EnqueueOptions::unique)).
    pub fn unique(mut self, unique: Unique) -> Self {
        self.unique = Some(unique);
        self
    }

    /// Sets the job's key on a sharded queue (see [`key`](EnqueueOptions::key)).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the job's tenant (see [`tenant`](EnqueueOptions::tenant)).
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// Sets a deadline `budget` from now.
    pub fn deadline_in(self, budget: Duration) -> Self {
        self.deadline(SystemTime::now() + budget)
    }
}

/// Enqueues jobs of the queue set `Q` through the backend `B`.
///
/// Every method returns the job's id once the broker holds it (or fails).
/// Jobs of another queue set do not compile (`J: Job<Queues = Q>`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), queuey_core::Error> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use queuey_core::{Job, Producer, Queues};
/// use queuey_core::memory::MemoryBackend;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// #[queues(prefix = "app")]
/// enum AppQueues {
///     Emails,
/// }
///
/// #[derive(Job, Serialize, Deserialize)]
/// #[job(queue = AppQueues::Emails)]
/// struct SendEmail {
///     to: String,
/// }
///
/// let backend = Arc::new(MemoryBackend::new());
/// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
/// producer.enqueue(&SendEmail { to: "a@example.com".into() }).await?;
/// producer.enqueue_after(&SendEmail { to: "b@example.com".into() }, Duration::from_secs(60)).await?;
/// assert_eq!(backend.ready_count("app.emails"), 1);
/// assert_eq!(backend.held_count("app.emails"), 1);
/// # Ok(())
/// # }
/// ```
///
/// For a [`Namespace`] chosen at run time (one per tenant, say), build the
/// producer with [`Producer::builder`] and
/// [`namespace`](ProducerBuilder::namespace).
pub struct Producer<Q, B> {
    backend: B,
    namespace: Namespace,
    names: QueueNames,
    store: Option<StoreHandle>,
    pacer: Option<Pacer>,
    _queues: PhantomData<fn() -> Q>,
}

/// The store unique jobs are claimed in, and the bound on each call.
#[derive(Clone)]
pub(crate) struct StoreHandle {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) timeout: Duration,
}

/// Where a job of a batch went: the batch's `n`th envelope, or the `n`th
/// sent on its own.
#[derive(Clone, Copy)]
enum Sent {
    Batch(usize),
    Single(usize),
}

/// How a job goes to the broker.
#[derive(Clone, Copy)]
enum Send {
    Now,
    After(Duration),
    Defer(Duration),
}

impl<Q: Queues, B: Backend> Producer<Q, B> {
    /// Declares every queue of `Q` on the backend, then returns a producer.
    pub async fn new(backend: B) -> Result<Self, Error> {
        Self::builder(backend).build().await
    }

    /// A producer that declares nothing, for processes that must not create
    /// topology: delays and deferrals onto a queue not declared through this
    /// backend fail with [`Error::UnknownQueue`].
    pub fn new_undeclared(backend: B) -> Self {
        Self::builder(backend).build_undeclared()
    }

    /// Starts building a producer on `backend`, to set a
    /// [`namespace`](ProducerBuilder::namespace).
    pub fn builder(backend: B) -> ProducerBuilder<Q, B> {
        ProducerBuilder::new(backend)
    }

    pub(crate) fn from_parts(
        backend: B,
        namespace: Namespace,
        store: Option<StoreHandle>,
        pacer: Option<Pacer>,
    ) -> Self {
        Producer {
            backend,
            names: QueueNames::new::<Q>(&namespace),
            namespace,
            store,
            pacer,
            _queues: PhantomData,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The namespace of every queue this producer enqueues onto.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The name `queue` has on the broker for this producer.
    pub fn queue_name(&self, queue: &Q) -> &str {
        self.names.get(queue.name())
    }

    /// Enqueues a job for immediate delivery at priority 0.
    pub async fn enqueue<J: Job<Queues = Q>>(&self, job: &J) -> Result<Uuid, Error> {
        self.enqueue_with(job, EnqueueOptions::default()).await
    }

    /// Enqueues a job with a priority, a correlation id, a delay, a
    /// deadline and/or a job id of your choosing.
    pub async fn enqueue_with<J: Job<Queues = Q>>(
        &self,
        job: &J,
        mut options: EnqueueOptions,
    ) -> Result<Uuid, Error> {
        let unique = options.unique.take().or_else(|| job.unique());
        let (envelope, wait) = self.envelope_with(job, options)?;
        let booking = self.booking(job, wait);
        let how = wait.map_or(Send::Now, Send::After);
        self.send(envelope, unique.as_ref(), how, booking).await
    }

    /// The turn a job due at once books, when the producer keeps limits
    /// (see [`limit_store`](ProducerBuilder::limit_store)).
    fn booking<J: Job>(&self, job: &J, wait: Option<Duration>) -> Option<Booking> {
        match (&self.pacer, wait) {
            (Some(_), None) => Pacer::booking(job),
            _ => None,
        }
    }

    /// How long until the booked turn of job `job_id`: `None` for none
    /// booked (no booking asked, or the store failed).
    async fn book(&self, booking: Option<&Booking>, job_id: Uuid) -> Option<Duration> {
        match (&self.pacer, booking) {
            (Some(pacer), Some(booking)) => pacer.book(booking, job_id).await,
            _ => None,
        }
    }

    /// Enqueues a job to be delivered at `at` on the wall clock, never
    /// earlier (held on the broker like a delay, measured on this machine's
    /// clock now); a time that has passed enqueues it at once.
    pub async fn enqueue_at<J: Job<Queues = Q>>(
        &self,
        job: &J,
        at: SystemTime,
    ) -> Result<Uuid, Error> {
        self.enqueue_with(job, EnqueueOptions::default().run_at(at))
            .await
    }

    /// Enqueues a job to be delivered after `delay` (rounded up to the
    /// backend's retry granularity, never earlier).
    pub async fn enqueue_after<J: Job<Queues = Q>>(
        &self,
        job: &J,
        delay: Duration,
    ) -> Result<Uuid, Error> {
        self.enqueue_with(job, EnqueueOptions::default().delay(delay))
            .await
    }

    /// Enqueues a job to be delivered after `delay` (rounded up to the
    /// backend's deferral granularity) at the queue's top priority, ahead of
    /// whatever is waiting on the queue by then.
    pub async fn defer<J: Job<Queues = Q>>(&self, job: &J, delay: Duration) -> Result<Uuid, Error> {
        let (envelope, _) = self.envelope_with(job, EnqueueOptions::default().delay(delay))?;
        self.send(envelope, job.unique().as_ref(), Send::Defer(delay), None)
            .await
    }

    /// Publishes one envelope (every single-job enqueue does), claiming a
    /// unique job's key first, then booking its turn (`booking`, for a job
    /// due at once): a job whose turn is ahead is sent to arrive then.
    async fn send(
        &self,
        mut envelope: Envelope,
        unique: Option<&Unique>,
        mut how: Send,
        booking: Option<Booking>,
    ) -> Result<Uuid, Error> {
        let claim = match unique {
            Some(unique) => Some(self.claim(&mut envelope, unique).await?),
            None => None,
        };
        if let Some(wait) = self.book(booking.as_ref(), envelope.job_id).await
            && !wait.is_zero()
        {
            how = Send::After(wait);
        }
        let sent = match how {
            Send::Now => self.backend.publish(&envelope).await,
            Send::After(delay) => self.backend.publish_after(&envelope, delay).await,
            Send::Defer(delay) => self.backend.defer(&envelope, delay).await,
        };
        match sent {
            Ok(()) => Ok(envelope.job_id),
            Err(error) => {
                let key = envelope.unique_key.as_deref();
                self.give_back_if_unsent(claim, &error, key, envelope.job_id)
                    .await;
                Err(error)
            }
        }
    }

    /// Claims `unique`'s key for the envelope's job, marking it the holder.
    async fn claim(&self, envelope: &mut Envelope, unique: &Unique) -> Result<Claim, Error> {
        let Some(handle) = &self.store else {
            return Err(Error::invalid_config(format!(
                "a `{}` job for queue `{}` is unique ({unique}), but the producer has no store \
                 to check it in: build it with `Producer::builder(..).store(..)`",
                envelope.job_type, envelope.queue
            )));
        };
        // One key for the whole queue, whichever shard the job goes to.
        let queue = self.names.logical(&envelope.queue);
        let window = unique.checked_window(queue, &envelope.job_type)?;
        let key = unique.store_key(queue, &envelope.job_type, &envelope.payload);
        let job = unique::ClaimFor {
            queue,
            job_type: &envelope.job_type,
            job_id: envelope.job_id,
        };
        let claim = unique::claim(&*handle.store, handle.timeout, &key, job, window).await?;
        if claim != Claim::Unchecked {
            envelope.unique_key = Some(key);
        }
        Ok(claim)
    }

    /// Gives back a key this enqueue claimed when its publish surely did not
    /// reach the broker (after a transient error the job may be there).
    async fn give_back_if_unsent(
        &self,
        claim: Option<Claim>,
        error: &Error,
        key: Option<&str>,
        job_id: Uuid,
    ) {
        if claim != Some(Claim::Taken) || error.is_transient() {
            return;
        }
        if let (Some(handle), Some(key)) = (&self.store, key) {
            unique::give_back(&*handle.store, handle.timeout, key, job_id).await;
        }
    }

    /// Enqueues many jobs, maybe concurrently. Each gets its own outcome, in
    /// order (one failing stops no other); an `Ok` job is held by the broker.
    /// A job whose booked turn is ahead (see
    /// [`limit_store`](ProducerBuilder::limit_store)) is sent on its own to
    /// arrive then; the others go in one batch.
    pub async fn enqueue_batch<'j, J, I>(&self, jobs: I) -> Vec<Result<Uuid, Error>>
    where
        J: Job<Queues = Q>,
        I: IntoIterator<Item = &'j J>,
    {
        // Each accepted job's claim, and where it went: the batch or, with
        // a turn ahead, a publish of its own.
        let mut accepted: Vec<(Option<Claim>, Sent)> = Vec::new();
        let mut batch: Vec<Envelope> = Vec::new();
        let mut singles: Vec<(Envelope, Duration)> = Vec::new();
        let mut outcomes: Vec<Result<Uuid, Error>> = Vec::new();
        for job in jobs {
            let mut envelope = match self.envelope_with(job, EnqueueOptions::default()) {
                Ok((envelope, _)) => envelope,
                Err(e) => {
                    outcomes.push(Err(e));
                    continue;
                }
            };
            let claim = match job.unique() {
                Some(unique) => match self.claim(&mut envelope, &unique).await {
                    Ok(claim) => Some(claim),
                    Err(e) => {
                        outcomes.push(Err(e));
                        continue;
                    }
                },
                None => None,
            };
            let booking = self.booking(job, None);
            outcomes.push(Ok(envelope.job_id));
            match self.book(booking.as_ref(), envelope.job_id).await {
                Some(wait) if !wait.is_zero() => {
                    accepted.push((claim, Sent::Single(singles.len())));
                    singles.push((envelope, wait));
                }
                _ => {
                    accepted.push((claim, Sent::Batch(batch.len())));
                    batch.push(envelope);
                }
            }
        }
        let mut batched = if batch.is_empty() {
            Vec::new()
        } else {
            self.backend.publish_batch(&batch).await
        }
        .into_iter();
        let mut batched: Vec<Option<Result<(), Error>>> =
            (0..batch.len()).map(|_| batched.next()).collect();
        let single = singles
            .iter()
            .map(|(envelope, wait)| self.backend.publish_after(envelope, *wait));
        let mut single: Vec<Option<Result<(), Error>>> = futures::future::join_all(single)
            .await
            .into_iter()
            .map(Some)
            .collect();
        // One claim and destination per accepted job, in order.
        let accepted_outcomes = outcomes.iter_mut().filter(|o| o.is_ok());
        for (outcome, (claim, sent)) in accepted_outcomes.zip(accepted) {
            let (envelope, published) = match sent {
                Sent::Batch(i) => (&batch[i], batched[i].take()),
                Sent::Single(i) => (&singles[i].0, single[i].take()),
            };
            let error = match published {
                Some(Ok(())) => continue,
                Some(Err(e)) => e,
                None => Error::Backend(BackendError::new(
                    BackendErrorKind::Other,
                    "the backend reported fewer publish outcomes than jobs in the batch",
                )),
            };
            let key = envelope.unique_key.as_deref();
            self.give_back_if_unsent(claim, &error, key, envelope.job_id)
                .await;
            *outcome = Err(error);
        }
        outcomes
    }

    /// The envelope of a job with `options` applied, addressed to its queue
    /// (to the shard of its tenant, else of its key, on a sharded queue), and
    /// the wait before it is due.
    fn envelope_with<J: Job<Queues = Q>>(
        &self,
        job: &J,
        mut options: EnqueueOptions,
    ) -> Result<(Envelope, Option<Duration>), Error> {
        let tenant = options.tenant.take().or_else(|| job.tenant());
        let key = options.key.take().or_else(|| job.key());
        let queue = self
            .names
            .target(J::QUEUE.name(), tenant.as_deref().or(key.as_deref()));
        let payload = serde_json::value::to_raw_value(job).map_err(|source| Error::Encode {
            queue: queue.to_owned(),
            source,
        })?;
        let mut envelope = Envelope::new(J::NAME, queue, payload).with_priority(options.priority);
        #[cfg(feature = "opentelemetry")]
        crate::trace_context::inject_current(&mut envelope);
        let wait = options.wait(&envelope.queue)?;
        envelope.correlation_id = options.correlation_id;
        envelope.tenant = tenant;
        if let Some(job_id) = options.job_id {
            envelope.job_id = job_id;
        }
        let deadline = options.deadline.or_else(|| type_deadline::<J>(wait));
        if let Some(deadline) = deadline {
            envelope.deadline_ms = Some(deadline_ms(&envelope, deadline, wait)?);
        }
        Ok((envelope, wait))
    }
}

/// The deadline a `J` gets when its enqueue names none: [`Job::deadline`]
/// counted from when the job is due.
fn type_deadline<J: Job>(wait: Option<Duration>) -> Option<SystemTime> {
    let budget = J::deadline()?;
    Some(SystemTime::now() + wait.unwrap_or_default() + budget)
}

/// The deadline in ms since the epoch, refusing one that passes before the
/// job's delay ends (the job could only be dead-lettered).
fn deadline_ms(
    envelope: &Envelope,
    deadline: SystemTime,
    delay: Option<Duration>,
) -> Result<u64, Error> {
    let ms = deadline
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let due = crate::clock::now_ms()
        .saturating_add(delay.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
    if ms <= due {
        return Err(Error::invalid_config(format!(
            "the deadline of a `{}` job for queue `{}` passes before the job could run \
             ({} ms too early); give it a later deadline or no delay",
            envelope.job_type,
            envelope.queue,
            due - ms
        )));
    }
    Ok(ms)
}

impl<Q, B: Clone> Clone for Producer<Q, B> {
    fn clone(&self) -> Self {
        Producer {
            backend: self.backend.clone(),
            namespace: self.namespace.clone(),
            names: self.names.clone(),
            store: self.store.clone(),
            pacer: self.pacer.clone(),
            _queues: PhantomData,
        }
    }
}

impl<Q, B: fmt::Debug> fmt::Debug for Producer<Q, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("queues", &std::any::type_name::<Q>())
            .field("namespace", &self.namespace)
            .field("backend", &self.backend)
            .field("store", &self.store.as_ref().map(|h| &h.store))
            .field("limit_store", &self.pacer)
            .finish()
    }
}
