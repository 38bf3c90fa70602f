// RabbitMQ reserves `amq.` names.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(name = "amq.emails")]
    Emails,
    Other,
}

fn main() {}
