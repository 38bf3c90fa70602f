//! Acting on jobs already enqueued: cancelling them, pausing and resuming
//! their queues.

use uuid::Uuid;

use super::Producer;

use crate::backend::ControlChannel;
use crate::control::{CancelFilter, Command, ControlRecord};
use crate::{Error, Queues};

impl<Q: Queues, B: ControlChannel> Producer<Q, B> {
    /// Cancels the job with this id wherever it waits (its queue, a hold, a
    /// retry on its way): the next worker to take it dead-letters it as
    /// [`CANCELLED_REASON`](crate::control::CANCELLED_REASON); one running it
    /// tells its handler ([`JobContext::cancel_signal`](crate::JobContext::cancel_signal)).
    /// A finished job or an unknown id changes nothing; cancellations are
    /// remembered for [`CANCELLATION_MEMORY`](crate::control::CANCELLATION_MEMORY).
    /// Returns the command's id, for [`revoke`](Self::revoke).
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
    pub async fn cancel(&self, job_id: Uuid) -> Result<Uuid, Error> {
        self.send_control(Command::Cancel { job_id }).await
    }

    /// Cancels every job matching `filter` enqueued before now, wherever it
    /// waits (every queue, for a filter without one). Returns the command's
    /// id, for [`revoke`](Self::revoke); a filter with no condition is an
    /// [`Error::InvalidConfig`].
    pub async fn cancel_matching(&self, filter: CancelFilter) -> Result<Uuid, Error> {
        self.send_control(filter.into_command()?).await
    }

    /// Withdraws a cancellation sent earlier, named by the id
    /// [`cancel`](Self::cancel) or [`cancel_matching`](Self::cancel_matching)
    /// returned: the jobs it covered run again when next taken (jobs it
    /// already sent to the dead-letter queue stay there until redriven).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), queuey_core::Error> {
    /// use queuey_core::backend::ControlChannel;
    /// use queuey_core::memory::MemoryBackend;
    /// use queuey_core::{Producer, Queues, Uuid};
    ///
    /// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    /// enum AppQueues { Emails }
    ///
    /// let backend = MemoryBackend::new();
    /// let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    /// let job = Uuid::new_v4();
    /// let sent = producer.cancel(job).await?;
    /// producer.revoke(sent).await?;
    /// let view = backend.follow_control().await?;
    /// assert_eq!(view.snapshot().cancellations(), (0, 0));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn revoke(&self, record: Uuid) -> Result<(), Error> {
        self.send_control(Command::Revoke { record })
            .await
            .map(|_| ())
    }

    /// Pauses `queue` on every worker (and any started meanwhile): running
    /// jobs finish, those taken but not started go back, other queues flow.
    pub async fn pause(&self, queue: &Q) -> Result<(), Error> {
        let queue = self.queue_name(queue).to_owned();
        self.send_control(Command::Pause { queue })
            .await
            .map(|_| ())
    }

    /// Resumes a paused `queue` on every worker.
    pub async fn resume(&self, queue: &Q) -> Result<(), Error> {
        let queue = self.queue_name(queue).to_owned();
        self.send_control(Command::Resume { queue })
            .await
            .map(|_| ())
    }

    /// Sends any control command, as the `queuey` tool does, and returns the
    /// record's id. It is checked first ([`ControlRecord::check`]): a cancel
    /// filter with no condition or time bound is an [`Error::InvalidConfig`].
    pub async fn send_control(&self, command: Command) -> Result<Uuid, Error> {
        let record = ControlRecord::new(command);
        self.backend.send_control(&record).await?;
        Ok(record.id)
    }
}
