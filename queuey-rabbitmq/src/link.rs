//! The backend's link to RabbitMQ: the current connection, and the task that
//! replaces it when it dies.
//!
//! A [`Link`] outlives its connections. A supervisor task watches the
//! current one (its error events, its status, and reports from calls that
//! saw it fail); when it dies, the task connects again — trying each broker
//! address in turn, with exponential backoff and full jitter between rounds
//! — and replays every queue declared through the backend before anyone may
//! use the new connection. Callers ask for [`Link::connection`], which waits
//! for a reconnection up to their own bound.
//!
//! Some failures cannot heal by trying again: credentials or a virtual host
//! the broker refuses, a declared queue the broker now refuses
//! (`PRECONDITION_FAILED`), or a reconnection deadline that passed. The link
//! then fails for good and every caller gets that error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt;
use lapin::types::ShortString;
use lapin::{Connection, Event};
use queuey_core::{BackendError, BackendErrorKind, ConnectionState, Error, QueueConfig};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::dial::{self, Address, dial};
use crate::error::Failure;
use crate::{RabbitMqOptions, declare};

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
    /// Connecting again since `since`.
    Down {
        since: Instant,
    },
    /// Given up for good, with the reason.
    Failed(Arc<str>),
    Closed,
}

impl LinkState {
    fn public(&self) -> ConnectionState {
        match self {
            LinkState::Up(_) => ConnectionState::Connected,
            LinkState::Down { .. } => ConnectionState::Reconnecting,
            LinkState::Failed(_) => ConnectionState::Failed,
            LinkState::Closed => ConnectionState::Closed,
        }
    }
}

pub(crate) struct Link {
    addresses: Vec<Address>,
    options: RabbitMqOptions,
    state: watch::Sender<LinkState>,
    /// Wakes the supervisor: a call saw the connection of this generation fail.
    suspect: Arc<Notify>,
    /// Queues declared through the backend, replayed on every new connection.
    declared: RwLock<HashMap<String, Arc<QueueConfig>>>,
    closed: AtomicBool,
    /// The highest generation handed out.
    generations: AtomicU64,
    /// Milliseconds spent reconnecting so far; the seconds counter is fed
    /// from it, so short outages add up instead of each rounding to 0 s.
    down_ms: AtomicU64,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

impl Link {
    /// Connects to the first address that answers, then starts the
    /// supervisor. The first connection is not retried: a wrong address or
    /// password fails here, at once.
    pub(crate) async fn connect(
        uris: &[String],
        options: RabbitMqOptions,
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
        let mut last_error = None;
        let mut first = None;
        for (index, address) in addresses.iter().enumerate() {
            match dial(address, &options).await {
                Ok(connection) => {
                    first = Some((index, connection));
                    break;
                }
                Err(failure) => {
                    let fatal = failure.fatal;
                    last_error = Some(failure.error);
                    if fatal {
                        break;
                    }
                }
            }
        }
        let Some((index, connection)) = first else {
            return Err(last_error.unwrap_or(Error::ShutDown));
        };
        tracing::debug!(uri = %addresses[index].redacted, "connected to RabbitMQ");
        metrics::gauge!(metric::CONNECTED).set(1.0);
        let current = Current {
            connection: Arc::new(connection),
            generation: 1,
        };
        let link = Arc::new(Link {
            addresses,
            options,
            state: watch::Sender::new(LinkState::Up(current)),
            suspect: Arc::new(Notify::new()),
            declared: RwLock::new(HashMap::new()),
            closed: AtomicBool::new(false),
            generations: AtomicU64::new(1),
            down_ms: AtomicU64::new(0),
            supervisor: Mutex::new(None),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let task = runtime.spawn(supervise(Arc::downgrade(&link), index));
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
        let waited = tokio::time::timeout_at(
            deadline,
            state.wait_for(|s| !matches!(s, LinkState::Down { .. })),
        )
        .await;
        match waited {
            Ok(Ok(state)) => match &*state {
                LinkState::Up(current) => Ok(current.clone()),
                LinkState::Failed(reason) => Err(failed(what, reason)),
                LinkState::Closed | LinkState::Down { .. } => Err(Error::ShutDown),
            },
            Ok(Err(_)) => Err(Error::ShutDown),
            Err(_) => {
                let since = match &*self.state.borrow() {
                    LinkState::Down { since } => since.elapsed(),
                    _ => Duration::ZERO,
                };
                Err(Error::Backend(BackendError::new(
                    BackendErrorKind::TimedOut,
                    format!(
                        "{what}: RabbitMQ has been unreachable for {:.1} s and the backend is still \
                         reconnecting; gave up waiting",
                        since.as_secs_f64()
                    ),
                )))
            }
        }
    }

    /// The connection to use, waiting for a reconnection up to the call
    /// bound.
    pub(crate) async fn connection(&self, what: &str) -> Result<Current, Error> {
        self.connection_until(Instant::now() + self.options.call_timeout, what)
            .await
    }

    /// The connection in use now, without waiting: `None` while
    /// reconnecting.
    pub(crate) fn current(&self) -> Option<Current> {
        match &*self.state.borrow() {
            LinkState::Up(current) => Some(current.clone()),
            _ => None,
        }
    }

    /// A call saw the connection of `generation` fail: have the supervisor
    /// check it now rather than at its next look.
    pub(crate) fn suspect(&self, generation: u64) {
        if self.current().is_some_and(|c| c.generation == generation) {
            self.suspect.notify_one();
        }
    }

    /// Where the link stands, as the `Backend` trait reports it.
    pub(crate) fn state(&self) -> ConnectionState {
        self.state.borrow().public()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The configuration of a queue declared through this backend.
    pub(crate) fn declared(&self, queue: &str) -> Option<Arc<QueueConfig>> {
        self.declared
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(queue)
            .cloned()
    }

    /// How many queues were declared through this backend.
    pub(crate) fn declared_count(&self) -> usize {
        self.declared
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Remembers a declared queue, to replay on every new connection.
    pub(crate) fn remember(&self, config: &QueueConfig) {
        self.declared
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(config.name().to_owned(), Arc::new(config.clone()));
    }

    fn declared_configs(&self) -> Vec<QueueConfig> {
        self.declared
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|c| QueueConfig::clone(c))
            .collect()
    }

    /// Stops reconnecting and closes the connection, within the call bound
    /// whatever state its channels are in. Closing twice is a no-op.
    pub(crate) async fn close(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let previous = self.state.send_replace(LinkState::Closed);
        if let Some(task) = self
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
        metrics::gauge!(metric::CONNECTED).set(0.0);
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
        if let Some(task) = self
            .supervisor
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

fn failed(what: &str, reason: &str) -> Error {
    Error::Backend(BackendError::new(
        BackendErrorKind::Refused,
        format!("{what}: the backend gave up on RabbitMQ: {reason}"),
    ))
}

/// How often the supervisor looks at the connection's status even when no
/// event woke it.
const STATUS_POLL: Duration = Duration::from_millis(500);

/// Watches the current connection and replaces it when it dies, until the
/// link is closed or dropped.
async fn supervise(link: std::sync::Weak<Link>, mut address: usize) {
    loop {
        let Some(current) = link.upgrade().and_then(|l| l.current()) else {
            return;
        };
        if !watch_until_dead(&link, &current).await {
            return;
        }
        let Some(strong) = link.upgrade() else {
            return;
        };
        if strong.is_closed() {
            return;
        }
        let since = Instant::now();
        strong.state.send_replace(LinkState::Down { since });
        metrics::gauge!(metric::CONNECTED).set(0.0);
        tracing::warn!(
            uri = %strong.addresses[address].redacted,
            generation = current.generation,
            "the connection to RabbitMQ is lost; reconnecting"
        );
        drop(current);
        match reconnect(&strong, &mut address, since).await {
            Some(next) => {
                let down = since.elapsed();
                metrics::counter!(metric::RECONNECTS).increment(1);
                let down_ms = u64::try_from(down.as_millis()).unwrap_or(u64::MAX);
                let before = strong.down_ms.fetch_add(down_ms, Ordering::AcqRel);
                metrics::counter!(metric::DISCONNECTED_SECONDS)
                    .increment(seconds_crossed(before, down_ms));
                metrics::gauge!(metric::CONNECTED).set(1.0);
                tracing::info!(
                    uri = %strong.addresses[address].redacted,
                    generation = next.generation,
                    down_for = ?down,
                    "reconnected to RabbitMQ; declared queues replayed"
                );
                if strong.is_closed() {
                    return;
                }
                strong.state.send_replace(LinkState::Up(next));
            }
            None => return,
        }
    }
}

/// Waits until `current`'s connection is dead (true) or the link is gone
/// (false).
async fn watch_until_dead(link: &std::sync::Weak<Link>, current: &Current) -> bool {
    let mut events = current.connection.events_listener();
    let mut poll = tokio::time::interval(STATUS_POLL);
    let Some(notify) = link.upgrade().map(|l| Arc::clone(&l.suspect)) else {
        return false;
    };
    loop {
        let Some(strong) = link.upgrade() else {
            return false;
        };
        if strong.is_closed() {
            return false;
        }
        if !current.connection.status().connected() {
            return true;
        }
        drop(strong);
        let suspect = notify.notified();
        tokio::select! {
            event = events.next() => match event {
                Some(Event::Error(error)) => {
                    tracing::debug!(%error, "RabbitMQ connection error event");
                }
                Some(Event::ConnectionBlocked(reason)) => {
                    tracing::warn!(%reason, "RabbitMQ blocked publishing on the connection (a resource alarm); publishes wait up to their timeout");
                }
                Some(Event::ConnectionUnblocked) => {
                    tracing::info!("RabbitMQ unblocked the connection");
                }
                Some(other) => tracing::debug!(event = ?other, "RabbitMQ connection event"),
                None => {
                    // The listener ends with the connection.
                    if !current.connection.status().connected() {
                        return true;
                    }
                    poll.tick().await;
                }
            },
            () = suspect => {}
            _ = poll.tick() => {}
        }
    }
}

/// Connects again, trying every address in turn from the one after the
/// last, with backoff between rounds; replays the declared queues. `None`
/// when the link was closed or gave up for good.
async fn reconnect(link: &Arc<Link>, address: &mut usize, since: Instant) -> Option<Current> {
    let (min, max) = link.options.reconnect_delay;
    let mut delay = min;
    let generation = next_generation(link);
    loop {
        for _ in 0..link.addresses.len() {
            if link.is_closed() {
                return None;
            }
            *address = (*address + 1) % link.addresses.len();
            let target = &link.addresses[*address];
            let connection = match dial(target, &link.options).await {
                Ok(connection) => connection,
                Err(failure) if failure.fatal => {
                    give_up(link, &failure.error.to_string());
                    return None;
                }
                Err(failure) => {
                    tracing::debug!(uri = %target.redacted, error = %failure.error, "reconnection attempt failed");
                    continue;
                }
            };
            match replay(link, &connection).await {
                Ok(()) => {
                    return Some(Current {
                        connection: Arc::new(connection),
                        generation,
                    });
                }
                Err(error) if !error.is_transient() => {
                    give_up(
                        link,
                        &format!("replaying the declared queues on a new connection: {error}"),
                    );
                    let _ = connection.close(200, ShortString::default()).await;
                    return None;
                }
                Err(error) => {
                    tracing::warn!(uri = %target.redacted, %error, "replaying the declared queues failed; trying again");
                    let _ = tokio::time::timeout(
                        link.options.call_timeout,
                        connection.close(200, ShortString::default()),
                    )
                    .await;
                }
            }
        }
        if let Some(deadline) = link.options.reconnect_deadline
            && since.elapsed() >= deadline
        {
            give_up(
                link,
                &format!(
                    "could not reconnect within the reconnect deadline of {deadline:?} \
                     (tried {} address(es))",
                    link.addresses.len()
                ),
            );
            return None;
        }
        tokio::time::sleep(jitter(delay)).await;
        delay = (delay * 2).min(max);
    }
}

/// Whole seconds passed when `added` milliseconds follow `before`
/// milliseconds: what a seconds counter must grow by so that it always
/// shows the whole seconds of the running total.
fn seconds_crossed(before: u64, added: u64) -> u64 {
    before.saturating_add(added) / 1_000 - before / 1_000
}

fn next_generation(link: &Link) -> u64 {
    link.generations.fetch_add(1, Ordering::AcqRel) + 1
}

fn give_up(link: &Link, reason: &str) {
    tracing::error!(reason, "giving up on RabbitMQ");
    link.state
        .send_replace(LinkState::Failed(Arc::from(reason)));
}

/// Declares every queue declared so far on the new connection, before
/// anyone may publish or consume on it: a queue an operator deleted while
/// the backend was away comes back.
async fn replay(link: &Link, connection: &Connection) -> Result<(), Error> {
    let configs = link.declared_configs();
    if configs.is_empty() {
        return Ok(());
    }
    let declaring = declare::declare_queues(connection, &link.options, &configs, |_| {});
    match tokio::time::timeout(link.options.call_timeout, declaring).await {
        Ok(result) => result,
        Err(_) => Err(Error::Backend(BackendError::new(
            BackendErrorKind::TimedOut,
            "replaying the declared queues: no answer from RabbitMQ in time",
        ))),
    }
}

/// A pause of up to `delay`, drawn uniformly (full jitter), so that many
/// processes cut off together do not reconnect in lockstep.
fn jitter(delay: Duration) -> Duration {
    let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
    let random = uuid::Uuid::new_v4().as_u64_pair().0;
    Duration::from_nanos(random % nanos.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_outages_add_up_in_the_disconnected_seconds() {
        // Three outages of 400 ms: 1.2 s in all, so the counter shows 1.
        let mut total = 0;
        let mut reported = 0;
        for _ in 0..3 {
            reported += seconds_crossed(total, 400);
            total += 400;
        }
        assert_eq!(reported, 1);
        assert_eq!(seconds_crossed(0, 2_500), 2);
        assert_eq!(seconds_crossed(2_500, 600), 1);
        assert_eq!(seconds_crossed(u64::MAX - 1, 10), 0);
    }
}
