// A rate that lets nothing start is refused.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = host, rate = "0/s"))]
struct CallApi {
    host: String,
}

fn main() {}
