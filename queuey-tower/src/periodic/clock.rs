//! The time a scheduler reads.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// Where a scheduler reads the time of day: the system clock, or, for tests
/// on tokio's paused clock, a clock that starts at an instant of your
/// choosing and advances with tokio's.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use queuey_tower::periodic::Clock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
/// let clock = Clock::tokio_from(start);
/// tokio::time::sleep(Duration::from_secs(90)).await;
/// assert_eq!(clock.now(), start + Duration::from_secs(90));
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Clock {
    anchor: Option<(SystemTime, Instant)>,
}

impl Clock {
    /// The system clock (the default): every process of the fleet reads
    /// its own, so keep them in sync (NTP).
    pub fn system() -> Self {
        Clock { anchor: None }
    }

    /// A clock that reads `start` now and advances with tokio's clock, so
    /// `tokio::time::pause` and `advance` drive it. Create it inside the
    /// runtime whose clock it follows.
    pub fn tokio_from(start: SystemTime) -> Self {
        Clock {
            anchor: Some((start, Instant::now())),
        }
    }

    /// The time of day.
    pub fn now(&self) -> SystemTime {
        match self.anchor {
            None => SystemTime::now(),
            Some((start, at)) => start + at.elapsed(),
        }
    }

    /// The tokio instant at which this clock reads `at` (now, if `at` has
    /// passed).
    pub(crate) fn deadline(&self, at: SystemTime) -> Instant {
        Instant::now() + at.duration_since(self.now()).unwrap_or(Duration::ZERO)
    }
}
