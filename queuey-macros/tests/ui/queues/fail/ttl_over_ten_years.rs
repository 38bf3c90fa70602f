// RabbitMQ caps TTLs at ten years.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(message_ttl = "3651d")]
    Emails,
    Other,
}

fn main() {}
