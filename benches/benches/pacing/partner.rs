//! The partner API the jobs call, simulated in the process: a token bucket
//! per host, shared by every worker (it is the remote side), that admits
//! [`PARTNER_RATE`] calls a second with a burst of [`PARTNER_BURST`] and
//! answers the others `429` with a `Retry-After` in whole seconds.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Calls a second the partner admits per host.
pub(crate) const PARTNER_RATE: u32 = 3;
/// Calls the partner admits at once per host after it was idle.
pub(crate) const PARTNER_BURST: u32 = 3;
/// How long an admitted call takes.
pub(crate) const CALL_TIME: Duration = Duration::from_millis(20);

/// What the partner answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The call runs.
    Admitted,
    /// `429 Too Many Requests`, with this `Retry-After`.
    TooMany(Duration),
}

/// One host's bucket: tokens left when it was last touched.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The partner: one bucket per host, and when each admitted call came.
#[derive(Debug)]
pub(crate) struct Partner {
    hosts: Mutex<Vec<(Bucket, Vec<Instant>)>>,
}

impl Partner {
    /// A partner for `hosts` hosts, every bucket full.
    pub(crate) fn new(hosts: usize) -> Partner {
        let now = Instant::now();
        let bucket = || Bucket {
            tokens: f64::from(PARTNER_BURST),
            at: now,
        };
        Partner {
            hosts: Mutex::new((0..hosts).map(|_| (bucket(), Vec::new())).collect()),
        }
    }

    /// A call for host number `host`, now.
    pub(crate) fn call(&self, host: usize) -> Answer {
        let now = Instant::now();
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((bucket, admitted)) = hosts.get_mut(host) else {
            // A host the bench did not offer: no bucket, refused for a
            // second.
            return Answer::TooMany(Duration::from_secs(1));
        };
        let rate = f64::from(PARTNER_RATE);
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(f64::from(PARTNER_BURST));
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            admitted.push(now);
            Answer::Admitted
        } else {
            // Until the next token, rounded up to whole seconds as an HTTP
            // `Retry-After` is.
            let wait = (1.0 - bucket.tokens) / rate;
            Answer::TooMany(Duration::from_secs(wait.ceil().max(1.0) as u64))
        }
    }

    /// The calls admitted so far, by host.
    pub(crate) fn admitted(&self) -> Vec<Vec<Instant>> {
        let hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        hosts.iter().map(|(_, admitted)| admitted.clone()).collect()
    }
}
