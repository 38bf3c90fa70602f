//! Acting on a running fleet (cancelling jobs, pausing and resuming
//! queues) and seeing it (each worker's [`Heartbeat`]).
//!
//! An operator ([`Producer::cancel`](crate::Producer::cancel) and its
//! siblings, the `queuey` tool, the dashboard) sends a [`Command`]; the
//! backend carries it to every worker, and keeps it for workers started
//! later ([`ControlChannel::send_control`]). Each worker follows the
//! commands in a [`ControlView`] ([`ControlChannel::follow_control`]):
//!
//! - a **cancelled** job is not run again: whichever worker takes it next
//!   (from the queue, a hold, anywhere) dead-letters it with the reason
//!   [`CANCELLED_REASON`], so it can still be read and redriven. A job
//!   running then is told through its [`JobContext`](crate::JobContext)'s
//!   [`CancelSignal`], never killed;
//! - a **paused** queue is not consumed: running jobs finish, deliveries
//!   taken but not started go back to the broker, and a worker started
//!   meanwhile stays off it until it is resumed.
//!
//! Every worker also sends a [`Heartbeat`] every few seconds
//! ([`Heartbeats::heartbeat`]): host, process, queues, connection, running
//! jobs, totals per queue. [`Heartbeats::workers`] lists the recent ones; a
//! silent worker drops off after [`MISSED_HEARTBEATS`] intervals.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), queuey_core::Error> {
//! use queuey_core::backend::ControlChannel;
//! use queuey_core::control::{Command, ControlRecord};
//! use queuey_core::memory::MemoryBackend;
//!
//! let backend = MemoryBackend::new();
//! let view = backend.follow_control().await?;
//! backend
//!     .send_control(&ControlRecord::new(Command::Pause { queue: "app.emails".into() }))
//!     .await?;
//! assert!(view.is_paused("app.emails"));
//! # Ok(())
//! # }
//! ```
//!
//! [`ControlChannel::send_control`]: crate::backend::ControlChannel::send_control
//! [`ControlChannel::follow_control`]: crate::backend::ControlChannel::follow_control
//! [`Heartbeats::heartbeat`]: crate::backend::Heartbeats::heartbeat
//! [`Heartbeats::workers`]: crate::backend::Heartbeats::workers

mod check;
mod command;
mod heartbeat;
mod progress;
mod refusal;
mod signal;
mod state;
mod view;

use std::time::Duration;

pub use check::{check_size, is_ahead};
pub use command::{CancelFilter, Command, ControlRecord, PayloadMatch};
pub use heartbeat::{
    DEFAULT_HEARTBEAT_INTERVAL, Heartbeat, LimitSeen, MAX_HEARTBEAT_BYTES, MAX_LIMITS_LISTED,
    MAX_RUNNING_LISTED, MAX_WORKERS_LISTED, MISSED_HEARTBEATS, QueueTotals, RunningJob,
};
pub use progress::{MAX_PROGRESS_MESSAGE_BYTES, Progress, ProgressReporter, ProgressUpdates};
pub use refusal::{CLOCK_SKEW, MAX_PAYLOAD_CONDITIONS, MAX_RECORD_BYTES, RecordRefusal};
pub use signal::{CancelSignal, Canceller};
pub use state::{CancelTarget, Cancellation, ControlState, MAX_CANCEL_FILTERS};
pub use view::ControlView;

/// The dead-letter reason of a cancelled job.
pub const CANCELLED_REASON: &str = "cancelled";

/// How long a cancellation is remembered: longer than the longest wait in a
/// hold ([`LONGEST_WAIT`](crate::LONGEST_WAIT)), so a job cancelled while
/// it waits is still cancelled when it comes back. Pauses are remembered
/// until resumed.
pub const CANCELLATION_MEMORY: Duration = Duration::from_secs(30 * 24 * 3600);
