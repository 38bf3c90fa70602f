// `queue`, `name` and `retry(..)` together, on a struct and on an enum.
use std::time::Duration;

use queuey_core::{Backoff, Job, Queues, RetryPolicy};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "app")]
enum AppQueues {
    Emails,
    #[queue(retry(max_attempts = 9))]
    Webhooks,
}

#[derive(Job, Serialize, Deserialize)]
#[job(
    queue = AppQueues::Webhooks,
    name = "call_webhook",
    retry(max_attempts = 3, backoff = "fixed", delay = "2m")
)]
struct CallWebhook {
    url: String,
}

#[derive(Job, Serialize, Deserialize)]
#[job(name = "notify", queue = AppQueues::Emails, retry())]
enum Notify {
    Welcome { user: u64 },
    Goodbye,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    assert_eq!(CallWebhook::QUEUE, AppQueues::Webhooks);
    assert_eq!(CallWebhook::QUEUE.name(), "app.webhooks");
    assert_eq!(CallWebhook::NAME, "call_webhook");
    assert_eq!(
        CallWebhook::retry_policy(),
        Some(RetryPolicy::new(3, Backoff::fixed(Duration::from_secs(120))?)?)
    );
    assert_eq!(Notify::NAME, "notify");
    assert_eq!(Notify::retry_policy(), Some(RetryPolicy::default()));
    let _ = (CallWebhook { url: String::new() }.url, Notify::Welcome { user: 1 }, Notify::Goodbye);
    Ok(())
}
