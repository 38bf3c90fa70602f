// The dot after the prefix is added by the derive.
#[derive(queuey_core::Queues)]
#[queues(prefix = "myapp.")]
enum AppQueues {
    Emails,
    Other,
}

fn main() {}
