// `#[derive(Queues)]` needs an enum.
#[derive(queuey_core::Queues)]
struct AppQueues {
    emails: u8,
}

fn main() {}
