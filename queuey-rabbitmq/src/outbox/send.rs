//! Publishing one message until it is confirmed, fails for good, or its
//! bound passes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::{BackendErrorKind, Error};
use tokio::time::Instant;

use super::publisher::{Outgoing, Publisher};
use crate::RabbitMqOptions;
use crate::bound::timed_out;
use crate::error::backend;
use crate::link::{Current, Link};

/// The first and the longest pause between two tries of a publish whose
/// channel or connection failed (the first retry goes at once).
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(25);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// The publishing lanes, and the retries around them.
pub(super) struct Sender {
    pub(super) link: Arc<Link>,
    pub(super) options: Arc<RabbitMqOptions>,
    pub(super) publisher: Publisher,
}

impl Sender {
    /// Starts the publishing lanes on `link`. Must be called inside a tokio
    /// runtime.
    pub(super) fn new(link: Arc<Link>, options: Arc<RabbitMqOptions>) -> Self {
        let channels = options.publish_concurrency;
        let publisher = Publisher::new(Arc::clone(&link), channels, options.publish_window);
        Sender {
            link,
            options,
            publisher,
        }
    }

    /// The connection to use, waiting for a reconnection up to the publish
    /// bound; `what` is formatted only for an error.
    pub(super) async fn connection(&self, what: impl FnOnce() -> String) -> Result<Current, Error> {
        self.link.ensure_open()?;
        if let Some(current) = self.link.current() {
            return Ok(current);
        }
        let deadline = Instant::now() + self.options.publish_timeout;
        self.link.connection_until(deadline, &what()).await
    }

    /// Publishes a body whose size is settled: checked when the envelope
    /// was prepared, or a body the broker delivered to us being copied
    /// unchanged to a dead-letter or suspect queue (the broker accepted its
    /// size once already, so queuey's own limit does not apply).
    ///
    /// A publish whose channel or connection failed is published again
    /// until the publish bound ([`RabbitMqOptions::publish_timeout`]) has
    /// passed: a duplicate at worst, never a loss.
    pub(super) async fn send(&self, out: Outgoing) -> Result<(), Error> {
        let deadline = Instant::now() + self.options.publish_timeout;
        self.retrying(
            deadline,
            || format!("publishing to `{}`", out.queue),
            || self.publisher.publish(out.clone(), deadline),
        )
        .await
    }

    /// Publishes into a queue this backend declares on its own (a
    /// dead-letter or suspect queue, named `kind` in logs and errors). When
    /// the queue is gone (the publish comes back `NO_ROUTE`: an operator
    /// deleted it), declares it once with `declare` and publishes again; a
    /// second refusal is returned.
    pub(super) async fn send_declaring<F, Fut>(
        &self,
        out: Outgoing,
        kind: &str,
        declare: F,
    ) -> Result<(), Error>
    where
        F: FnOnce(Current) -> Fut,
        Fut: Future<Output = Result<(), Error>>,
    {
        match self.send(out.clone()).await {
            Err(Error::Backend(e)) if e.kind() == BackendErrorKind::Unroutable => {
                tracing::warn!(queue = %out.queue, "the {kind} is gone; declaring it again");
                let what = format!("declaring {kind} `{}` again", out.queue);
                self.link.call(&what, declare).await?;
                self.send(out).await
            }
            other => other,
        }
    }

    /// Runs `attempt` again after each transient failure (a lost
    /// connection, a publish whose outcome is unknown, a wait that timed
    /// out) until it succeeds, fails for good, or `deadline` passes; then
    /// the last error is returned. `what` is formatted only for an error.
    pub(super) async fn retrying<T, F, Fut>(
        &self,
        deadline: Instant,
        what: impl Fn() -> String,
        mut attempt: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut pause = Duration::ZERO;
        // Whether an earlier try was sent and never confirmed: then the
        // broker may hold the message whatever later tries say, and a final
        // failure must say so rather than read as "never published".
        let mut uncertain = false;
        loop {
            let result = match tokio::time::timeout_at(deadline, attempt()).await {
                Ok(result) => result,
                Err(_) if uncertain => {
                    return Err(uncertain_after(&what(), self.options.publish_timeout));
                }
                Err(_) => return Err(self.publish_timed_out(&what())),
            };
            if let Err(Error::Backend(e)) = &result
                && e.kind() == BackendErrorKind::Uncertain
            {
                uncertain = true;
            }
            match result {
                Err(error)
                    if error.is_transient()
                        && !self.link.is_closed()
                        && Instant::now() + pause < deadline =>
                {
                    tracing::debug!(%error, "{}: trying again", what());
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).clamp(RETRY_PAUSE_MIN, RETRY_PAUSE_MAX);
                }
                Err(error) if uncertain && error.is_transient() => {
                    return Err(uncertain_after(&what(), self.options.publish_timeout));
                }
                other => return other,
            }
        }
    }

    /// The error of a publish that ran past its bound: saying so when the
    /// broker is unreachable (the backend is still reconnecting) tells an
    /// operator where to look.
    fn publish_timed_out(&self, what: &str) -> Error {
        let bound = self.options.publish_timeout;
        if self.link.current().is_some() {
            return timed_out(what, bound);
        }
        let text = format!(
            "{what}: RabbitMQ is unreachable and the backend is still reconnecting; \
             gave up after {bound:?}"
        );
        backend(BackendErrorKind::TimedOut, text)
    }
}

/// The error of a publish that was sent at least once without a
/// confirmation, then could not be confirmed within its bound.
fn uncertain_after(what: &str, bound: Duration) -> Error {
    let text = format!(
        "{what}: the connection was lost before RabbitMQ confirmed the message, and it \
         could not be confirmed again within {bound:?}; the broker may or may not hold it, \
         so publishing it again (same job id) is the safe answer"
    );
    backend(BackendErrorKind::Uncertain, text)
}
