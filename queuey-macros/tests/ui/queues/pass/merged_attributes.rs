// Several `#[queue]` attributes on one variant add up; other derives and
// attributes can sit next to them; the set may be `pub` and used in a module.
mod queues {
    use queuey_core::Queues;

    /// The application's queues.
    #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[queues(prefix = "app")]
    pub enum AppQueues {
        /// Outgoing mail.
        #[queue(prefetch = 4)]
        #[queue(durable = false)]
        #[allow(dead_code)]
        Emails,
    }
}

use queuey_core::{QueueConfig, Queues};

fn main() {
    assert_eq!(
        queues::AppQueues::Emails.config(),
        QueueConfig::new("app.emails").prefetch(4).durable(false)
    );
}
