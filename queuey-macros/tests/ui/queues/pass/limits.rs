// Values at the edges of their ranges are accepted.
use std::time::Duration;

use queuey_core::{QueueConfig, Queues};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum Edges {
    #[queue(prefetch = 1, max_priority = 0, message_ttl = "1ms", durable = false)]
    Low,
    #[queue(prefetch = 65535, max_priority = 255, message_ttl = "3650d")]
    High,
    // 255 bytes exactly.
    #[queue(name = "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn")]
    Long,
}

fn main() {
    assert_eq!(
        Edges::Low.config(),
        QueueConfig::new("low")
            .prefetch(1)
            .max_priority(0)
            .message_ttl(Duration::from_millis(1))
            .durable(false)
    );
    assert_eq!(Edges::Low.config().priority_levels(), None);
    assert_eq!(
        Edges::High.config(),
        QueueConfig::new("high")
            .prefetch(65535)
            .max_priority(255)
            .message_ttl(Duration::from_secs(3650 * 24 * 3600))
    );
    assert_eq!(Edges::Long.name().len(), 255);
    for config in Edges::configs() {
        config.validate().expect("derived configs are valid");
    }
}
