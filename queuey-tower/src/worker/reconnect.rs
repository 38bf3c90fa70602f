//! Starting a lost consumer again: when, how often, and for how long.

use std::time::Duration;

use queuey_core::Backoff;
use tokio::time::Instant;

/// How long a queue keeps trying to consume again by default.
pub const DEFAULT_RECONNECT_DEADLINE: Option<Duration> = Some(Duration::from_secs(600));

/// A consumer that worked this long is healthy again: a later loss starts a
/// new deadline.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// The worker's reconnection settings.
#[derive(Debug, Clone)]
pub(crate) struct Reconnect {
    deadline: Option<Duration>,
    backoff: Backoff,
}

impl Reconnect {
    pub(crate) fn new(deadline: Option<Duration>) -> Self {
        Reconnect {
            deadline,
            // 100 ms doubling to 5 s; constants the constructor accepts.
            backoff: Backoff::exponential(Duration::from_millis(100), 2.0, Duration::from_secs(5))
                .unwrap_or(Backoff::Fixed(Duration::from_secs(1))),
        }
    }

    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The wait before try `tries` (from 0): half the backoff's base delay
    /// plus up to half again at random, so queues of many workers do not
    /// come back in step.
    pub(crate) fn delay(&self, tries: u32) -> Duration {
        let attempt = tries.saturating_add(1);
        self.backoff.base_delay(attempt) / 2 + self.backoff.delay(attempt) / 2
    }
}

/// A queue's consumer is lost: since when, how often it was started again,
/// and what failed last.
#[derive(Debug)]
pub(crate) struct Lost {
    pub(crate) since: Instant,
    pub(crate) tries: u32,
    pub(crate) last_error: String,
    /// When a new consumer was started, if one was.
    pub(crate) resumed_at: Option<Instant>,
}

impl Lost {
    pub(crate) fn new(error: String) -> Self {
        Lost {
            since: Instant::now(),
            tries: 0,
            last_error: error,
            resumed_at: None,
        }
    }

    /// Whether the consumer started after this loss ran long enough to
    /// count as healthy.
    pub(crate) fn recovered(&self) -> bool {
        self.resumed_at
            .is_some_and(|at| at.elapsed() >= STABLE_AFTER)
    }
}
