//! The supervisor: watching the link's connection, and replacing it when it
//! dies (every address in turn, backoff with full jitter between rounds,
//! the declared queues replayed before anyone may use the new one).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use lapin::types::ShortString;
use lapin::{Connection, Event};
use queuey_core::Error;
use tokio::time::Instant;

use super::backoff::Backoff;
use super::dial::{Outlook, dial};
use super::{Current, Link, LinkState, metric};
use crate::{bound, declare};

/// How often the supervisor looks at the connection's status even when no
/// event woke it.
const STATUS_POLL: Duration = Duration::from_millis(500);

/// Watches the current connection and replaces it when it dies, until the
/// link is closed or dropped.
pub(super) async fn supervise(link: std::sync::Weak<Link>, mut address: usize) {
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
        strong.state.send_replace(LinkState::Down(since));
        if strong.counts() {
            metrics::gauge!(metric::CONNECTED).set(0.0);
        }
        tracing::warn!(
            uri = %strong.addresses[address].redacted,
            purpose = ?strong.purpose,
            generation = current.generation,
            "the connection to RabbitMQ is lost; reconnecting"
        );
        drop(current);
        match reconnect(&strong, &mut address, since).await {
            Some(next) => {
                let down = since.elapsed();
                let down_ms = u64::try_from(down.as_millis()).unwrap_or(u64::MAX);
                let before = strong.down_ms.fetch_add(down_ms, Ordering::AcqRel);
                if strong.counts() {
                    metrics::counter!(metric::RECONNECTS).increment(1);
                    metrics::counter!(metric::DISCONNECTED_SECONDS)
                        .increment(seconds_crossed(before, down_ms));
                    metrics::gauge!(metric::CONNECTED).set(1.0);
                }
                tracing::info!(
                    uri = %strong.addresses[address].redacted,
                    purpose = ?strong.purpose,
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
    let mut backoff = Backoff::new(link.options.reconnect_delay);
    let generation = link.generations.fetch_add(1, Ordering::AcqRel) + 1;
    loop {
        for _ in 0..link.addresses.len() {
            if link.is_closed() {
                return None;
            }
            *address = (*address + 1) % link.addresses.len();
            let target = &link.addresses[*address];
            let connection = match dial(target, &link.options).await {
                Ok(connection) => connection,
                Err(failure) if failure.outlook == Outlook::Refused => {
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
                    let reason =
                        format!("replaying the declared queues on a new connection: {error}");
                    give_up(link, &reason);
                    let _ = connection.close(200, ShortString::default()).await;
                    return None;
                }
                Err(error) => {
                    tracing::warn!(uri = %target.redacted, %error, "replaying the declared queues failed; trying again");
                    let closing = connection.close(200, ShortString::default());
                    let _ = tokio::time::timeout(link.options.call_timeout, closing).await;
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
        tokio::time::sleep(backoff.pause()).await;
    }
}

/// Whole seconds passed when `added` milliseconds follow `before`
/// milliseconds: what a seconds counter must grow by so that it always
/// shows the whole seconds of the running total.
pub(super) fn seconds_crossed(before: u64, added: u64) -> u64 {
    before.saturating_add(added) / 1_000 - before / 1_000
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
    let configs = link.declared.all();
    if configs.is_empty() {
        return Ok(());
    }
    let declaring = declare::declare_queues(connection, &link.options, &configs, |_| {});
    let bound = link.options.call_timeout;
    bound::within(bound, "replaying the declared queues", declaring).await
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
