//! A worker process of the fleet: the bench binary started again by the
//! parent with [`CHILD`] set. It runs one `Worker` on the run's queue and
//! reports on its stdout (see [`protocol`](crate::protocol)) until the
//! parent closes its stdin.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::protocol::Report;
use crate::queue::{self, FairJob, FairQueues};
use crate::{BenchResult, Settings};

/// Set to the worker's index: this process is a worker of the fleet.
pub(crate) const CHILD: &str = "QUEUEY_BENCH_FAIR_CHILD";
/// The run's queue name.
pub(crate) const QUEUE: &str = "QUEUEY_BENCH_FAIR_QUEUE";
/// The tenants' weights: `tenant=weight,...` (others weigh 1).
pub(crate) const WEIGHTS: &str = "QUEUEY_BENCH_FAIR_WEIGHTS";

/// What a worker process runs with.
#[derive(Debug)]
pub(crate) struct Spec {
    index: usize,
    queue: String,
    weights: HashMap<String, u32>,
    settings: Settings,
}

impl Spec {
    /// The spec from the environment the parent gave.
    pub(crate) fn read(index: &str) -> Result<Spec, String> {
        let index = index
            .parse()
            .map_err(|_| format!("{CHILD} must be an index, got `{index}`"))?;
        let queue = std::env::var(QUEUE).map_err(|_| format!("{QUEUE} is not set"))?;
        let weights = std::env::var(WEIGHTS).unwrap_or_default();
        let weights = weights
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (tenant, weight) = pair.split_once('=')?;
                Some((tenant.to_owned(), weight.parse().ok()?))
            })
            .collect::<Option<HashMap<String, u32>>>()
            .ok_or_else(|| format!("{WEIGHTS} must read `tenant=weight,...`, got `{weights}`"))?;
        Ok(Spec {
            index,
            queue,
            weights,
            settings: Settings::read()?,
        })
    }
}

/// Runs the worker until the parent closes this process's stdin.
pub(crate) async fn run(spec: Spec) -> BenchResult<()> {
    let settings = &spec.settings;
    queue::init(&spec.queue, settings.shards, settings.prefetch())?;
    let options = RabbitMqOptions::default()
        .connection_name(format!("{}-worker-{}", spec.queue, spec.index))
        .control_stream(queue::control_stream());
    let backend = Arc::new(RabbitMqBackend::with_options(settings.url.as_str(), options).await?);
    let starts = Arc::new(Starts::default());
    let counting = Arc::clone(&starts);
    let weights = spec.weights;
    let worker = Worker::<FairQueues, _>::builder(Arc::clone(&backend))
        .concurrency(settings.slots)
        .tenant_weights(move |tenant| weights.get(tenant).copied().unwrap_or(1))
        // Short enough that every prefetched job fits under the broker's
        // consumer timeout; the jobs take milliseconds.
        .job_timeout(Duration::from_secs(10))
        .shutdown_timeout(Duration::from_secs(5))
        .handler(handler_fn(move |job: FairJob, _ctx: JobContext| {
            counting.start(&job);
            async move {
                tokio::time::sleep(Duration::from_millis(job.work_ms)).await;
                Ok::<_, JobError>(())
            }
        }))
        .build()
        .await?;
    let handle = worker.handle();
    let mut running = tokio::spawn(worker.run());
    say(&Report::Ready);
    let reporting = tokio::spawn(report_each_second(Arc::clone(&starts)));
    let ended = tokio::select! {
        _ = stdin_closed() => None,
        ended = &mut running => Some(ended),
    };
    handle.shutdown();
    let ended = match ended {
        Some(ended) => ended,
        None => tokio::time::timeout(Duration::from_secs(30), running)
            .await
            .map_err(|_| "the worker did not stop within 30 s")?,
    };
    reporting.abort();
    starts.send(u64::MAX);
    backend.close().await?;
    ended??;
    Ok(())
}

/// Jobs started, by second of the wall clock and tenant, not sent yet.
#[derive(Debug, Default)]
struct Starts(Mutex<HashMap<(u64, String), u64>>);

impl Starts {
    /// Counts a start; a timed job's wait is reported at once.
    fn start(&self, job: &FairJob) {
        let now = queue::now_micros();
        if let Some(probe) = job.probe {
            say(&Report::Late {
                trial: probe.trial,
                micros: now.saturating_sub(probe.sent_us),
            });
        }
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *counts
            .entry((now / 1_000_000, job.tenant.clone()))
            .or_default() += 1;
    }

    /// Sends the counts of every second before `second`.
    fn send(&self, second: u64) {
        let done: Vec<((u64, String), u64)> = {
            let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<(u64, String)> = counts
                .keys()
                .filter(|(s, _)| *s < second)
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|k| counts.remove_entry(&k))
                .collect()
        };
        let mut by_second: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
        for ((second, tenant), n) in done {
            by_second.entry(second).or_default().push((tenant, n));
        }
        for (second, starts) in by_second {
            say(&Report::Second { second, starts });
        }
    }
}

/// Sends each second's counts a quarter of a second after it ends.
async fn report_each_second(starts: Arc<Starts>) {
    loop {
        let into_second = queue::now_micros() % 1_000_000;
        let wait = 1_250_000 - into_second;
        tokio::time::sleep(Duration::from_micros(wait)).await;
        starts.send(queue::now_micros() / 1_000_000);
    }
}

/// Writes a report line; a parent that went away is noticed by its stdin.
fn say(report: &Report) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", report.line());
    let _ = out.flush();
}

/// Resolves when stdin reaches its end (the parent closed it or exited).
/// Read on a thread of its own, outside the runtime, so that a worker that
/// fails first does not wait for it.
async fn stdin_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.await;
}
