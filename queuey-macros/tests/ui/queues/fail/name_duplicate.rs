// Two variants with the same queue name.
#[derive(queuey_core::Queues)]
enum AppQueues {
    Emails,
    #[queue(name = "emails")]
    Mail,
}

fn main() {}
