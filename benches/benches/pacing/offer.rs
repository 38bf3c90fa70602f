//! The offered load: one producer, open loop. The hosts take turns, one
//! enqueue every [`Settings::gap`], so each host's jobs are evenly spaced
//! and the hosts staggered; each enqueue runs as a task of its own, so a
//! slow one delays none of the next.

use std::sync::Arc;
use std::time::Instant;

use queuey::Producer;
use queuey::rabbitmq::RabbitMqBackend;
use tokio::task::{JoinError, JoinSet};

use crate::queue::{PacingQueues, PartnerCall};
use crate::settings::Settings;

/// Enqueues still under way.
pub(crate) type Pending = JoinSet<Result<(), queuey::Error>>;

/// What the producer did.
#[derive(Debug, Default)]
pub(crate) struct Offered {
    /// The first enqueue: the window's start.
    pub(crate) started: Option<Instant>,
    /// Enqueues tried, and those that failed (with the first error).
    pub(crate) jobs: u64,
    pub(crate) failed: u64,
    pub(crate) first_error: Option<String>,
}

impl Offered {
    fn settle(&mut self, outcome: Result<Result<(), queuey::Error>, JoinError>) {
        let error = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("the enqueue task failed: {e}"),
        };
        self.failed += 1;
        self.first_error.get_or_insert(error);
    }

    /// Waits for the enqueues still under way.
    pub(crate) async fn finish(&mut self, mut pending: Pending) {
        while let Some(outcome) = pending.join_next().await {
            self.settle(outcome);
        }
    }
}

/// Offers the load until the window's end (the first enqueue plus the
/// window) and returns then, with the enqueues still under way. `offered`
/// is filled as it goes, so that an interrupted run still says what it
/// offered.
pub(crate) async fn offer(
    settings: &Settings,
    producer: &Producer<PacingQueues, Arc<RabbitMqBackend>>,
    offered: &mut Offered,
) -> Pending {
    let gap = settings.gap();
    let start = tokio::time::Instant::now();
    offered.started = Some(start.into_std());
    let mut pending = JoinSet::new();
    for n in 0..settings.jobs() {
        tokio::time::sleep_until(start + gap.mul_f64(n as f64)).await;
        let host = usize::try_from(n % settings.keys as u64).unwrap_or(0);
        let producer = producer.clone();
        pending.spawn(async move { producer.enqueue(&PartnerCall::new(host)).await.map(|_| ()) });
        offered.jobs += 1;
        while let Some(outcome) = pending.try_join_next() {
            offered.settle(outcome);
        }
    }
    tokio::time::sleep_until(start + settings.window).await;
    pending
}
