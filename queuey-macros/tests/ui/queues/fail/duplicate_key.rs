// A key given twice.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefetch = 32, prefetch = 64)]
    Emails,
    Other,
}

fn main() {}
