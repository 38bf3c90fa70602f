// `#[derive(Queues)]` needs an enum.
#[derive(queuey_core::Queues)]
union AppQueues {
    emails: u8,
}

fn main() {}
