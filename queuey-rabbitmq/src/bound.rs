//! Broker calls within a bound: a call that RabbitMQ does not answer in
//! time fails with a [`TimedOut`](BackendErrorKind::TimedOut) error naming
//! the operation, instead of holding its caller.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use queuey_core::{BackendErrorKind, Error};

use crate::error::backend;

/// Runs `call` within `bound`; past it, fails with [`timed_out`]. `what`
/// names the operation and is formatted only for that error.
pub(crate) async fn within<T>(
    bound: Duration,
    what: impl fmt::Display,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(bound, call).await {
        Ok(result) => result,
        Err(_) => Err(timed_out(what, bound)),
    }
}

/// The error of a broker call that ran past its bound.
pub(crate) fn timed_out(what: impl fmt::Display, bound: Duration) -> Error {
    let text = format!("{what}: no answer from RabbitMQ within {bound:?}");
    backend(BackendErrorKind::TimedOut, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_bound_fails_naming_the_operation() {
        let bound = Duration::from_secs(5);
        let never = std::future::pending::<Result<(), Error>>();
        let e = within(bound, "declaring queues", never).await.unwrap_err();
        assert!(matches!(&e, Error::Backend(b) if b.kind() == BackendErrorKind::TimedOut));
        assert_eq!(
            e.to_string(),
            "declaring queues: no answer from RabbitMQ within 5s"
        );
        let answered = within(bound, "declaring queues", async { Ok(7) }).await;
        assert_eq!(answered.unwrap(), 7);
    }
}
