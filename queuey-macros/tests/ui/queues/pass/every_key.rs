// Every key of `#[queues]`, `#[queue]` and `retry(..)` at once, compared with
// the configuration built by hand.
use std::time::Duration;

use queuey_core::{Backoff, QueueConfig, Queues, RetryPolicy};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "myapp")]
enum AppQueues {
    #[queue(
        name = "emails",
        prefetch = 32,
        durable = true,
        message_ttl = "30s",
        max_priority = 10,
        retry(max_attempts = 5, backoff = "exponential", base = "1s", factor = 2, max = "5m", jitter = true)
    )]
    Emails,
    Webhooks,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    assert_eq!(AppQueues::ALL, &[AppQueues::Emails, AppQueues::Webhooks]);
    assert_eq!(AppQueues::Emails.name(), "myapp.emails");
    assert_eq!(AppQueues::Webhooks.name(), "myapp.webhooks");
    let expected = QueueConfig::new("myapp.emails")
        .prefetch(32)
        .durable(true)
        .message_ttl(Duration::from_secs(30))
        .max_priority(10)
        .retry(RetryPolicy::new(
            5,
            Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(300))?,
        )?);
    assert_eq!(AppQueues::Emails.config(), expected);
    assert_eq!(AppQueues::Webhooks.config(), QueueConfig::new("myapp.webhooks"));
    Ok(())
}
