//! The backend's link to RabbitMQ: the current connection, and the task that
//! replaces it when it dies.
//!
//! A [`Link`] outlives its connections. A supervisor task (`supervisor`)
//! watches the current one (its events, its status, and reports from calls
//! that saw it fail); when it dies, the task connects again, trying each
//! address in turn with backoff and full jitter between rounds (`backoff`),
//! and replays every queue declared through the backend (`declared`) before
//! anyone may use the new connection. Callers ask for [`Link::connection`],
//! which waits for a reconnection up to their own bound. The first
//! connection waits too, for a broker that cannot be reached yet (`first`);
//! opening one connection is `dial`.
//!
//! Some failures cannot heal: credentials or a virtual host the broker
//! refuses, a declared queue it now refuses (`PRECONDITION_FAILED`), or a
//! reconnection deadline that passed. The link then fails for good and
//! every caller gets that error.

mod backoff;
#[cfg(feature = "fleet")]
pub(crate) use backoff::{jitter, random_below};
mod declared;
pub(crate) mod dial;
mod first;
mod supervisor;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lapin::Connection;
use lapin::types::ShortString;
use queuey_core::backend::ConnectionState;
use queuey_core::{BackendErrorKind, Error};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::RabbitMqOptions;
use crate::bound;
use crate::error::{Failure, backend};
use declared::Declared;
use dial::Address;

/// Metric names the link reports (through the `metrics` crate).
pub(crate) mod metric {
    /// Gauge: 1 while the backend has a working connection, else 0.
    pub(crate) const CONNECTED: &str = "queuey_rabbitmq_connected";
    /// Counter: connections replaced after the previous one died.
    pub(crate) const RECONNECTS: &str = "queuey_rabbitmq_reconnects_total";
    /// Counter: seconds spent without a working connection.
    pub(crate) const DISCONNECTED_SECONDS: &str = "queuey_rabbitmq_disconnected_seconds_total";
}

/// A connection in use, and which one it is: every replacement gets the
/// next generation, so a caller that saw a connection fail can report it
/// without taking down its successor.
#[derive(Clone)]
pub(crate) struct Current {
    pub(crate) connection: Arc<Connection>,
    pub(crate) generation: u64,
}

/// Where the link stands.
#[derive(Clone)]
pub(crate) enum LinkState {
    Up(Current),
    /// Connecting again since the instant it holds.
    Down(Instant),
    /// Given up for good, with the reason.
    Failed(Arc<str>),
    Closed,
}

impl LinkState {
    fn public(&self) -> ConnectionState {
        match self {
            LinkState::Up(_) => ConnectionState::Connected,
            LinkState::Down(_) => ConnectionState::Reconnecting,
            LinkState::Failed(_) => ConnectionState::Failed,
            LinkState::Closed => ConnectionState::Closed,
        }
    }
}

/// What a link carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// The job path: publishes, consumers, settles. Its state is what the
    /// connection metrics report.
    Jobs,
    /// The fleet plane's stream reads (`fleet::link`), kept apart so that
    /// a broker that closes their connection never takes the job path's
    /// down with it. Logged, not counted in the connection metrics.
    #[cfg(feature = "fleet")]
    Fleet,
}

/// The backend's link to RabbitMQ: the connection of the moment, replaced
/// by the supervisor when it dies.
pub(crate) struct Link {
    purpose: Purpose,
    addresses: Vec<Address>,
    options: Arc<RabbitMqOptions>,
    state: watch::Sender<LinkState>,
    /// Wakes the supervisor: a call saw the connection of this generation fail.
    suspect: Arc<Notify>,
    /// Queues declared through the backend, replayed on every new connection.
    pub(crate) declared: Declared,
    closed: AtomicBool,
    /// The highest generation handed out.
    generations: AtomicU64,
    /// Milliseconds spent without a connection so far (reconnecting, and
    /// waiting for the first connection); the seconds counter is fed from
    /// it, so short outages add up instead of each rounding to 0 s.
    down_ms: AtomicU64,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

impl Link {
    /// Connects to the first address that answers, for `purpose`, then
    /// starts the supervisor; a broker that cannot be reached yet is waited
    /// for, up to the connect wait (see `first`).
    pub(crate) async fn connect(
        uris: &[String],
        options: Arc<RabbitMqOptions>,
        purpose: Purpose,
    ) -> Result<Arc<Link>, Error> {
        if uris.is_empty() {
            return Err(Error::invalid_config(
                "no broker address given: pass at least one amqp:// URI",
            ));
        }
        let addresses = uris
            .iter()
            .map(|raw| dial::parse(raw, &options))
            .collect::<Result<Vec<_>, _>>()?;
        dial::check_tls(&addresses, &options.tls)?;
        let counts = purpose == Purpose::Jobs;
        if counts {
            metrics::gauge!(metric::CONNECTED).set(0.0);
        }
        let first::First {
            address: index,
            connection,
            waited,
        } = first::connect(&addresses, &options).await?;
        tracing::debug!(uri = %addresses[index].redacted, ?purpose, "connected to RabbitMQ");
        // The wait counts as time without a connection, as a reconnection's
        // does (it is no reconnection, so the reconnect counter stays).
        let down_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        if counts {
            metrics::gauge!(metric::CONNECTED).set(1.0);
            metrics::counter!(metric::DISCONNECTED_SECONDS)
                .increment(supervisor::seconds_crossed(0, down_ms));
        }
        let current = Current {
            connection: Arc::new(connection),
            generation: 1,
        };
        let link = Arc::new(Link {
            purpose,
            addresses,
            options,
            state: watch::Sender::new(LinkState::Up(current)),
            suspect: Arc::new(Notify::new()),
            declared: Declared::default(),
            closed: AtomicBool::new(false),
            generations: AtomicU64::new(1),
            down_ms: AtomicU64::new(down_ms),
            supervisor: Mutex::new(None),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let task = runtime.spawn(supervisor::supervise(Arc::downgrade(&link), index));
            *link
                .supervisor
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(task);
        }
        Ok(link)
    }

    /// The connection to use, waiting for a reconnection until `deadline`.
    /// `what` names the operation, for the error.
    pub(crate) async fn connection_until(
        &self,
        deadline: Instant,
        what: &str,
    ) -> Result<Current, Error> {
        let mut state = self.state.subscribe();
        let up = state.wait_for(|s| !matches!(s, LinkState::Down(_)));
        let waited = tokio::time::timeout_at(deadline, up).await;
        match waited {
            Ok(Ok(state)) => match &*state {
                LinkState::Up(current) => Ok(current.clone()),
                LinkState::Failed(reason) => Err(failed(what, reason)),
                LinkState::Closed | LinkState::Down(_) => Err(Error::ShutDown),
            },
            Ok(Err(_)) => Err(Error::ShutDown),
            Err(_) => {
                let since = match &*self.state.borrow() {
                    LinkState::Down(since) => since.elapsed(),
                    _ => Duration::ZERO,
                };
                let text = format!(
                    "{what}: RabbitMQ has been unreachable for {:.1} s and the backend is still \
                     reconnecting; gave up waiting",
                    since.as_secs_f64()
                );
                Err(backend(BackendErrorKind::TimedOut, text))
            }
        }
    }

    /// The connection to use, waiting for a reconnection up to the call
    /// bound.
    pub(crate) async fn connection(&self, what: &str) -> Result<Current, Error> {
        self.connection_until(Instant::now() + self.options.call_timeout, what)
            .await
    }

    /// Runs `call` on the connection to use, within the call bound; a
    /// failure that shows the connection lost is reported to the
    /// supervisor. `what` names the operation, for the errors.
    pub(crate) async fn call<T, F, Fut>(&self, what: &str, call: F) -> Result<T, Error>
    where
        F: FnOnce(Current) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let current = self.connection(what).await?;
        let generation = current.generation;
        let result = bound::within(self.options.call_timeout, what, call(current)).await;
        if let Err(error) = &result {
            self.saw(generation, error);
        }
        result
    }

    /// The connection in use now, without waiting: `None` while
    /// reconnecting.
    pub(crate) fn current(&self) -> Option<Current> {
        match &*self.state.borrow() {
            LinkState::Up(current) => Some(current.clone()),
            _ => None,
        }
    }

    /// Resolves once the connection of `generation` is no longer the one in
    /// use: it died, or the link closed or was dropped. Holds no reference
    /// to the link.
    pub(crate) fn gone(&self, generation: u64) -> impl Future<Output = ()> + Send + 'static {
        let mut state = self.state.subscribe();
        async move {
            let _ = state
                .wait_for(|s| !matches!(s, LinkState::Up(c) if c.generation == generation))
                .await;
        }
    }

    /// A call saw the connection of `generation` fail: have the supervisor
    /// check it now rather than at its next look.
    pub(crate) fn suspect(&self, generation: u64) {
        if self.current().is_some_and(|c| c.generation == generation) {
            self.suspect.notify_one();
        }
    }

    /// A call on the connection of `generation` failed with `error`: if the
    /// error shows the connection lost, have the supervisor check it now.
    pub(crate) fn saw(&self, generation: u64, error: &Error) {
        if error.is_connection_lost() {
            self.suspect(generation);
        }
    }

    /// Where the link stands, as the `Backend` trait reports it.
    pub(crate) fn state(&self) -> ConnectionState {
        self.state.borrow().public()
    }

    /// Resolves with the link's state once it is no longer `seen`.
    pub(crate) async fn changed(&self, seen: ConnectionState) -> ConnectionState {
        let mut state = self.state.subscribe();
        match state.wait_for(|s| s.public() != seen).await {
            Ok(now) => now.public(),
            Err(_) => ConnectionState::Closed,
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Fails with [`Error::ShutDown`] once the link is closed.
    pub(crate) fn ensure_open(&self) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::ShutDown);
        }
        Ok(())
    }

    /// Stops reconnecting and closes the connection, within the call bound
    /// whatever state its channels are in. Closing twice is a no-op.
    pub(crate) async fn close(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let previous = self.state.send_replace(LinkState::Closed);
        self.stop_supervisor();
        if self.counts() {
            metrics::gauge!(metric::CONNECTED).set(0.0);
        }
        let LinkState::Up(current) = previous else {
            return Ok(());
        };
        let connection = current.connection;
        if !connection.status().connected() {
            return Ok(());
        }
        let closing = connection.close(200, ShortString::default());
        match tokio::time::timeout(self.options.call_timeout, closing).await {
            Ok(Ok(())) => Ok(()),
            // Closing the connection closes its channels; one that was
            // closing already (a consumer's, just dropped) makes lapin report
            // an error although the connection goes away all the same.
            Ok(Err(e)) if !connection.status().connected() => {
                tracing::debug!(error = %e, "closing the connection raced a channel closing; it is closed");
                Ok(())
            }
            Ok(Err(e)) => Err(Failure::of(&e, false).into_error("closing the connection")),
            Err(_) => {
                tracing::warn!(
                    timeout = ?self.options.call_timeout,
                    "RabbitMQ did not confirm closing the connection in time; it is abandoned"
                );
                Ok(())
            }
        }
    }

    fn stop_supervisor(&self) {
        let mut supervisor = self
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = supervisor.take() {
            task.abort();
        }
    }

    /// Whether this link's state is what the connection metrics report.
    pub(crate) fn counts(&self) -> bool {
        self.purpose == Purpose::Jobs
    }

    /// The redacted form of the first address, for `Debug`.
    pub(crate) fn redacted_uri(&self) -> &str {
        self.addresses
            .first()
            .map(|a| a.redacted.as_str())
            .unwrap_or("")
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop_supervisor();
    }
}

fn failed(what: &str, reason: &str) -> Error {
    let text = format!("{what}: the backend gave up on RabbitMQ: {reason}");
    backend(BackendErrorKind::Refused, text)
}
