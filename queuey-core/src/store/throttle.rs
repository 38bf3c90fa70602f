//! At most one warning per period: a store that is down fails every call,
//! and one line says so as well as thousands.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Lets one warning through per `every`; shared by the clones of a layer
/// or a producer.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Mutex<Option<Instant>>,
}

impl Throttle {
    /// One warning per `every`.
    pub fn new(every: Duration) -> Self {
        Throttle {
            every,
            last: Mutex::new(None),
        }
    }

    /// The period.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Whether a warning may be logged at `now` (and if so, the period
    /// starts again).
    pub fn allow(&self, now: Instant) -> bool {
        let mut last = crate::lock(&self.last);
        match *last {
            Some(at) if now.saturating_duration_since(at) < self.every => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_warning_per_period() {
        let throttle = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert!(throttle.allow(start));
        assert!(!throttle.allow(start));
        assert!(!throttle.allow(start + Duration::from_millis(9_999)));
        assert!(throttle.allow(start + Duration::from_secs(10)));
        assert!(!throttle.allow(start + Duration::from_secs(11)));
    }
}
