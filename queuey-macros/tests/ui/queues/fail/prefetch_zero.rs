// AMQP reads a prefetch of 0 as unlimited.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = 0)]
    Emails,
    Other,
}

fn main() {}
