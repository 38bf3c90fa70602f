// A burst is the burst of a rate.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = host, concurrency = 3, burst = 5))]
struct CallApi {
    host: String,
}

fn main() {}
