// The queue may be named through `crate::`, `self::`, `super::` and nested
// module paths; `Job::Queues` is the path without its last segment.
mod app {
    pub mod queues {
        #[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
        pub enum AppQueues {
            Emails,
            Reports,
        }
    }

    pub mod jobs {
        use serde::{Deserialize, Serialize};

        #[derive(queuey_core::Job, Serialize, Deserialize)]
        #[job(queue = super::queues::AppQueues::Reports)]
        pub struct Report;
    }
}

mod queues {
    pub use crate::app::queues::AppQueues;
}

use queuey_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Job, Serialize, Deserialize)]
#[job(queue = crate::app::queues::AppQueues::Emails)]
struct ByCrate;

#[derive(Job, Serialize, Deserialize)]
#[job(queue = self::queues::AppQueues::Emails)]
struct BySelf;

#[derive(Job, Serialize, Deserialize)]
#[job(queue = queues::AppQueues::Reports)]
struct ByReexport;

fn same_set<A: Job, B: Job<Queues = A::Queues>>() {}

fn main() {
    same_set::<ByCrate, BySelf>();
    same_set::<ByCrate, ByReexport>();
    same_set::<ByCrate, app::jobs::Report>();
    assert_eq!(ByCrate::QUEUE, app::queues::AppQueues::Emails);
    assert_eq!(app::jobs::Report::QUEUE, app::queues::AppQueues::Reports);
}
