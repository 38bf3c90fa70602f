//! What the workers of a mode did, counted as it happens: every delivery
//! (by the outermost layer given with the handler, [`CountDeliveries`]),
//! every start of the handler with when its job was enqueued, every job
//! finished and every `429` the partner answered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use tower::{Layer, Service};

/// A start of the handler: when, and how long after its enqueue (µs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start {
    pub(crate) at: Instant,
    pub(crate) waited_us: u64,
}

/// The counts of one mode, shared by its workers.
#[derive(Debug)]
pub(crate) struct Tally {
    deliveries: AtomicU64,
    finished: AtomicU64,
    refused: AtomicU64,
    /// By host number.
    starts: Mutex<Vec<Vec<Start>>>,
    /// When each `429` was answered.
    refusals: Mutex<Vec<Instant>>,
}

/// The counters at one instant.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counts {
    /// Deliveries that reached the handler's layers.
    pub(crate) deliveries: u64,
    /// Jobs whose handler returned `Ok`.
    pub(crate) finished: u64,
    /// `429`s the partner answered.
    pub(crate) refused: u64,
}

impl Tally {
    pub(crate) fn new(hosts: usize) -> Tally {
        Tally {
            deliveries: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            starts: Mutex::new(vec![Vec::new(); hosts]),
            refusals: Mutex::new(Vec::new()),
        }
    }

    /// The handler started a job of host number `host` sent at `sent_us`.
    pub(crate) fn start(&self, host: usize, sent_us: u64) {
        let start = Start {
            at: Instant::now(),
            waited_us: crate::queue::now_micros().saturating_sub(sent_us),
        };
        let mut starts = self.starts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(host) = starts.get_mut(host) {
            host.push(start);
        }
    }

    pub(crate) fn finished(&self) {
        self.finished.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Instant::now());
    }

    /// The counters now.
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            deliveries: self.deliveries.load(Ordering::Relaxed),
            finished: self.finished.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }

    /// When each `429` so far was answered.
    pub(crate) fn refusals(&self) -> Vec<Instant> {
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The starts so far, by host.
    pub(crate) fn starts(&self) -> Vec<Vec<Start>> {
        self.starts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Counts every delivery that reaches it: given outermost with the
/// handler, outside the cool-down and the job type's limit, it sees each
/// delivery of a job, whether it then waits, cools down or runs.
#[derive(Debug, Clone)]
pub(crate) struct CountDeliveries(pub(crate) Arc<Tally>);

impl<S> Layer<S> for CountDeliveries {
    type Service = Counting<S>;

    fn layer(&self, inner: S) -> Counting<S> {
        Counting {
            inner,
            tally: Arc::clone(&self.0),
        }
    }
}

/// The service [`CountDeliveries`] makes.
#[derive(Debug, Clone)]
pub(crate) struct Counting<S> {
    inner: S,
    tally: Arc<Tally>,
}

impl<S, R> Service<R> for Counting<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.tally.deliveries.fetch_add(1, Ordering::Relaxed);
        self.inner.call(request)
    }
}
