//! Job results on the in-memory backend (no broker needed):
//!
//! ```sh
//! cargo run --example results
//! ```
//!
//! A caller waits for a job's output with `enqueue_and_wait`: one order is
//! priced at once, one after two failed attempts (the retries are not seen
//! by the caller), one is refused and dead-lettered (the caller gets the
//! reason), and one takes longer than its caller will wait. A large order
//! is watched with `enqueue_and_watch`: its handler reports how far it got,
//! and the caller prints each report before the answer. A job nobody
//! waits for (`enqueue`) costs nothing extra: its output is dropped. The
//! program prints each answer and exits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuey::prelude::*;
use queuey::producer::WaitError;
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "results")]
enum AppQueues {
    /// Pricing: three attempts, 200 ms apart.
    #[queue(retry(max_attempts = 3, backoff = "fixed", delay = "200ms"))]
    Pricing,
}

/// Prices an order; its handler answers with a [`Quote`].
#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Pricing, name = "price_order", output = Quote)]
struct PriceOrder {
    sku: String,
    quantity: u32,
    /// How many attempts fail before the price list answers.
    flaky_attempts: u32,
    /// How long pricing takes.
    takes_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Quote {
    cents: u64,
    attempt: u32,
}

struct Pricing;

impl JobHandler for Pricing {
    type Job = PriceOrder;

    async fn handle(&self, order: PriceOrder, ctx: JobContext) -> Result<Quote, JobError> {
        // Priced in four steps; each says how far it got (a report nobody
        // watches costs nothing).
        for step in 1..=4u8 {
            tokio::time::sleep(Duration::from_millis(order.takes_ms / 4)).await;
            ctx.progress(step * 25, &format!("priced {} of 4 price lists", step));
        }
        if order.quantity == 0 {
            return Err(JobError::fatal("an order of nothing has no price"));
        }
        if ctx.attempt() <= order.flaky_attempts {
            return Err(JobError::retryable("the price list is busy"));
        }
        Ok(Quote {
            cents: u64::from(order.quantity) * 1_250,
            attempt: ctx.attempt(),
        })
    }
}

fn order(sku: &str, quantity: u32, flaky_attempts: u32, takes_ms: u64) -> PriceOrder {
    PriceOrder {
        sku: sku.into(),
        quantity,
        flaky_attempts,
        takes_ms,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<AppQueues, _>::builder(backend.clone())
        .handler(Pricing)
        .build()
        .await?;
    let handle = worker.handle();
    let producer = Producer::<AppQueues, _>::new(backend.clone()).await?;

    // The callers: each waits for its own order's outcome, up to its
    // timeout. Nothing else bounds a wait: a job that outlives it goes on.
    let callers = tokio::spawn(async move {
        let orders = [
            (order("tea", 2, 0, 0), Duration::from_secs(5)),
            (order("coffee", 3, 2, 0), Duration::from_secs(5)),
            (order("nothing", 0, 0, 0), Duration::from_secs(5)),
            (order("slow-cake", 1, 0, 1_000), Duration::from_millis(300)),
        ];
        for (job, timeout) in orders {
            let sku = job.sku.clone();
            let answer = producer.enqueue_and_wait(&job, timeout).await;
            let at = started.elapsed().as_millis();
            match answer {
                Ok(quote) => println!(
                    "{at:>5} ms  {sku}: {} cents (attempt {})",
                    quote.cents, quote.attempt
                ),
                Err(WaitError::DeadLettered { reason, .. }) => {
                    println!("{at:>5} ms  {sku}: refused: {reason}")
                }
                Err(WaitError::TimedOut { timeout, .. }) => {
                    println!("{at:>5} ms  {sku}: no answer within {timeout:?} (the job goes on)")
                }
                Err(other) => println!("{at:>5} ms  {sku}: {other}"),
            }
        }
        // A large order, watched: its progress, then its quote.
        let mut watch = producer
            .enqueue_and_watch(&order("wedding-cake", 40, 0, 400), Duration::from_secs(5))
            .await?;
        while let Some(progress) = watch.progress().await {
            println!(
                "{:>5} ms  wedding-cake: {progress}",
                started.elapsed().as_millis()
            );
        }
        let quote = watch.output().await?;
        println!(
            "{:>5} ms  wedding-cake: {} cents (attempt {})",
            started.elapsed().as_millis(),
            quote.cents,
            quote.attempt
        );
        // Fire-and-forget stays the default: nobody waits, nothing is sent.
        producer.enqueue(&order("tea", 1, 0, 0)).await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    });

    // The main loop: the worker runs until Ctrl-C or SIGTERM, and, in this
    // example, until its six jobs are done.
    let all_done = {
        let handle = handle.clone();
        async move {
            while handle.jobs_finished() < 6 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let stop = async {
        tokio::select! {
            () = queuey::shutdown_signal() => {}
            () = all_done => {}
        }
    };
    tokio::time::timeout(Duration::from_secs(10), worker.run_until(stop))
        .await
        .map_err(|_| "the jobs did not finish within 10 s")??;
    callers.await?.map_err(|e| e.to_string())?;

    println!(
        "\n{} jobs finished, {} dead letter(s), {} ms",
        handle.jobs_finished(),
        backend.dead_letters(AppQueues::Pricing.name()).len(),
        started.elapsed().as_millis()
    );
    Ok(())
}
