// A concurrency of zero would let no job run.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = host, concurrency = 0))]
struct CallApi {
    host: String,
}

fn main() {}
