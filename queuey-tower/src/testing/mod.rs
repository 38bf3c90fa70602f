//! Testing handlers: run a worker on the memory backend until it has
//! nothing left to do, and read what happened to each job.
//!
//! [`run_until_idle`] (or a [`TestRun`] with a horizon or a number of jobs)
//! runs the worker through its queues, retries and deferrals, shuts it
//! down, and hands back a [`Report`] of each delivery settled, as a
//! [`Settlement`](queuey_core::memory::Settlement) naming the job and its
//! [`Disposition`](queuey_core::Disposition).
//!
//! On tokio's paused clock (`#[tokio::test(start_paused = true)]`, with
//! tokio's `test-util` feature) every wait is skipped: a retry ten minutes
//! out costs no real time.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use queuey_core::{handler_fn, Job, JobContext, JobError, Producer, Queues};
//! use queuey_core::memory::MemoryBackend;
//! use queuey_tower::Worker;
//! use queuey_tower::testing::{Ended, run_until_idle};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! # enum AppQueues { Emails }
//! # #[derive(Job, Serialize, Deserialize)]
//! # #[job(queue = AppQueues::Emails, name = "send_email")]
//! # struct SendEmail { to: String }
//!
//! let backend = Arc::new(MemoryBackend::new());
//! let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
//! producer.enqueue(&SendEmail { to: "ada@example.com".into() }).await?;
//! producer.enqueue(&SendEmail { to: "".into() }).await?;
//!
//! let worker = Worker::<AppQueues, _>::builder(backend)
//!     .handler(handler_fn(|job: SendEmail, _: JobContext| async move {
//!         match job.to.is_empty() {
//!             true => Err(JobError::fatal("no address")),
//!             false => Ok(()),
//!         }
//!     }))
//!     .build()
//!     .await?;
//! let report = run_until_idle(worker).await?;
//! assert_eq!(report.ended(), Ended::Idle);
//! assert_eq!(report.acknowledged().count(), 1);
//! assert_eq!(report.dead_lettered().count(), 1);
//! assert!(report.left().is_empty());
//! # Ok(())
//! # }
//! ```

mod error;
mod report;
mod run;
#[cfg(test)]
mod tests;

pub use error::TestRunError;
pub use report::{Ended, Left, Report};
pub use run::{DEFAULT_HORIZON, TestRun, run_until_idle};
