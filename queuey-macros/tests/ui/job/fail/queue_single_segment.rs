// `queue` names a variant through its set.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = Emails)]
struct SendEmail;

fn main() {}
