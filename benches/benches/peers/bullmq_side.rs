//! The side of BullMQ's official Rust port (bullmq-official 1.4), on the
//! private redis-server of the run's AOF variant, used as its README shows:
//! producers call `Queue::add`, a `Worker` with `concurrency` set to the
//! run's slots processes, everything else at its defaults (job locks
//! renewed while a job runs, stalled-job checks, finished jobs kept) except
//! a drain delay of 1 s (see [`DRAIN_DELAY`]). The Retry row gives every job
//! two attempts with a fixed backoff of the run's delay: BullMQ parks the
//! failed job in its delayed set in Redis. Each run has a key prefix of its
//! own; its keys are deleted at the end, whatever happened.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bullmq::options::RedisConnectionOptions;
use bullmq::types::BackoffStrategy;
use bullmq::worker::CancellationToken;
use bullmq::{Job, JobOptions, Queue, QueueOptions, Worker, WorkerOptions};
use serde::Deserialize;

use crate::load::{
    Attempt, Ledger, PeerJob, Retries, Tally, closed_loop, open_loop, peak_rss_kib, reset_peak_rss,
    worker_outcome,
};
use crate::side::{BoxError, Outcome, Promise, Row, Settings};

/// The longest any wait of a run may take.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// How long stopping the worker may wait for the jobs it runs (they only
/// outlast a run that failed, such as a Memory run whose jobs did not all
/// start).
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// How long the Latency row lets the worker start consuming before the
/// first enqueue.
const WARM_UP: Duration = Duration::from_secs(1);
/// How long an idle worker blocks on its queue's marker before it looks
/// again (the default is 5 s). A new job wakes it at once either way; this
/// only bounds how long closing the worker waits for that blocked call.
const DRAIN_DELAY: Duration = Duration::from_secs(1);
/// The queue's name, under the run's prefix.
const QUEUE: &str = "peers";

/// What BullMQ promises on `row`.
pub fn promise(row: Row) -> Promise {
    match row {
        Row::Retry => Promise::Runs(
            "two attempts with a fixed backoff: the failed job waits in the delayed sorted set \
             in Redis until failure + delay in whole milliseconds (the failure's clock reading \
             is truncated and a due job is promoted within its millisecond, so a second start \
             can come up to about 2 ms early)",
        ),
        Row::Enqueue | Row::Completions | Row::Latency | Row::Memory => Promise::Runs(
            "add acknowledged once its Lua script ran, kept as the server's AOF fsync keeps it; \
             a running job holds a lock the worker renews, and the stalled-job check moves it \
             back to wait when the lock expires",
        ),
    }
}

/// Runs `row` with `settings` under a key prefix of its own, then deletes
/// the prefix's keys, whatever happened.
pub async fn run(row: Row, settings: &Settings) -> Result<Outcome, BoxError> {
    let prefix = format!("peer-bullmq-{}", uuid::Uuid::new_v4().simple());
    let measured = measure(row, settings, &prefix).await;
    let cleared = delete_prefix(&settings.redis_url, &prefix).await;
    let outcome = measured?;
    cleared?;
    Ok(outcome)
}

/// How the run connects to its redis-server.
fn connection(settings: &Settings) -> RedisConnectionOptions {
    RedisConnectionOptions::new().url(settings.redis_url.as_str())
}

/// Runs `row` on a queue under `prefix`, whose jobs get two attempts in the
/// Retry row, and closes the queue's connection after.
async fn measure(row: Row, settings: &Settings, prefix: &str) -> Result<Outcome, BoxError> {
    let defaults = match row {
        Row::Retry => JobOptions::new()
            .attempts(2)
            .backoff(BackoffStrategy::Fixed(settings.retry_delay_ms)),
        _ => JobOptions::new(),
    };
    let options = QueueOptions::new()
        .connection(connection(settings))
        .prefix(prefix)
        .default_job_options(defaults);
    let queue = Arc::new(Queue::with_options(QUEUE, options).await?);
    let measured = measure_on(row, settings, prefix, &queue).await;
    queue.close().await;
    measured
}

/// Runs `row` on `queue`: the untimed backlog where the row has one, then
/// the measured part.
async fn measure_on(
    row: Row,
    settings: &Settings,
    prefix: &str,
    queue: &Arc<Queue>,
) -> Result<Outcome, BoxError> {
    let (jobs, bytes) = (settings.jobs, settings.payload_bytes);
    let enqueue = {
        let queue = Arc::clone(queue);
        move |i: usize| {
            let queue = Arc::clone(&queue);
            async move {
                queue.add("peer", PeerJob::new(i, bytes)).await?;
                Ok::<(), BoxError>(())
            }
        }
    };
    if row == Row::Enqueue {
        // One add per producer first, not timed, so that the scripts are
        // loaded when the clock starts.
        closed_loop(settings.producers, settings.producers, enqueue.clone()).await?;
        let elapsed = closed_loop(settings.producers, jobs, enqueue).await?;
        return Ok(Outcome::enqueued(jobs, elapsed));
    }
    if row != Row::Latency {
        closed_loop(settings.producers, jobs, enqueue).await?;
    }
    if row == Row::Memory {
        reset_peak_rss()?;
    }
    let probe = Probe::new(row, jobs);
    let started = Instant::now();
    let worker = start_worker(settings, prefix, Arc::clone(&probe)).await?;
    let worked = async {
        if row == Row::Latency {
            tokio::time::sleep(WARM_UP).await;
            let rate = settings.rate.ok_or("the Latency row needs a rate")?;
            let queue = Arc::clone(queue);
            open_loop(rate, jobs, &probe.ledger, move |i| {
                let queue = Arc::clone(&queue);
                async move {
                    queue.add("peer", PeerJob::new(i, bytes)).await?;
                    Ok(())
                }
            })
            .await?;
        }
        probe.tally.wait_done(started, RUN_LIMIT).await
    }
    .await;
    let peak_rss_kib = peak_rss_kib();
    let closed = worker.close(STOP_LIMIT.as_millis() as u64).await;
    worked?;
    closed?;
    Ok(worker_outcome(
        row,
        started,
        Duration::from_millis(settings.retry_delay_ms),
        (&probe.tally, &probe.ledger, &probe.retries),
        peak_rss_kib,
    ))
}

/// Starts a worker on the run's queue with the run's slots; it processes
/// from the moment it is built.
async fn start_worker(
    settings: &Settings,
    prefix: &str,
    probe: Arc<Probe>,
) -> Result<Worker, BoxError> {
    let options = WorkerOptions::new()
        .connection(connection(settings))
        .prefix(prefix)
        .concurrency(settings.slots.max(1))
        .drain_delay(DRAIN_DELAY);
    let processor = move |job: Job, _cancel: CancellationToken| Arc::clone(&probe).handle(job);
    Ok(Worker::with_options(QUEUE, processor, options).await?)
}

/// The processor's shared state: it records each start, fails first
/// attempts in the Retry row, holds each job until all have started in the
/// Memory row, and counts completions.
struct Probe {
    row: Row,
    jobs: usize,
    ledger: Arc<Ledger>,
    retries: Arc<Retries>,
    tally: Arc<Tally>,
}

impl Probe {
    fn new(row: Row, jobs: usize) -> Arc<Self> {
        Arc::new(Self {
            row,
            jobs,
            ledger: Ledger::new(jobs),
            retries: Retries::new(jobs),
            tally: Tally::new(jobs),
        })
    }

    /// The processor.
    async fn handle(self: Arc<Self>, job: Job) -> Result<serde_json::Value, bullmq::Error> {
        let job = PeerJob::deserialize(job.data())?;
        let index = job.index;
        if index >= self.jobs {
            return Err(bullmq::Error::Unrecoverable(format!(
                "job index {index} is out of the run's range"
            )));
        }
        self.ledger.started(index);
        match self.row {
            Row::Retry => {
                if self.retries.start(index) == Attempt::First {
                    self.retries.failed(index);
                    return Err(bullmq::Error::ProcessingError(
                        "the first attempt fails".into(),
                    ));
                }
            }
            Row::Memory => self.ledger.all_started().await,
            Row::Enqueue | Row::Completions | Row::Latency => {}
        }
        std::hint::black_box(&job.pad);
        self.tally.completed();
        Ok(serde_json::Value::Null)
    }
}

/// Deletes every key under `prefix`.
async fn delete_prefix(url: &str, prefix: &str) -> Result<(), BoxError> {
    let mut redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    crate::redis_keys::delete_matching(&mut redis, &format!("{prefix}:*")).await
}
