//! Waiting for a job's result, or watching it: enqueueing for a caller
//! that waits.

use std::time::Duration;

use super::Producer;
use super::outcome::WaitError;
use super::watch::JobWatch;
use crate::backend::Replies;
use crate::{EnqueueOptions, Error, Job, Queues};

/// A wait that never ends in practice, for a timeout too large to add to
/// the clock.
const NO_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl<Q: Queues, B: Replies> Producer<Q, B> {
    /// Enqueues a job and waits for its final outcome: the handler's
    /// [`Output`](Job::Output) once the job succeeded, or why there is
    /// none. Waits at most `timeout` in all, enqueueing included.
    ///
    /// Only the final outcome answers (after retries and deferrals). The
    /// timeout is the only bound: a job still queued, held or running then
    /// goes on (its result dropped), as does one whose reply cannot come back
    /// ([`WaitError::ReplyLost`]). A job delivered twice may answer twice;
    /// the first answer wins. Only a waited-for job's output is serialized,
    /// so [`enqueue`](Producer::enqueue) costs nothing more. The backend must
    /// carry results ([`Replies`]: the memory and RabbitMQ backends do).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use queuey_core::backend::{Backend, Replies, Reply};
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::{Job, Producer, Queues};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     Prices,
    /// }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Prices, output = u64)]
    /// struct PriceOrder {
    ///     items: u64,
    /// }
    ///
    /// let backend = Arc::new(MemoryBackend::new());
    /// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    /// // A worker would run the handler; here the reply is sent by hand.
    /// let worker = tokio::spawn({
    ///     let backend = backend.clone();
    ///     async move {
    ///         let mut deliveries = backend.consume(&AppQueues::Prices.config()).await?;
    ///         let delivery = deliveries.next().await.expect("a job")?;
    ///         let order: PriceOrder = delivery.envelope().payload_as()?;
    ///         let to = delivery.envelope().reply_to.clone().expect("a waiting caller");
    ///         delivery.ack().await?;
    ///         let value = serde_json::value::to_raw_value(&(order.items * 250))?;
    ///         backend.reply(&to, Reply::Value(value)).await?;
    ///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    ///     }
    /// });
    /// let cents = producer
    ///     .enqueue_and_wait(&PriceOrder { items: 4 }, Duration::from_secs(5))
    ///     .await?;
    /// assert_eq!(cents, 1000);
    /// # worker.await?.map_err(|e| e.to_string())?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enqueue_and_wait<J: Job<Queues = Q>>(
        &self,
        job: &J,
        timeout: Duration,
    ) -> Result<J::Output, WaitError> {
        self.enqueue_and_wait_with(job, EnqueueOptions::default(), timeout)
            .await
    }

    /// Enqueues a job and watches it: the [`JobWatch`] yields the handler's
    /// [progress reports](crate::JobContext::progress), then its final
    /// outcome as [`enqueue_and_wait`](Producer::enqueue_and_wait) does,
    /// within `timeout` (enqueueing included).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use queuey_core::backend::{Backend, Replies, Reply};
    /// use queuey_core::control::Progress;
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::{Job, Producer, Queues};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues {
    ///     Exports,
    /// }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Exports, output = String)]
    /// struct Export {
    ///     rows: u64,
    /// }
    ///
    /// let backend = Arc::new(MemoryBackend::new());
    /// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    /// let mut watch = producer.enqueue_and_watch(&Export { rows: 10 }, Duration::from_secs(5)).await?;
    /// // A worker would run the handler; here its reports are sent by hand.
    /// let mut deliveries = backend.consume(&AppQueues::Exports.config()).await?;
    /// let delivery = deliveries.next().await.expect("a job")?;
    /// let to = delivery.envelope().reply_to.clone().expect("a watching caller");
    /// backend.reply(&to, Reply::Progress(Progress::new(50, "5 of 10 rows"))).await?;
    /// assert_eq!(watch.progress().await, Some(Progress::new(50, "5 of 10 rows")));
    /// delivery.ack().await?;
    /// let done = serde_json::value::to_raw_value("export.csv")?;
    /// backend.reply(&to, Reply::Value(done)).await?;
    /// assert_eq!(watch.progress().await, None, "the outcome is in");
    /// assert_eq!(watch.output().await?, "export.csv");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enqueue_and_watch<J: Job<Queues = Q>>(
        &self,
        job: &J,
        timeout: Duration,
    ) -> Result<JobWatch<J::Output>, WaitError> {
        self.enqueue_and_watch_with(job, EnqueueOptions::default(), timeout)
            .await
    }

    /// [`enqueue_and_wait`](Producer::enqueue_and_wait) with
    /// [`EnqueueOptions`], as for [`enqueue_with`](Producer::enqueue_with),
    /// except that a delay or a `run_at` is an [`Error::InvalidConfig`].
    pub async fn enqueue_and_wait_with<J: Job<Queues = Q>>(
        &self,
        job: &J,
        options: EnqueueOptions,
        timeout: Duration,
    ) -> Result<J::Output, WaitError> {
        self.enqueue_and_watch_with(job, options, timeout)
            .await?
            .output()
            .await
    }

    /// [`enqueue_and_watch`](Producer::enqueue_and_watch) with options, as
    /// for [`enqueue_and_wait_with`](Producer::enqueue_and_wait_with).
    pub async fn enqueue_and_watch_with<J: Job<Queues = Q>>(
        &self,
        job: &J,
        mut options: EnqueueOptions,
        timeout: Duration,
    ) -> Result<JobWatch<J::Output>, WaitError> {
        let unique = options.unique.take().or_else(|| job.unique());
        let (mut envelope, wait) = self.envelope_with(job, options)?;
        if wait.is_some() {
            return Err(Error::invalid_config(format!(
                "a `{}` job for queue `{}` was given a delay or a run_at time and a caller that \
                 waits for it; enqueue a delayed job without waiting for its result",
                J::NAME,
                envelope.queue
            ))
            .into());
        }
        let job_id = envelope.job_id;
        let timed_out = || WaitError::TimedOut {
            job_id,
            job_type: J::NAME,
            timeout,
        };
        let deadline = tokio::time::Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| tokio::time::Instant::now() + NO_TIMEOUT);
        let claim = match &unique {
            Some(unique) => Some(self.claim(&mut envelope, unique).await?),
            None => None,
        };
        let key = envelope.unique_key.clone();
        let pending = match tokio::time::timeout_at(deadline, self.backend.request(envelope)).await
        {
            Ok(Ok(pending)) => pending,
            Ok(Err(error)) => {
                self.give_back_if_unsent(claim, &error, key.as_deref(), job_id)
                    .await;
                return Err(error.into());
            }
            Err(_) => return Err(timed_out()),
        };
        Ok(JobWatch::new(pending, deadline, job_id, J::NAME, timeout))
    }
}
