//! apalis-postgres 1 on the shared PostgreSQL server, set up as its
//! documentation shows: its own migrations (`PostgresStorage::setup`), one
//! `PostgresStorage` per queue, jobs pushed through apalis' `TaskSink`, a
//! worker woken by the storage's LISTEN/NOTIFY listener (`with_pubsub`,
//! with the periodic poll of its documentation as the fallback), with task
//! locking and result persistence on (its defaults), 100 job slots
//! (apalis' `concurrency` layer) and a fetch batch of as many jobs.
//!
//! Every job is one row of `apalis.jobs`; every push, fetch, lock and
//! result write is a transaction committed with `synchronous_commit = on`
//! (the server's setting). The producers and the worker have a connection
//! pool each, as a producing service and a worker process would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::layers::WorkerBuilderExt;
use apalis::layers::retry::backoff::{ExponentialBackoffMaker, MakeBackoff};
use apalis::layers::retry::{HasherRng, RetryPolicy};
use apalis_core::backend::TaskSink;
use apalis_core::backend::ext::BackendExt;
use apalis_core::backend::ext::poll_strategy::Strategy;
use apalis_core::worker::builder::WorkerBuilder;
use apalis_core::worker::context::WorkerContext;
use apalis_core::worker::event::Event;
use apalis_core::worker::ext::event_listener::EventListenerExt;
use apalis_postgres::{Config, PostgresStorage};
use sqlx_apalis::postgres::{PgPool, PgPoolOptions};
use tokio::task::JoinHandle;

use crate::load::{self, Attempt, Ledger, PeerJob, Retries, Tally};
use crate::side::{BoxError, Outcome, Promise, Row, Settings};

/// The worker's pool: its fetches, lock and result writes, heartbeats and
/// its LISTEN connection.
const WORKER_CONNECTIONS: u32 = 10;

/// Jobs per INSERT when a row fills its queue beforehand (apalis'
/// `push_bulk`: one multi-row INSERT).
const FILL_CHUNK: usize = 1_000;

/// The periodic poll of the storage's documented LISTEN/NOTIFY setup: it
/// only matters when a notification found nothing to fetch.
const FALLBACK_POLL: Duration = Duration::from_secs(5);

/// What apalis-postgres promises on each row.
pub(crate) fn promise(row: Row) -> Promise {
    match row {
        Row::Enqueue => Promise::Runs(
            "one INSERT per job into apalis.jobs, its own transaction, committed with \
             synchronous_commit = on; an insert trigger NOTIFYs the workers",
        ),
        Row::Completions => Promise::Runs(
            "fetch batch locked with FOR UPDATE SKIP LOCKED, a lock write per batch of \
             events, each result persisted (status Done) before the worker stops",
        ),
        Row::Latency => Promise::Runs(
            "LISTEN/NOTIFY wake-up (an insert trigger notifies, the worker fetches); \
             periodic poll every 5 s as the documented fallback",
        ),
        Row::Retry => Promise::Runs(
            "apalis' retry layer with a 1 s backoff: the wait is in worker memory while \
             the job's row stays locked by the worker (no storage-side delay: a failed \
             row is fetchable again at once)",
        ),
        Row::Memory => {
            Promise::Runs("one worker holding every job in flight, fetched in one batch")
        }
    }
}

/// Runs `row` against a fresh queue in the run's database.
pub(crate) async fn run(row: Row, settings: &Settings) -> Result<Outcome, BoxError> {
    let producers = u32::try_from(settings.producers.max(1)).unwrap_or(u32::MAX);
    let producer_pool = connect(&settings.postgres_url, producers).await?;
    let worker_pool = match connect(&settings.postgres_url, WORKER_CONNECTIONS).await {
        Ok(pool) => pool,
        Err(e) => {
            producer_pool.close().await;
            return Err(e);
        }
    };
    let side = Side {
        settings,
        producers: producer_pool,
        worker: worker_pool,
        queue: format!("peers-{}", uuid::Uuid::new_v4()),
    };
    let ran = side.run(row).await;
    side.producers.close().await;
    side.worker.close().await;
    ran
}

/// A pool of at most `connections` connections to `url`.
async fn connect(url: &str, connections: u32) -> Result<PgPool, BoxError> {
    PgPoolOptions::new()
        .max_connections(connections)
        .connect(url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}").into())
}

/// A worker started by [`Side::start_worker`]: its context (to stop it)
/// and the task running it.
struct Running {
    context: WorkerContext,
    task: JoinHandle<Result<(), BoxError>>,
}

impl Running {
    /// Stops the worker and waits until it has written its last results.
    async fn stop(self) -> Result<(), BoxError> {
        if self.context.is_running() {
            self.context
                .stop()
                .map_err(|e| format!("cannot stop the apalis worker: {e}"))?;
        }
        match tokio::time::timeout(Duration::from_secs(30), self.task).await {
            Ok(joined) => joined?,
            Err(_) => Err("the apalis worker did not stop within 30 s".into()),
        }
    }
}

/// One run: its settings, the producers' and the worker's pools, and the
/// queue it uses.
struct Side<'a> {
    settings: &'a Settings,
    producers: PgPool,
    worker: PgPool,
    queue: String,
}

impl Side<'_> {
    /// Runs `row` after the storage's migrations, then deletes the queue's
    /// jobs.
    async fn run(&self, row: Row) -> Result<Outcome, BoxError> {
        PostgresStorage::setup(&self.producers)
            .await
            .map_err(|e| format!("apalis-postgres migrations failed: {e}"))?;
        let ran = match row {
            Row::Enqueue => self.enqueue().await,
            Row::Completions => self.completions().await,
            Row::Latency => self.latency().await,
            Row::Retry => self.retry().await,
            Row::Memory => self.memory().await,
        };
        let cleared = sqlx_apalis::query("DELETE FROM apalis.jobs WHERE job_type = $1")
            .bind(&self.queue)
            .execute(&self.producers)
            .await;
        let outcome = ran?;
        cleared.map_err(|e| format!("cannot clear the queue's jobs: {e}"))?;
        Ok(outcome)
    }

    /// The longest a row's measured part may take before the run fails:
    /// a minute, and 50 ms a job (20 jobs/s).
    fn time_limit(&self) -> Duration {
        let jobs = u32::try_from(self.settings.jobs).unwrap_or(u32::MAX);
        Duration::from_secs(60)
            + Duration::from_millis(50).saturating_mul(jobs)
            + Duration::from_millis(self.settings.retry_delay_ms)
    }

    /// The queue's storage on `pool`, fetching `batch` jobs at a time.
    fn storage(&self, pool: &PgPool, batch: usize) -> PostgresStorage<PeerJob> {
        let config = Config::default()
            .queue(&self.queue)
            .batch_size(batch.max(1));
        PostgresStorage::new(pool).with_config(config)
    }

    /// Checks that every job of the run has `status` in `apalis.jobs`.
    async fn expect_all(&self, status: &str) -> Result<u64, BoxError> {
        let n: i64 = sqlx_apalis::query_scalar(
            "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 AND status = $2",
        )
        .bind(&self.queue)
        .bind(status)
        .fetch_one(&self.producers)
        .await
        .map_err(|e| format!("cannot count the queue's jobs: {e}"))?;
        let jobs = self.settings.jobs;
        if n != jobs as i64 {
            return Err(format!("{n} of {jobs} jobs are {status} in apalis.jobs").into());
        }
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Enqueues the whole run beforehand, `FILL_CHUNK` jobs per INSERT.
    async fn fill(&self) -> Result<(), BoxError> {
        let mut sink = self.storage(&self.producers, 1);
        for start in (0..self.settings.jobs).step_by(FILL_CHUNK) {
            let end = (start + FILL_CHUNK).min(self.settings.jobs);
            let jobs = (start..end)
                .map(|i| PeerJob::new(i, self.settings.payload_bytes))
                .collect();
            sink.push_bulk(jobs)
                .await
                .map_err(|e| format!("filling the queue failed: {e}"))?;
        }
        self.expect_all("Pending").await?;
        Ok(())
    }

    /// `producers` producers push every job, one `push` each.
    async fn enqueue(&self) -> Result<Outcome, BoxError> {
        let sink = self.storage(&self.producers, 1);
        let payload = self.settings.payload_bytes;
        let elapsed = load::closed_loop(self.settings.producers, self.settings.jobs, move |i| {
            let mut sink = sink.clone();
            async move {
                sink.push(PeerJob::new(i, payload))
                    .await
                    .map_err(|e| BoxError::from(format!("push failed: {e}")))
            }
        })
        .await?;
        Ok(Outcome {
            jobs: self.expect_all("Pending").await?,
            elapsed_secs: elapsed.as_secs_f64(),
            ..Outcome::default()
        })
    }

    /// A worker over the queue running `handler` with the run's slots,
    /// woken by LISTEN/NOTIFY; with `retry_delay`, apalis' retry layer runs
    /// a failed job once more after that delay. Each job it completes
    /// counts in `tally`.
    fn start_worker<H, Fut>(
        &self,
        retry_delay: Option<Duration>,
        tally: Arc<Tally>,
        handler: H,
    ) -> Result<Running, BoxError>
    where
        H: Fn(PeerJob) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let slots = self.settings.slots.max(1);
        let backend = self
            .storage(&self.worker, slots)
            .with_pubsub()
            .poll_with_strategy(Strategy::new().interval(FALLBACK_POLL));
        let context = WorkerContext::new(&format!("{}-worker", self.queue));
        let listener = move |_: &WorkerContext, event: &Event| {
            if let Event::Success(_) = event {
                tally.completed();
            }
        };
        let builder = WorkerBuilder::new(&context)
            .backend(backend)
            .on_event(listener);
        let task = match retry_delay {
            Some(delay) => {
                // A constant delay: an exponential backoff whose least and
                // greatest delays are both `delay`, without jitter.
                let backoff = ExponentialBackoffMaker::new(delay, delay, 0.0, HasherRng::default())
                    .map_err(|e| format!("invalid retry backoff: {e:?}"))?
                    .make_backoff();
                let worker = builder
                    .retry(RetryPolicy::retries(1).with_backoff(backoff))
                    .concurrency(slots)
                    .build(handler);
                tokio::spawn(async move { worker.run().await.map_err(worker_failed) })
            }
            None => {
                let worker = builder.concurrency(slots).build(handler);
                tokio::spawn(async move { worker.run().await.map_err(worker_failed) })
            }
        };
        Ok(Running { context, task })
    }

    /// Waits for `tally` within the row's limit, then stops the worker: the
    /// measured part ends once the worker wrote its last results.
    async fn drain(
        &self,
        started: Instant,
        tally: &Tally,
        worker: Running,
    ) -> Result<Duration, BoxError> {
        let waited = tally.wait_done(started, self.time_limit()).await;
        let stopped = worker.stop().await;
        let elapsed = started.elapsed();
        waited?;
        stopped?;
        Ok(elapsed)
    }

    /// A filled queue, then a worker with the run's slots and a no-op
    /// handler.
    async fn completions(&self) -> Result<Outcome, BoxError> {
        self.fill().await?;
        let tally = Tally::new(self.settings.jobs);
        let handler = |job: PeerJob| async move {
            std::hint::black_box(job);
            Ok(())
        };
        let started = Instant::now();
        let worker = self.start_worker(None, Arc::clone(&tally), handler)?;
        let elapsed = self.drain(started, &tally, worker).await?;
        Ok(Outcome {
            jobs: self.expect_all("Done").await?,
            elapsed_secs: elapsed.as_secs_f64(),
            ..Outcome::default()
        })
    }

    /// A running worker; producers push at the offered rate.
    async fn latency(&self) -> Result<Outcome, BoxError> {
        let rate = self
            .settings
            .rate
            .ok_or("the latency row needs an offered rate")?;
        let ledger = Ledger::new(self.settings.jobs);
        let tally = Tally::new(self.settings.jobs);
        let handler = {
            let ledger = Arc::clone(&ledger);
            move |job: PeerJob| {
                ledger.started(job.index);
                async move { Ok(()) }
            }
        };
        let worker = self.start_worker(None, Arc::clone(&tally), handler)?;
        // Lets the worker open its LISTEN connection before the first job.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let sink = self.storage(&self.producers, 1);
        let payload = self.settings.payload_bytes;
        let started = Instant::now();
        let offered = load::open_loop(rate, self.settings.jobs, &ledger, move |i| {
            let mut sink = sink.clone();
            async move {
                sink.push(PeerJob::new(i, payload))
                    .await
                    .map_err(|e| BoxError::from(format!("push failed: {e}")))
            }
        })
        .await;
        let elapsed = match offered {
            Ok(()) => self.drain(started, &tally, worker).await?,
            Err(e) => {
                let _ = worker.stop().await;
                return Err(e);
            }
        };
        Ok(Outcome {
            jobs: ledger.started_count() as u64,
            elapsed_secs: elapsed.as_secs_f64(),
            latencies_us: ledger.latencies_us(),
            ..Outcome::default()
        })
    }

    /// A filled queue; each job fails its first attempt and runs again
    /// after the retry delay.
    async fn retry(&self) -> Result<Outcome, BoxError> {
        self.fill().await?;
        let delay = Duration::from_millis(self.settings.retry_delay_ms);
        let retries = Retries::new(self.settings.jobs);
        let tally = Tally::new(self.settings.jobs);
        let handler = {
            let retries = Arc::clone(&retries);
            move |job: PeerJob| {
                let outcome = match retries.start(job.index) {
                    Attempt::First => {
                        retries.failed(job.index);
                        Err(BoxError::from("the first attempt fails"))
                    }
                    Attempt::Again => Ok(()),
                };
                async move { outcome }
            }
        };
        let started = Instant::now();
        let worker = self.start_worker(Some(delay), Arc::clone(&tally), handler)?;
        let elapsed = self.drain(started, &tally, worker).await?;
        let (lateness_us, early) = retries.lateness_us(delay);
        Ok(Outcome {
            jobs: self.expect_all("Done").await?,
            elapsed_secs: elapsed.as_secs_f64(),
            lateness_us,
            early,
            ..Outcome::default()
        })
    }

    /// A filled queue of large jobs; every handler waits until all have
    /// started, so that every job is in flight at once.
    async fn memory(&self) -> Result<Outcome, BoxError> {
        self.fill().await?;
        load::reset_peak_rss()?;
        let ledger = Ledger::new(self.settings.jobs);
        let tally = Tally::new(self.settings.jobs);
        let handler = {
            let ledger = Arc::clone(&ledger);
            move |job: PeerJob| {
                let ledger = Arc::clone(&ledger);
                async move {
                    ledger.started(job.index);
                    ledger.all_started().await;
                    std::hint::black_box(job);
                    Ok(())
                }
            }
        };
        let started = Instant::now();
        let worker = self.start_worker(None, Arc::clone(&tally), handler)?;
        let elapsed = self.drain(started, &tally, worker).await?;
        let peak_rss_kib = load::peak_rss_kib();
        Ok(Outcome {
            jobs: self.expect_all("Done").await?,
            elapsed_secs: elapsed.as_secs_f64(),
            peak_rss_kib,
            ..Outcome::default()
        })
    }
}

/// The error of a worker whose run failed.
fn worker_failed(e: impl std::fmt::Display) -> BoxError {
    format!("the apalis worker failed: {e}").into()
}
