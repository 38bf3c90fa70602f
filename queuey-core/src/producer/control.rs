//! Acting on jobs already enqueued: cancelling them, pausing and resuming
//! their queues.

use uuid::Uuid;

use super::Producer;
use crate::backend::Backend;
use crate::control::{CancelFilter, Command, ControlRecord};
use crate::{Error, Queues};

impl<Q: Queues, B: Backend> Producer<Q, B> {
    /// Cancels the job with this id wherever it waits (its queue, a hold, a
    /// retry on its way): it is not run again. The next worker to take it
    /// dead-letters it with the reason
    /// [`CANCELLED_REASON`](crate::control::CANCELLED_REASON), and a worker
    /// running it right now tells its handler through
    /// [`JobContext::cancel_signal`](crate::JobContext::cancel_signal).
    ///
    /// Cancelling a job that already finished, or an unknown id, changes
    /// nothing. Cancellations are remembered for
    /// [`CANCELLATION_MEMORY`](crate::control::CANCELLATION_MEMORY).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), queuey_core::Error> {
    /// use std::time::Duration;
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::{Job, Producer, Queues};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues { Emails }
    ///
    /// #[derive(Job, Serialize, Deserialize)]
    /// #[job(queue = AppQueues::Emails)]
    /// struct Newsletter { issue: u32 }
    ///
    /// let producer = Producer::<AppQueues, _>::new(MemoryBackend::new()).await?;
    /// let id = producer.enqueue_after(&Newsletter { issue: 7 }, Duration::from_secs(3600)).await?;
    /// producer.cancel(id).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(&self, job_id: Uuid) -> Result<(), Error> {
        self.send_control(Command::Cancel { job_id }).await
    }

    /// Cancels every job that matches `filter` and was enqueued before now,
    /// wherever it waits; jobs enqueued later are not touched. A filter
    /// without a queue applies to every queue of the fleet.
    ///
    /// Fails with [`Error::InvalidConfig`] for a filter with no condition.
    pub async fn cancel_matching(&self, filter: CancelFilter) -> Result<(), Error> {
        self.send_control(filter.into_command()?).await
    }

    /// Pauses `queue` on every worker: each stops taking its deliveries
    /// within a moment, lets its running jobs finish, hands back the ones it
    /// took but did not start, and keeps consuming its other queues. A
    /// worker started while the queue is paused stays off it.
    pub async fn pause(&self, queue: &Q) -> Result<(), Error> {
        let queue = self.queue_name(queue).to_owned();
        self.send_control(Command::Pause { queue }).await
    }

    /// Resumes a paused `queue` on every worker.
    pub async fn resume(&self, queue: &Q) -> Result<(), Error> {
        let queue = self.queue_name(queue).to_owned();
        self.send_control(Command::Resume { queue }).await
    }

    /// Sends any control command, as the `queuey` tool does.
    pub async fn send_control(&self, command: Command) -> Result<(), Error> {
        self.backend
            .send_control(&ControlRecord::new(command))
            .await
    }
}
