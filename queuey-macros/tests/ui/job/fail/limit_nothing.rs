// A limit block with a key but no limit limits nothing: refused.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = host))]
struct CallApi {
    host: String,
}

fn main() {}
