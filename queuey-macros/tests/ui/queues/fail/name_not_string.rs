// `name` wants a string literal.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(name = emails)]
    Emails,
    Other,
}

fn main() {}
