//! The hold watchdog: a task per backend that notices a quorum hold that
//! stopped releasing its jobs.
//!
//! The rule first: a quorum hold of a queue declared through this backend
//! is reported as stalled once it has held jobs past their delay, without
//! releasing any, for the stall window (`stall`). Jobs past their delay in
//! a quorum hold are counted by the management API as `messages` but
//! neither ready nor unacknowledged; AMQP cannot see them at all (a passive
//! declare counts only the jobs still waiting for their delay), so the
//! watchdog reads the API (`api`), at the address and with the credentials
//! worked out by `endpoint`, one listing of the virtual host's queues per
//! interval (`poll`).
//!
//! A stalled hold gets one WARN line naming it, its work queue, the jobs
//! stuck and the remedy, the gauge `queuey_hold_stalled{queue,hold}` at 1,
//! and a place in [`RabbitMqBackend::stalled_holds`](crate::RabbitMqBackend::stalled_holds)
//! (`stalled`); when it releases again, an INFO line and the gauge at 0.
//!
//! The same API counts a hold's jobs for the backend's pruner (`census`):
//! see [Pruning hold queues](crate#pruning-hold-queues).
//!
//! Without the `hold-watch` feature only the empty set remains.

#[cfg(feature = "hold-watch")]
mod api;
#[cfg(feature = "hold-watch")]
mod census;
#[cfg(feature = "hold-watch")]
mod endpoint;
#[cfg(feature = "hold-watch")]
mod poll;
#[cfg(feature = "hold-watch")]
mod stall;
mod stalled;

use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;

use crate::RabbitMqOptions;
use stalled::Stalled;
pub use stalled::StalledHold;

/// Metric names the watchdog reports (through the `metrics` crate).
pub(crate) mod metric {
    /// Gauge, labels `queue` and `hold`: 1 while the hold is stalled, 0
    /// once it releases again.
    pub(crate) const HOLD_STALLED: &str = "queuey_hold_stalled";
}

/// What an operator does about a stalled hold, for the WARN line.
#[cfg(feature = "hold-watch")]
const REMEDY: &str = "the hold's Raft member is restarted on its leader node (`rabbitmqctl -n \
     LEADER eval` with `ra:stop_server(quorum_queues, ServerId)` then \
     `ra:restart_server(quorum_queues, ServerId)`) or its leader is moved to another node; \
     RabbitMQ 3.10.20, 3.11.12 and later fix the cause. `queuey holds` shows the stuck jobs \
     under RELEASING and `queuey doctor` checks the broker's version";

/// Whether a work queue was declared through the backend.
pub(crate) type Declared = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The backend's watchdog: the set of stalled holds, and the task that
/// keeps it, stopped when the backend closes or is dropped.
pub(crate) struct HoldWatch {
    stalled: Arc<Stalled>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl HoldWatch {
    /// Starts watching the quorum holds of the queues `declared` accepts,
    /// through the management API of `amqp` (the first broker address),
    /// when the options and the build allow; else a watch that reports
    /// nothing. Never fails and never waits.
    pub(crate) fn start(amqp: Option<&str>, options: &RabbitMqOptions, declared: Declared) -> Self {
        let stalled = Arc::new(Stalled::default());
        let task = if options.settings().hold_watch() {
            spawn(amqp, options, declared, Arc::clone(&stalled))
        } else {
            None
        };
        HoldWatch {
            stalled,
            task: Mutex::new(task),
        }
    }

    /// The holds found stalled, by name.
    pub(crate) fn stalled(&self) -> Vec<StalledHold> {
        self.stalled.list()
    }

    /// Stops the task and lowers the gauges it raised. Stopping twice is a
    /// no-op.
    pub(crate) fn stop(&self) {
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
        self.stalled.clear_all();
    }
}

impl Drop for HoldWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The management API of `amqp` (the first broker address) as a hold
/// census for the backend's pruner, when the build has an HTTP client and
/// the address leads to an API.
#[cfg(feature = "hold-watch")]
pub(crate) fn census(
    amqp: Option<&str>,
    options: &RabbitMqOptions,
) -> Option<Arc<dyn crate::census::HoldCensus>> {
    let endpoint = endpoint::Endpoint::new(amqp?, options.settings().management_url())
        .inspect_err(|why| tracing::debug!("holds are not counted for pruning: {why}"))
        .ok()?;
    if endpoint.base.starts_with("https:") && !cfg!(feature = "rustls") {
        return None;
    }
    Some(Arc::new(census::ApiCensus::new(endpoint)))
}

/// Without the `hold-watch` feature: no census.
#[cfg(not(feature = "hold-watch"))]
pub(crate) fn census(
    _amqp: Option<&str>,
    _options: &RabbitMqOptions,
) -> Option<Arc<dyn crate::census::HoldCensus>> {
    None
}

/// The watchdog's task, or `None` (logged once) when it cannot run.
#[cfg(feature = "hold-watch")]
fn spawn(
    amqp: Option<&str>,
    options: &RabbitMqOptions,
    declared: Declared,
    stalled: Arc<Stalled>,
) -> Option<JoinHandle<()>> {
    use std::collections::HashMap;
    use std::time::Duration;

    let settings = options.settings();
    let not_watched = |why: &str| {
        tracing::info!("quorum holds are not watched for stalls: {why}");
    };
    let endpoint = match endpoint::Endpoint::new(amqp?, settings.management_url()) {
        Ok(endpoint) => endpoint,
        // A refused plain-http URL is a setting to fix, not a build or
        // broker that has no API.
        Err(why @ endpoint::EndpointError::PlainHttp { .. }) => {
            tracing::warn!("quorum holds are not watched for stalls: {why}");
            return None;
        }
        Err(why) => {
            not_watched(&why.to_string());
            return None;
        }
    };
    if endpoint.base.starts_with("https:") && !cfg!(feature = "rustls") {
        not_watched(&format!(
            "the management API at {} is https, and this build reads it over https only \
             with the `rustls` feature",
            endpoint.base
        ));
        return None;
    }
    let interval = settings.hold_watch_interval();
    let timeout = interval.clamp(Duration::from_secs(1), Duration::from_secs(10));
    let holds = poll::Holds {
        rule: stall::Rule {
            stall_after: settings.hold_stall_after(),
            // Two reads missed in a row are a gap.
            max_gap: interval.saturating_mul(3),
        },
        deferred_suffix: settings.deferred_suffix().to_owned(),
        declared,
        stalled,
        tracks: HashMap::new(),
    };
    // The HTTP client is built in the task: loading the platform's roots
    // takes a moment that the backend's start need not wait for.
    Some(tokio::spawn(async move {
        match api::Api::new(endpoint, timeout) {
            Ok(api) => poll::run(api, holds, interval).await,
            Err(why) => tracing::info!("quorum holds are not watched for stalls: {why}"),
        }
    }))
}

/// Without the `hold-watch` feature: nothing to run.
#[cfg(not(feature = "hold-watch"))]
fn spawn(
    _amqp: Option<&str>,
    _options: &RabbitMqOptions,
    _declared: Declared,
    _stalled: Arc<Stalled>,
) -> Option<JoinHandle<()>> {
    tracing::debug!("quorum holds are not watched: built without the `hold-watch` feature");
    None
}
