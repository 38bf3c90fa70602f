//! The one bound on every store call queuey makes.

use std::future::Future;
use std::time::Duration;

use super::StoreError;

/// How long queuey waits for a store before it goes on without it.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_millis(500);

/// Runs a store operation for at most `limit`, answering
/// [`StoreError::TimedOut`] past it.
pub async fn bounded<T>(
    limit: Duration,
    operation: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, operation).await {
        Ok(answer) => answer,
        Err(_) => Err(StoreError::TimedOut(limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_store_that_does_not_answer_times_out_at_the_bound() {
        let started = tokio::time::Instant::now();
        let answer: Result<(), _> = bounded(
            Duration::from_millis(250),
            std::future::pending::<Result<(), StoreError>>(),
        )
        .await;
        assert!(matches!(answer, Err(StoreError::TimedOut(d)) if d == Duration::from_millis(250)));
        assert_eq!(started.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_within_the_bound_is_passed_on() {
        let answer = bounded(Duration::from_secs(1), async { Ok::<_, StoreError>(7) }).await;
        assert_eq!(answer.unwrap(), 7);
    }
}
