// Queue sets are not generic.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job)]
#[job(queue = AppQueues::<u8>::Emails)]
struct SendEmail;

fn main() {}
