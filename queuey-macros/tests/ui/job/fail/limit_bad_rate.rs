// A rate that is not one is refused when the program is compiled.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = host, rate = "10 per second"))]
struct CallApi {
    host: String,
}

fn main() {}
