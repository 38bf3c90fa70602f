// The longest wait a hold accepts, 24 days, is the longest backoff the
// derive takes; the policy it builds is exactly the one the core
// constructors build (no silent fallback).
use std::time::Duration;

use queuey_core::{Backoff, LONGEST_WAIT, Queues, RetryPolicy};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum Edges {
    #[queue(retry(max = "24d"))]
    Exponential,
    #[queue(retry(backoff = "fixed", delay = "24d"))]
    Fixed,
}

fn main() {
    assert_eq!(LONGEST_WAIT, Duration::from_secs(24 * 24 * 3600));
    let exponential = Backoff::exponential(Duration::from_secs(1), 2.0, LONGEST_WAIT).unwrap();
    assert_eq!(
        Edges::Exponential.config().settings().retry(),
        Some(&RetryPolicy::new(5, exponential).unwrap())
    );
    let fixed = Backoff::fixed(LONGEST_WAIT).unwrap();
    assert_eq!(
        Edges::Fixed.config().settings().retry(),
        Some(&RetryPolicy::new(5, fixed).unwrap())
    );
}
