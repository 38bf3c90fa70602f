//! Operator tools for queuey, as a library: the operations behind the
//! `queuey` command-line tool and its web dashboard, callable from any
//! program.
//!
//! | module | what it does |
//! |---|---|
//! | [`dead`] | list, group, show, redrive, purge (with an export) and import dead letters |
//! | [`holds`] | the census of a queue's hold queues |
//! | [`topology`] | compare the broker with a queue set; declare what is missing |
//! | [`mgmt`] | the RabbitMQ management API client |
//! | [`doctor`] | connectivity, broker version, plugins, alarms |
//! | [`web`] | the dashboard: server-rendered pages over the same operations |
//! | [`browse`] | reading a queue without losing a message or its order |
//!
//! Mutating operations come in two halves, a plan that changes nothing and
//! the action, so that every front end can preview first.
//!
//! ```no_run
//! use queuey_ops::{Amqp, dead};
//!
//! # async fn run() -> queuey_ops::Result<()> {
//! let amqp = Amqp::connect("amqp://guest:guest@127.0.0.1:5672/%2f", "ops-example").await?;
//! let letters = dead::read(&amqp, "emails.dead", None).await?;
//! for group in dead::stats(&letters).by_fingerprint {
//!     println!("{:>5}  {}", group.count, group.fingerprint);
//! }
//! # Ok(()) }
//! ```

pub mod amqp;
pub mod browse;
pub mod dead;
pub mod doctor;
mod error;
pub mod headers;
pub mod holds;
pub mod mgmt;
pub mod time;
pub mod tls;
pub mod topology;
pub mod web;

pub use amqp::{Amqp, QueueCounts, redact_url};
pub use error::{OpsError, Result};
pub use tls::TlsFiles;

/// The default dead-letter suffix (`q` → `q.dead`).
pub const DEFAULT_DEAD_SUFFIX: &str = ".dead";
/// The default hold-queue suffix (`q` → `q.deferred.{ttl_ms}`).
pub const DEFAULT_DEFERRED_SUFFIX: &str = ".deferred";
/// The default suspect-queue suffix of the poison guard (`q` → `q.suspect`).
pub const DEFAULT_SUSPECT_SUFFIX: &str = ".suspect";

/// The dead-letter queue of `queue`: `queue` itself when it already ends in
/// `dead_suffix`, else `{queue}{dead_suffix}`.
pub fn dead_queue_of(queue: &str, dead_suffix: &str) -> String {
    if !dead_suffix.is_empty() && queue.ends_with(dead_suffix) {
        queue.to_owned()
    } else {
        queuey_rabbitmq::topology::dead_letter_queue_name(queue, dead_suffix)
    }
}
