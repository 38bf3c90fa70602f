//! What the worker's broker tests add to the shared harness: queue sets
//! whose names are unique to each test, and polling a condition.

use std::sync::Arc;
use std::time::Duration;

use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::{Broker, within};

/// Polls `done` every 20 ms until it holds, failing after the harness's
/// bound.
pub(crate) async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    within(what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// A backend on the test broker, its connection named for `label`.
pub(crate) async fn backend(
    broker: &Broker,
    label: &str,
    options: RabbitMqOptions,
) -> Arc<RabbitMqBackend> {
    let options = broker.isolate(options.connection_name(broker.connection_name(label)));
    Arc::new(
        within(
            "connect",
            RabbitMqBackend::with_options(&broker.url, options),
        )
        .await
        .expect("connected"),
    )
}

/// A queue name no other test (or run) uses, for the life of the process.
pub(crate) fn unique_name(label: &str) -> &'static str {
    let name = format!("queuey-e2e.{label}.{}", uuid::Uuid::new_v4().simple());
    Box::leak(name.into_boxed_str())
}

/// A queue set with one queue, `Work`, whose name is unique to the test
/// binary's run, and a job type `$job` on it.
macro_rules! scenario {
    ($queues:ident, $job:ident, $label:literal, $config:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum $queues {
            Work,
        }

        impl queuey::Queues for $queues {
            const ALL: &'static [Self] = &[$queues::Work];

            fn name(&self) -> &'static str {
                static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
                NAME.get_or_init(|| $crate::scenario::unique_name($label))
            }

            fn config(&self) -> queuey::queue::QueueConfig {
                let config: fn(queuey::queue::QueueConfig) -> queuey::queue::QueueConfig = $config;
                config(queuey::queue::QueueConfig::new(self.name()))
            }
        }

        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        struct $job {
            n: u32,
        }

        impl queuey::Job for $job {
            type Queues = $queues;
            type Output = ();
            const QUEUE: $queues = $queues::Work;
            const NAME: &'static str = "e2e_job";
        }
    };
}
