// An empty queue name.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(name = "")]
    Emails,
    Other,
}

fn main() {}
