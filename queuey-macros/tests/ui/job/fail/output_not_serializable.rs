use queuey_core::{Job, Queues};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Default,
}

struct Quote {
    cents: u64,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Default, output = Quote)]
struct PriceOrder;

fn main() {
    let _ = Quote { cents: 1 }.cents;
}
