//! Starting a lost consumer again: when and how often.
//!
//! Whether the connection heals is the backend's call: it reconnects at its
//! own pace and reports [`ConnectionState::Failed`] when it gives up. The
//! worker consumes again once the backend is connected, and stops, with the
//! backend's reason, when it gave up. Only a consumer lost on a connected
//! backend (a refused consume, a failed stream) waits a jittered backoff of
//! the worker's own, so that it is no hot loop.

use std::time::Duration;

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::Peekable;
use queuey_core::backend::{Backend, ConnectionState, DeliveryStream};
use queuey_core::{BackendError, BackendErrorKind, Backoff, Error, QueueConfig};
use tokio::sync::watch;
use tokio::time::Instant;

use super::WorkerError;
use super::handle::{Counting, HandleInner, stopped};
use super::turns::{Intake, take_turns};
use crate::metrics::QUEUES_RECONNECTING;

/// A queue's deliveries as the consume loop reads them: one look ahead.
pub(crate) type Stream = Peekable<DeliveryStream>;

/// A consumer that worked this long is healthy again: a later loss starts
/// the backoff from its shortest wait.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// The worker's pace of consuming again on a working connection.
#[derive(Debug, Clone)]
pub(crate) struct Reconnect {
    backoff: Backoff,
}

impl Reconnect {
    pub(crate) fn new() -> Self {
        Reconnect {
            // 100 ms doubling to 5 s; constants the constructor accepts.
            backoff: Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(5))
                .unwrap_or(Backoff::Fixed(Duration::from_secs(1))),
        }
    }

    /// The wait before try `tries` (from 0): half the backoff's base delay
    /// plus up to half again at random, so queues of many workers do not
    /// come back in step.
    pub(crate) fn delay(&self, tries: u32) -> Duration {
        let attempt = tries.saturating_add(1);
        self.backoff.base_delay(attempt) / 2 + self.backoff.delay(attempt) / 2
    }
}

/// A queue's consumer is lost: how often it was started again.
#[derive(Debug, Default)]
pub(crate) struct Lost {
    pub(crate) tries: u32,
    /// When a new consumer was started, if one was.
    pub(crate) resumed_at: Option<Instant>,
}

impl Lost {
    /// Whether the consumer started after this loss ran long enough to
    /// count as healthy.
    pub(crate) fn recovered(&self) -> bool {
        self.resumed_at
            .is_some_and(|at| at.elapsed() >= STABLE_AFTER)
    }
}

/// Consumes the queue (every broker queue of `physical`, as one stream).
/// After a loss it first waits: for a reconnecting backend's state to
/// change, or a jittered backoff on a connected one. Retries what may heal,
/// gives up on what cannot; `None` on shutdown meanwhile.
pub(crate) async fn open<B: Backend>(
    intake: &Intake,
    queue: &Arc<str>,
    backend: &B,
    stop: &mut watch::Receiver<bool>,
    lost: &mut Option<Lost>,
    reconnect: &Reconnect,
) -> Result<Option<Stream>, WorkerError> {
    loop {
        if let Some(lost) = lost.as_mut() {
            let pause = async {
                match backend.connection_state() {
                    ConnectionState::Connected => {
                        tokio::time::sleep(reconnect.delay(lost.tries)).await;
                        lost.tries = lost.tries.saturating_add(1);
                    }
                    ConnectionState::Reconnecting => {
                        backend
                            .connection_changed(ConnectionState::Reconnecting)
                            .await;
                    }
                    // Given up or closed: what follows says so.
                    _ => {}
                }
            };
            tokio::select! {
                biased;
                () = stopped(stop) => return Ok(None),
                () = pause => {}
            }
        }
        if *stop.borrow() {
            return Ok(None);
        }
        if backend.connection_state() == ConnectionState::Failed {
            return gave_up(&intake.queues[0], queue, backend, stop).await;
        }
        let consumed = tokio::select! {
            biased;
            () = stopped(stop) => return Ok(None),
            consumed = consume_all(intake, backend) => consumed,
        };
        match consumed {
            Ok(stream) => {
                if let Some(lost) = lost.as_mut() {
                    lost.resumed_at = Some(tokio::time::Instant::now());
                }
                return Ok(Some(stream.peekable()));
            }
            Err(error) if error.is_transient() => {
                tracing::warn!(queue = %queue, %error, "could not consume; trying again");
                note_lost(lost);
            }
            Err(source) => {
                return Err(WorkerError::Consume {
                    queue: queue.to_string(),
                    source,
                });
            }
        }
    }
}

/// Consumes every broker queue of `intake` as one stream, taken in turns,
/// that ends (or fails) with the first of its consumers; all or none are
/// consumed.
async fn consume_all<B: Backend>(intake: &Intake, backend: &B) -> Result<DeliveryStream, Error> {
    if let [one] = intake.queues.as_slice() {
        return backend.consume(one).await;
    }
    let mut streams = Vec::with_capacity(intake.queues.len());
    for config in &intake.queues {
        // On an error, dropping the streams opened so far cancels them.
        streams.push(backend.consume(config).await?);
    }
    Ok(take_turns(streams, intake.weights.clone()))
}

/// The end of a queue's loop whose backend reports
/// [`ConnectionState::Failed`]: [`WorkerError::BackendFailed`] with the
/// reason its calls now fail with; `Ok(None)` on shutdown meanwhile.
pub(crate) async fn gave_up<B: Backend, T>(
    config: &QueueConfig,
    queue: &str,
    backend: &B,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<T>, WorkerError> {
    let answer = tokio::select! {
        biased;
        () = stopped(stop) => return Ok(None),
        answer = backend.consume(config) => answer,
    };
    let source = match answer {
        Err(error) => error,
        // A call that still works tells no reason; the state is what the
        // backend reports, and it says it gave up.
        Ok(_) => Error::Backend(BackendError::new(
            BackendErrorKind::Other,
            "the backend reports that it gave up on its connection and gave no reason",
        )),
    };
    Err(WorkerError::BackendFailed {
        queue: queue.to_owned(),
        source,
    })
}

/// Records a loss: a new one, unless the consumer never recovered from the
/// last.
pub(crate) fn note_lost(lost: &mut Option<Lost>) {
    if lost.as_ref().is_none_or(Lost::recovered) {
        *lost = Some(Lost::default());
    }
}

/// Shows a queue as reconnecting on the handle and in metrics while it
/// lives.
pub(crate) struct Reconnecting<'a> {
    _counting: Counting<'a>,
}

impl Drop for Reconnecting<'_> {
    fn drop(&mut self) {
        metrics::gauge!(QUEUES_RECONNECTING).decrement(1.0);
    }
}

/// Shows (`Some`) or stops showing (`None`) this queue as reconnecting.
pub(crate) fn set_reconnecting<'a>(
    slot: &mut Option<Reconnecting<'a>>,
    handle: Option<&'a HandleInner>,
) {
    match (slot.is_some(), handle) {
        (false, Some(handle)) => {
            metrics::gauge!(QUEUES_RECONNECTING).increment(1.0);
            *slot = Some(Reconnecting {
                _counting: Counting::new(&handle.queues_reconnecting),
            });
        }
        (true, None) => *slot = None,
        _ => {}
    }
}
