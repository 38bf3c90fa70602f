// Unions cannot be jobs.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails)]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}
