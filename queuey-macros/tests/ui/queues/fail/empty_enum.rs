// A queue set needs at least one queue.
#[derive(queuey_core::Queues)]
enum AppQueues {}

fn main() {}
