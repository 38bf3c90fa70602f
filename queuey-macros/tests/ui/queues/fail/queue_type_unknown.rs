// Only classic and quorum queues exist for a queue set.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(queue_type = "stream")]
    Payments,
}

fn main() {}
