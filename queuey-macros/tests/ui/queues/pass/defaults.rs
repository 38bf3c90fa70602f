// No attributes at all: snake_case names, no prefix, `QueueConfig::new`'s
// defaults. Explicit discriminants are allowed.
use queuey_core::{QueueConfig, Queues};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum Plain {
    Emails = 1,
    Webhooks = 7,
}

fn main() {
    assert_eq!(Plain::ALL, &[Plain::Emails, Plain::Webhooks]);
    assert_eq!(Plain::Emails.name(), "emails");
    assert_eq!(Plain::Emails.config(), QueueConfig::new("emails"));
    assert_eq!(Plain::Webhooks.config(), QueueConfig::new("webhooks"));
    let config = Plain::Webhooks.config();
    assert_eq!(config.settings().prefetch(), QueueConfig::DEFAULT_PREFETCH);
    assert!(config.settings().durable());
    assert_eq!(config.settings().message_ttl(), None);
    assert_eq!(config.priority_levels(), Some(QueueConfig::DEFAULT_MAX_PRIORITY));
    assert_eq!(config.settings().retry(), None);
    assert_eq!(Plain::configs().len(), 2);
}
