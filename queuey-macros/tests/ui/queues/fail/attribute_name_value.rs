// `#[queues = ..]` is not a list of settings.
#[derive(queuey_core::Queues)]
#[queues = "app"]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
