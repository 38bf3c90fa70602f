// `queue_type = "quorum"`: a quorum queue, without priority levels; an
// explicit `max_priority = 0` and `durable = true` are allowed with it.
use queuey_core::{QueueConfig, QueueType, Queues};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    #[queue(queue_type = "quorum")]
    Payments,
    #[queue(queue_type = "quorum", max_priority = 0, durable = true)]
    Ledger,
    #[queue(queue_type = "classic")]
    Emails,
}

fn main() -> Result<(), queuey_core::Error> {
    let payments = AppQueues::Payments.config();
    payments.validate()?;
    assert!(payments.is_quorum());
    assert_eq!(payments.priority_levels(), None);
    assert_eq!(
        payments,
        QueueConfig::new("payments").queue_type(QueueType::Quorum)
    );
    AppQueues::Ledger.config().validate()?;
    assert!(!AppQueues::Emails.config().is_quorum());
    assert_eq!(AppQueues::Emails.config(), QueueConfig::new("emails"));
    Ok(())
}
