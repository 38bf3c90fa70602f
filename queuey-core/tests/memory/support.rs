//! Queue sets and jobs for the memory-backend tests, written by hand (the
//! derives are tested in queuey-macros) to show the traits stand alone.

use std::time::Duration;

use futures::StreamExt;
use queuey_core::backend::{Delivery, DeliveryStream};
use queuey_core::{Job, QueueConfig, Queues};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestQueues {
    Work,
    Plain,
    Tight,
}

impl Queues for TestQueues {
    const ALL: &'static [Self] = &[TestQueues::Work, TestQueues::Plain, TestQueues::Tight];

    fn name(&self) -> &'static str {
        match self {
            TestQueues::Work => "test.work",
            TestQueues::Plain => "test.plain",
            TestQueues::Tight => "test.tight",
        }
    }

    fn config(&self) -> QueueConfig {
        match self {
            TestQueues::Work => QueueConfig::new(self.name()).prefetch(1_000),
            TestQueues::Plain => QueueConfig::new(self.name())
                .max_priority(0)
                .prefetch(1_000),
            TestQueues::Tight => QueueConfig::new(self.name()).prefetch(2),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Task {
    pub n: u32,
}

impl Job for Task {
    type Queues = TestQueues;
    type Output = ();
    const QUEUE: TestQueues = TestQueues::Work;
    const NAME: &'static str = "task";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PlainTask {
    pub n: u32,
}

impl Job for PlainTask {
    type Queues = TestQueues;
    type Output = ();
    const QUEUE: TestQueues = TestQueues::Plain;
    const NAME: &'static str = "plain_task";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TightTask {
    pub n: u32,
}

impl Job for TightTask {
    type Queues = TestQueues;
    type Output = ();
    const QUEUE: TestQueues = TestQueues::Tight;
    const NAME: &'static str = "tight_task";
}

/// The next delivery, failing the test if none arrives within a minute of
/// (possibly paused) time.
pub(crate) async fn next(stream: &mut DeliveryStream) -> Box<dyn Delivery> {
    tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("no delivery within 60 s")
        .expect("stream ended")
        .expect("stream yielded an error")
}

/// Asserts that no delivery is ready right now, without moving time.
pub(crate) async fn assert_idle(stream: &mut DeliveryStream) {
    let polled = futures::poll!(stream.next());
    assert!(polled.is_pending(), "expected no delivery, got {polled:?}");
}

/// The `n` of a delivered task.
pub(crate) fn n_of(delivery: &dyn Delivery) -> u32 {
    delivery
        .envelope()
        .payload_as::<Task>()
        .map(|t| t.n)
        .expect("payload is a Task")
}
