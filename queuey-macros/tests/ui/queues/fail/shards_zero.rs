// A queue needs at least one shard.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    #[queue(shards = 0)]
    Orders,
}

fn main() {}
