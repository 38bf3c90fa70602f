// max_priority is a u8.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(max_priority = 256)]
    Emails,
    Other,
}

fn main() {}
