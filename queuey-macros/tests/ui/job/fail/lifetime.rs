// Job types cannot borrow.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::Emails)]
struct Borrowed<'a> {
    to: &'a str,
}

fn main() {}
