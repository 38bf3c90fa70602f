// A limit needs the key its jobs are counted by.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Calls, limit(concurrency = 3))]
struct CallApi {
    host: String,
}

fn main() {}
