//! A worker stack composed by hand from queuey's layers and tower's own
//! middleware, on the in-memory backend:
//!
//! ```sh
//! cargo run --example tower_stack
//! ```
//!
//! Outermost first: tracing, dead-lettering, retries, Retry-After
//! deferrals, a limit of two concurrent calls to the (slow) payment API, and
//! the worker's job timeout on each attempt. The timeout sits right around
//! the handler, inside the retry layer, so each attempt gets two seconds of
//! its own and a timed-out attempt is retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use queuey::JobHandler;
use queuey::layers::dead_letter::DeadLetterLayer;
use queuey::layers::trace::TraceLayer;
use queuey::prelude::*;
use queuey::retry::Backoff;
use queuey::retry::RetryPolicy;
use serde::{Deserialize, Serialize};
use tower::limit::ConcurrencyLimitLayer;

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "tower-stack")]
enum AppQueues {
    #[queue(prefetch = 32)]
    Payments,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Payments, name = "capture_payment")]
struct CapturePayment {
    order: u32,
}

/// A payment API that takes 100 ms per call and hangs on the first call for
/// order 3.
struct PaymentHandler {
    running: AtomicU32,
    peak: AtomicU32,
    started: Instant,
}

impl JobHandler for PaymentHandler {
    type Job = CapturePayment;

    async fn handle(&self, job: CapturePayment, ctx: JobContext) -> Result<(), JobError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let hang = job.order == 3 && ctx.attempt() == 1;
        let nap = if hang {
            Duration::from_secs(60)
        } else {
            Duration::from_millis(100)
        };
        tokio::time::sleep(nap).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        println!(
            "{:>5} ms  order {} captured on attempt {}",
            self.started.elapsed().as_millis(),
            job.order,
            ctx.attempt()
        );
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = Arc::new(MemoryBackend::new());
    let handler = Arc::new(PaymentHandler {
        running: AtomicU32::new(0),
        peak: AtomicU32::new(0),
        started: Instant::now(),
    });

    let policy = RetryPolicy::new(4, Backoff::fixed(Duration::from_millis(250))?)?;
    // A stack of our own instead of the default one: the worker adds only
    // the job timeout around the handler, inside these layers.
    let worker = Worker::<AppQueues, _>::builder(backend.clone())
        .handler_without_default_stack(
            Arc::clone(&handler),
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(DeadLetterLayer::new())
                .layer(RetryLayer::new(policy))
                .layer(DeferOn429.max_deferrals(10))
                .layer(ConcurrencyLimitLayer::new(2)),
        )
        .job_timeout(Duration::from_secs(2))
        .concurrency(8)
        .build()
        .await?;
    let handle = worker.handle();

    let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;
    let orders: Vec<CapturePayment> = (1..=6).map(|order| CapturePayment { order }).collect();
    for outcome in producer.enqueue_batch(&orders).await {
        outcome?;
    }

    // Six orders (seven deliveries: one's first attempt timed out).
    // The main loop: until Ctrl-C or SIGTERM, and, in this example, until
    // the payments are done. On either signal, jobs already running finish and
    // settle first; the rest stay on the broker.
    let all_done = {
        let handle = handle.clone();
        async move {
            while handle.jobs_finished() < 6 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let stop = async {
        tokio::select! {
            () = queuey::shutdown_signal() => {}
            () = all_done => {}
        }
    };
    tokio::time::timeout(Duration::from_secs(20), worker.run_until(stop))
        .await
        .map_err(|_| "the payments did not finish within 20 s")??;
    println!(
        "all captured; at most {} calls ran at once; {} dead letters",
        handler.peak.load(Ordering::SeqCst),
        backend.dead_letters(AppQueues::Payments.name()).len()
    );
    Ok(())
}
