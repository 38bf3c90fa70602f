// The smallest job: a queue and nothing else. NAME is the type's name and
// there is no retry policy of its own.
use queuey_core::{Job, Queues};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails)]
struct SendEmail {
    to: String,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Emails)]
struct r#Unit;

fn queue_of<J: Job>() -> J::Queues {
    J::QUEUE
}

fn main() {
    assert_eq!(queue_of::<SendEmail>(), AppQueues::Emails);
    assert_eq!(SendEmail::NAME, "SendEmail");
    assert_eq!(SendEmail::retry_policy(), None);
    assert_eq!(Unit::NAME, "Unit");
    let _ = SendEmail { to: String::new() }.to;
}
