// `#[queue]` needs a list of settings.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue]
    Emails,
    Other,
}

fn main() {}
