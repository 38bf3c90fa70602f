//! Periodic jobs: an ordinary job enqueued at every tick of a schedule,
//! once per tick across a fleet of processes.
//!
//! Give a [`Periodic`] to [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic),
//! or to a [`Scheduler`] in a process that only produces. Every process may
//! declare the same ones: per schedule, the backend's
//! [`Leadership`](queuey_core::periodic::Leadership) picks one process to
//! fire the ticks while the others stand by.
//!
//! At each tick the leader enqueues the job (id
//! [`tick_job_id`](queuey_core::periodic::tick_job_id) of name and tick),
//! waits for the broker to hold it, then records the tick. A new leader
//! applies the [`Missed`] policy to the ticks since the last one recorded.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::{Duration, UNIX_EPOCH};
//! use queuey_core::periodic::Schedule;
//! use queuey_core::{handler_fn, Job, JobContext, JobError, Queues};
//! use queuey_core::memory::MemoryBackend;
//! use queuey_tower::Worker;
//! use queuey_tower::periodic::{Clock, Missed, Periodic};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
//! enum AppQueues {
//!     Maintenance,
//! }
//!
//! #[derive(Job, Serialize, Deserialize)]
//! #[job(queue = AppQueues::Maintenance, name = "cleanup")]
//! struct Cleanup;
//!
//! let backend = Arc::new(MemoryBackend::new());
//! let worker = Worker::<AppQueues, _>::builder(backend.clone())
//!     .handler(handler_fn(|_: Cleanup, _: JobContext| async { Ok::<_, JobError>(()) }))
//!     .periodic(
//!         Periodic::new("cleanup", Schedule::every(Duration::from_secs(60))?, || Cleanup)
//!             .missed(Missed::FireOnce)
//!             // Tests on tokio's paused clock; leave it out in production.
//!             .clock(Clock::tokio_from(UNIX_EPOCH + Duration::from_secs(1_800_000_000))),
//!     )
//!     .build()
//!     .await?;
//! let handle = worker.handle();
//! let running = tokio::spawn(worker.run());
//! tokio::time::sleep(Duration::from_secs(60 * 5 + 1)).await;
//! assert_eq!(handle.jobs_finished(), 5);
//! handle.shutdown();
//! running.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Metrics
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `queuey_periodic_ticks_total` | counter | `schedule` | ticks whose job was enqueued |
//! | `queuey_periodic_ticks_skipped_total` | counter | `schedule` | missed ticks not fired, by the [`Missed`] policy |
//! | `queuey_periodic_ticks_duplicate_total` | counter | `schedule` | ticks whose job was not enqueued because a unique job of the same key was waiting |
//! | `queuey_periodic_lag_seconds` | histogram | `schedule` | from a tick's instant to its job held by the broker |
//! | `queuey_periodic_leader` | gauge | `schedule` | 1 while this process leads the schedule |

mod clock;
mod missed;
#[allow(clippy::module_inception)]
mod periodic;
mod rfc3339;
pub(crate) mod run;
mod scheduler;

pub use clock::Clock;
pub use missed::Missed;
pub use periodic::{DEFAULT_GRACE, Periodic};
pub(crate) use periodic::{Entry, check_unique};
pub use scheduler::{Scheduler, SchedulerHandle};

/// Counter of ticks whose job was enqueued.
pub const TICKS_TOTAL: &str = "queuey_periodic_ticks_total";
/// Counter of missed ticks not fired.
pub const TICKS_SKIPPED_TOTAL: &str = "queuey_periodic_ticks_skipped_total";
/// Counter of ticks whose job was a duplicate of a unique job still
/// waiting (see [`Unique`](queuey_core::Unique)).
pub const TICKS_DUPLICATE_TOTAL: &str = "queuey_periodic_ticks_duplicate_total";
/// Histogram of the time from a tick to its job held by the broker, in
/// seconds.
pub const LAG_SECONDS: &str = "queuey_periodic_lag_seconds";
/// Gauge: 1 while this process leads the schedule.
pub const LEADER: &str = "queuey_periodic_leader";
