// Queue variants cannot carry data.
#[derive(queuey_core::Queues)]
enum AppQueues {
    Emails { to: String },
}

fn main() {}
