// The three backoff kinds, each key of each, and the defaults of the rest.
use std::time::Duration;

use queuey_core::{Backoff, Queues, RetryPolicy};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum Retrying {
    #[queue(retry())]
    Defaults,
    #[queue(retry(backoff = "none", max_attempts = 2))]
    Immediate,
    #[queue(retry(backoff = "fixed", delay = "1500ms"))]
    Fixed,
    #[queue(retry(base = "250ms", factor = 1.5, max = "2h", jitter = false, max_attempts = 4294967295))]
    Exponential,
    #[queue(retry(backoff = "exponential", factor = 1))]
    Flat,
}

fn policy(queue: Retrying) -> RetryPolicy {
    queue.config().settings().retry().cloned().expect("a retry policy")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    assert_eq!(policy(Retrying::Defaults), RetryPolicy::default());
    assert_eq!(policy(Retrying::Immediate), RetryPolicy::new(2, Backoff::none())?);
    assert_eq!(
        policy(Retrying::Fixed),
        RetryPolicy::new(RetryPolicy::DEFAULT_MAX_ATTEMPTS, Backoff::fixed(Duration::from_millis(1500))?)?
    );
    assert_eq!(
        policy(Retrying::Exponential),
        RetryPolicy::new(
            u32::MAX,
            Backoff::exponential(Duration::from_millis(250), 1.5, Duration::from_secs(7200))?
                .without_jitter(),
        )?
    );
    assert_eq!(
        policy(Retrying::Flat),
        RetryPolicy::new(5, Backoff::exponential(Duration::from_secs(1), 1.0, Duration::from_secs(300))?)?
    );
    Ok(())
}
