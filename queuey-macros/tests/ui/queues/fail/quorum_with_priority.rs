// A quorum queue has no priority levels.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(queue_type = "quorum", max_priority = 5)]
    Payments,
}

fn main() {}
