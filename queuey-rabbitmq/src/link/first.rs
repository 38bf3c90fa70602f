//! The first connection: a worker or producer that starts while its broker
//! is down (an outage, a rolling restart, a node still booting) waits for
//! it, up to [`connect_wait`](crate::RabbitMqOptions::connect_wait).
//!
//! Each round tries every address in turn; between rounds the pause grows
//! as a reconnection's does (the same [`Backoff`], with jitter). Only a
//! [transient](Outlook::Transient) failure is waited out: refused
//! credentials or virtual host end the wait at once, and so does an
//! address that answers wrongly (a TLS handshake refused, a port that does
//! not speak AMQP) unless another address of the round connects. The wait
//! never ends early: the last round starts once the whole bound has
//! passed. Failed attempts are logged at WARN, the first at once and then
//! at most one line per [`LOG_EVERY`], each with the address (password
//! masked) and the error; the others at DEBUG.

use std::time::Duration;

use lapin::Connection;
use queuey_core::{BackendError, Error};
use tokio::time::Instant;

use super::backoff::Backoff;
use super::dial::{Address, Outlook, dial};
use crate::RabbitMqOptions;

/// The longest silence between two WARN lines of a first connection that
/// keeps failing.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(10);

/// The first connection, once it is open.
pub(super) struct First {
    /// The address it was opened to (an index into the addresses).
    pub(super) address: usize,
    pub(super) connection: Connection,
    /// How long the broker was waited for.
    pub(super) waited: Duration,
}

/// Opens the first connection, waiting up to the connect wait for a broker
/// that cannot be reached yet. See the module documentation.
pub(super) async fn connect(
    addresses: &[Address],
    options: &RabbitMqOptions,
) -> Result<First, Error> {
    let started = Instant::now();
    let wait = options.connect_wait;
    let mut backoff = Backoff::new(options.reconnect_delay);
    let mut log = Throttle::new(LOG_EVERY);
    let mut attempts: u32 = 0;
    loop {
        let mut unreachable = None;
        let mut misconfigured = None;
        for (index, address) in addresses.iter().enumerate() {
            attempts = attempts.saturating_add(1);
            match dial(address, options).await {
                Ok(connection) => {
                    let waited = started.elapsed();
                    if attempts > 1 {
                        tracing::info!(
                            uri = %address.redacted,
                            ?waited,
                            attempts,
                            "connected to RabbitMQ after waiting for it"
                        );
                    }
                    return Ok(First {
                        address: index,
                        connection,
                        waited,
                    });
                }
                Err(failure) => match failure.outlook {
                    Outlook::Refused => return Err(failure.error),
                    Outlook::Misconfigured => {
                        misconfigured.get_or_insert(failure.error);
                    }
                    Outlook::Transient => {
                        if log.due(Instant::now()) {
                            tracing::warn!(
                                uri = %address.redacted,
                                error = %failure.error,
                                waited = ?started.elapsed(),
                                connect_wait = ?wait,
                                attempts,
                                "RabbitMQ cannot be reached yet; waiting for it"
                            );
                        } else {
                            tracing::debug!(
                                uri = %address.redacted,
                                error = %failure.error,
                                "connection attempt failed"
                            );
                        }
                        unreachable = Some(failure.error);
                    }
                },
            }
        }
        if let Some(error) = misconfigured {
            return Err(error);
        }
        let Some(error) = unreachable else {
            // Only an empty list of addresses tries nothing, and the link
            // refuses it before it gets here.
            return Err(Error::invalid_config("no broker address given"));
        };
        if wait.is_zero() {
            return Err(error);
        }
        let elapsed = started.elapsed();
        if elapsed >= wait {
            return Err(gave_up(error, wait, attempts));
        }
        tokio::time::sleep(backoff.pause().min(wait - elapsed)).await;
    }
}

/// The last attempt's error, with the bound that passed and what to do.
fn gave_up(error: Error, wait: Duration, attempts: u32) -> Error {
    match error {
        Error::Backend(e) => Error::Backend(BackendError::new(
            e.kind(),
            format!(
                "{}; RabbitMQ was still unreachable at the end of the connect wait of {wait:?} \
                 ({attempts} attempts): wait longer with `RabbitMqOptions::connect_wait`",
                e.message()
            ),
        )),
        other => other,
    }
}

/// Lets a line through at once, then at most one per interval.
struct Throttle {
    every: Duration,
    last: Option<Instant>,
}

impl Throttle {
    fn new(every: Duration) -> Self {
        Throttle { every, last: None }
    }

    /// Whether a line may be logged at `now` (and if so, the interval
    /// starts again).
    fn due(&mut self, now: Instant) -> bool {
        let due = self
            .last
            .is_none_or(|last| now.duration_since(last) >= self.every);
        if due {
            self.last = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::BackendErrorKind;

    #[test]
    fn the_first_line_goes_out_at_once_then_one_per_interval() {
        let mut throttle = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let logged: Vec<u64> = [0, 100, 5_000, 9_999, 10_000, 10_100, 19_999, 20_000, 45_000]
            .into_iter()
            .filter(|&ms| throttle.due(at(ms)))
            .collect();
        assert_eq!(logged, [0, 10_000, 20_000, 45_000]);
    }

    #[test]
    fn the_error_at_the_end_of_the_wait_keeps_its_kind_and_names_the_bound() {
        let last = Error::Backend(BackendError::new(
            BackendErrorKind::ConnectionLost,
            "connecting to RabbitMQ at `amqp://guest:***@127.0.0.1:1/%2f`: IO error: \
             Connection refused",
        ));
        let error = gave_up(last, Duration::from_secs(120), 14);
        let Error::Backend(e) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(e.kind(), BackendErrorKind::ConnectionLost);
        let text = error.to_string();
        assert!(
            text.starts_with("connecting to RabbitMQ at `amqp://guest:***@127.0.0.1:1/%2f`"),
            "{text}"
        );
        assert!(
            text.contains("connect wait of 120s (14 attempts)"),
            "{text}"
        );
        assert!(text.contains("`RabbitMqOptions::connect_wait`"), "{text}");
    }
}
