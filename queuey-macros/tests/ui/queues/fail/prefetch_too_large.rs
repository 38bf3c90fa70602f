// prefetch is a u16.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = 65536)]
    Emails,
    Other,
}

fn main() {}
