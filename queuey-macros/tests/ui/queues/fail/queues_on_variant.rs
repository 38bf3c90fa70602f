// `#[queues]` belongs on the enum.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queues(prefix = "app")]
    Emails,
}

fn main() {}
