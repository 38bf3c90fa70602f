//! The pauses between connection attempts, the first connection's and
//! every reconnection's alike: exponential from the shortest to the
//! longest pause of [`reconnect_delay`](crate::RabbitMqOptions::reconnect_delay),
//! each drawn with full jitter.

use std::time::Duration;

/// The pauses of one run of attempts.
pub(super) struct Backoff {
    next: Duration,
    longest: Duration,
}

impl Backoff {
    /// Pauses from `shortest`, doubling up to `longest`.
    pub(super) fn new((shortest, longest): (Duration, Duration)) -> Self {
        Backoff {
            next: shortest,
            longest,
        }
    }

    /// The pause before the next round of attempts.
    pub(super) fn pause(&mut self) -> Duration {
        let pause = jitter(self.next);
        self.next = (self.next * 2).min(self.longest);
        pause
    }
}

/// A pause of up to `delay`, drawn uniformly (full jitter), so that many
/// processes cut off together do not reconnect in lockstep (or, started
/// together, do not take their turns at once).
pub(crate) fn jitter(delay: Duration) -> Duration {
    let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(random_below(nanos))
}

/// A number drawn uniformly below `n` (0 when `n` is 0 or 1).
pub(crate) fn random_below(n: u64) -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0 % n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest_and_never_exceed_their_step() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new((ms(100), ms(500)));
        for ceiling in [100, 200, 400, 500, 500] {
            let pause = backoff.pause();
            assert!(pause < ms(ceiling), "{pause:?} for a step of {ceiling} ms");
        }
    }
}
