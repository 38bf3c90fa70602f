// A quorum queue is always durable.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(durable = false, queue_type = "quorum")]
    Payments,
}

fn main() {}
