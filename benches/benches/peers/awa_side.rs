//! awa 0.6 on the shared PostgreSQL server, set up as its documentation
//! shows: its own migrations (`awa::model::migrations::run`), jobs inserted
//! with `awa::insert_with` (one committed INSERT each), and a `Client` with
//! one queue of 100 workers (`QueueConfig::max_workers`) on its default
//! engine (queue storage), whose dispatcher is woken by LISTEN/NOTIFY (its
//! default; the 200 ms poll is the fallback) and whose completions are
//! committed in batches before a job's slot is released.
//!
//! Every insert, claim and completion batch is a transaction committed
//! with `synchronous_commit = on` (the server's setting). The producers and
//! the client have a connection pool each, as awa's deployment guide
//! advises for a process that does both; the client's holds 10
//! connections, its starting point for a one-queue worker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use awa::{
    Client, InsertOpts, InsertParams, JobArgs, JobError, JobEvent, JobResult, JobState, QueueConfig,
};
use serde::{Deserialize, Serialize};
use sqlx_awa::postgres::{PgPool, PgPoolOptions};

use crate::load::{self, Attempt, Ledger, PeerJob, Retries, Tally};
use crate::side::{BoxError, Outcome, Promise, Row, Settings};

/// The queue every row uses: each run has a fresh database of its own.
const QUEUE: &str = "peers";

/// The client's pool: its dispatcher and LISTEN connection, completion
/// batches, heartbeats and maintenance.
const WORKER_CONNECTIONS: u32 = 10;

/// Jobs per INSERT when a row fills its queue beforehand (`insert_many`:
/// one multi-row INSERT).
const FILL_CHUNK: usize = 1_000;

/// The job as awa carries it: the benchmark's job under an awa kind.
#[derive(Debug, Serialize, Deserialize, JobArgs)]
#[serde(transparent)]
#[awa(kind = "peer_job")]
struct PeerTask(PeerJob);

/// What awa promises on each row.
pub(crate) fn promise(row: Row) -> Promise {
    match row {
        Row::Enqueue => Promise::Runs(
            "one INSERT per job (awa.insert_job_compat into its queue storage), committed \
             with synchronous_commit = on; the insert NOTIFYs the queue's dispatchers",
        ),
        Row::Completions => Promise::Runs(
            "claims in batches, each completion committed (batched) before the job's slot \
             is released; counted at awa's Completed event, which follows the commit",
        ),
        Row::Latency => Promise::Runs(
            "LISTEN/NOTIFY wake-up of the queue's dispatcher (its default), 200 ms poll as \
             the fallback",
        ),
        Row::Retry => Promise::Runs(
            "JobResult::RetryAfter(1 s): the job is rescheduled in the database (state \
             retryable, run_at = now + 1 s) and promoted by the maintenance leader \
             (every 250 ms by default)",
        ),
        Row::Memory => Promise::Runs("one client with as many workers as jobs in flight"),
    }
}

/// Runs `row` in the run's database, after awa's migrations.
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

/// Where every job goes.
fn opts() -> InsertOpts {
    InsertOpts {
        queue: QUEUE.to_owned(),
        ..InsertOpts::default()
    }
}

/// One run: its settings and the producers' and the client's pools.
struct Side<'a> {
    settings: &'a Settings,
    producers: PgPool,
    worker: PgPool,
}

impl Side<'_> {
    /// Runs `row` after awa's migrations and its queue storage's
    /// installation.
    async fn run(&self, row: Row) -> Result<Outcome, BoxError> {
        awa::model::migrations::run(&self.producers)
            .await
            .map_err(|e| format!("awa migrations failed: {e}"))?;
        self.install_queue_storage().await?;
        match row {
            Row::Enqueue => self.enqueue().await,
            Row::Completions => self.completions().await,
            Row::Latency => self.latency().await,
            Row::Retry => self.retry().await,
            Row::Memory => self.memory().await,
        }
    }

    /// The longest a row's measured part may take before the run fails:
    /// a minute, and 50 ms a job (20 jobs/s).
    fn time_limit(&self) -> Duration {
        let jobs = u32::try_from(self.settings.jobs).unwrap_or(u32::MAX);
        Duration::from_secs(60)
            + Duration::from_millis(50).saturating_mul(jobs)
            + Duration::from_millis(self.settings.retry_delay_ms)
    }

    /// Moves the fresh database onto awa's queue storage engine the way a
    /// new installation gets there: the first client to start installs it
    /// (while no job exists yet); that client then stops without having
    /// run a job. Jobs inserted before would stay on the compatibility
    /// tables, and a client would then run them there.
    async fn install_queue_storage(&self) -> Result<(), BoxError> {
        let client = Client::builder(self.worker.clone())
            .queue(QUEUE, QueueConfig::default())
            .register::<PeerTask, _, _>(|_, _| std::future::ready(Ok(JobResult::Completed)))
            .build()
            .map_err(|e| format!("cannot build the awa client: {e}"))?;
        let started = client.start().await;
        client.shutdown(Duration::from_secs(5)).await;
        started.map_err(|e| format!("cannot start the awa client: {e}"))?;
        let status = awa::model::storage::status(&self.producers)
            .await
            .map_err(|e| format!("cannot read awa's storage status: {e}"))?;
        if status.active_engine != "queue_storage" {
            return Err(format!(
                "awa's storage engine is {} ({}), not queue_storage",
                status.active_engine, status.state
            )
            .into());
        }
        Ok(())
    }

    /// Checks that every job of the run is in `state`, as awa's admin view
    /// counts them.
    async fn expect_all(&self, state: JobState) -> Result<u64, BoxError> {
        let counts: HashMap<JobState, i64> = awa::admin::state_counts(&self.producers)
            .await
            .map_err(|e| format!("cannot count awa's jobs: {e}"))?;
        let n = counts.get(&state).copied().unwrap_or(0);
        let jobs = self.settings.jobs;
        if n != jobs as i64 {
            return Err(format!("{n} of {jobs} jobs are {state} in awa ({counts:?})").into());
        }
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Checks that no job of the run is left to run or has failed, as
    /// awa's admin view counts them. The completions themselves are the
    /// Completed events: the view's completed count reads terminal rows
    /// of rotating partitions and can fall short of them.
    async fn expect_drained(&self) -> Result<(), BoxError> {
        let counts: HashMap<JobState, i64> = awa::admin::state_counts(&self.producers)
            .await
            .map_err(|e| format!("cannot count awa's jobs: {e}"))?;
        let left: i64 = [
            JobState::Scheduled,
            JobState::Available,
            JobState::Running,
            JobState::Retryable,
            JobState::WaitingExternal,
            JobState::Failed,
            JobState::Cancelled,
        ]
        .iter()
        .filter_map(|state| counts.get(state))
        .sum();
        if left != 0 {
            return Err(format!("{left} jobs did not complete in awa ({counts:?})").into());
        }
        Ok(())
    }

    /// Enqueues the whole run beforehand, `FILL_CHUNK` jobs per INSERT.
    async fn fill(&self) -> Result<(), BoxError> {
        for start in (0..self.settings.jobs).step_by(FILL_CHUNK) {
            let end = (start + FILL_CHUNK).min(self.settings.jobs);
            let jobs = (start..end)
                .map(|i| {
                    let job = PeerTask(PeerJob::new(i, self.settings.payload_bytes));
                    Ok(InsertParams {
                        kind: PeerTask::kind().to_owned(),
                        args: serde_json::to_value(job)?,
                        opts: opts(),
                    })
                })
                .collect::<Result<Vec<_>, serde_json::Error>>()?;
            awa::insert_many(&self.producers, &jobs)
                .await
                .map_err(|e| format!("filling the queue failed: {e}"))?;
        }
        self.expect_all(JobState::Available).await?;
        Ok(())
    }

    /// `producers` producers insert every job, one `insert_with` each.
    async fn enqueue(&self) -> Result<Outcome, BoxError> {
        let payload = self.settings.payload_bytes;
        let pool = self.producers.clone();
        let elapsed = load::closed_loop(self.settings.producers, self.settings.jobs, move |i| {
            let pool = pool.clone();
            async move {
                awa::insert_with(&pool, &PeerTask(PeerJob::new(i, payload)), opts())
                    .await
                    .map(drop)
                    .map_err(|e| BoxError::from(format!("insert failed: {e}")))
            }
        })
        .await?;
        Ok(Outcome {
            jobs: self.expect_all(JobState::Available).await?,
            elapsed_secs: elapsed.as_secs_f64(),
            ..Outcome::default()
        })
    }

    /// A started client with the run's slots as the queue's workers,
    /// running `handler`; every Completed event counts in `tally`.
    async fn start_client<H, Fut>(&self, tally: Arc<Tally>, handler: H) -> Result<Client, BoxError>
    where
        H: Fn(PeerJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JobResult, JobError>> + Send + 'static,
    {
        let config = QueueConfig {
            max_workers: u32::try_from(self.settings.slots.max(1)).unwrap_or(u32::MAX),
            ..QueueConfig::default()
        };
        let client = Client::builder(self.worker.clone())
            .queue(QUEUE, config)
            .register::<PeerTask, _, _>(move |job, _ctx| handler(job.0))
            .on_event::<PeerTask, _, _>(move |event| {
                if let JobEvent::Completed { .. } = event {
                    tally.completed();
                }
                std::future::ready(())
            })
            .build()
            .map_err(|e| format!("cannot build the awa client: {e}"))?;
        client
            .start()
            .await
            .map_err(|e| format!("cannot start the awa client: {e}"))?;
        Ok(client)
    }

    /// Waits for `tally` within the row's limit, then shuts the client
    /// down; the measured part ends at the last Completed event.
    async fn drain(
        &self,
        started: Instant,
        tally: &Tally,
        client: &Client,
    ) -> Result<Duration, BoxError> {
        let waited = tally.wait_done(started, self.time_limit()).await;
        let elapsed = tally.elapsed_since(started);
        client.shutdown(Duration::from_secs(30)).await;
        waited?;
        Ok(elapsed)
    }

    /// A filled queue, then a client with the run's slots and a no-op
    /// handler.
    async fn completions(&self) -> Result<Outcome, BoxError> {
        self.fill().await?;
        let tally = Tally::new(self.settings.jobs);
        let handler = |job: PeerJob| {
            std::hint::black_box(job);
            std::future::ready(Ok(JobResult::Completed))
        };
        let started = Instant::now();
        let client = self.start_client(Arc::clone(&tally), handler).await?;
        let elapsed = self.drain(started, &tally, &client).await?;
        self.expect_drained().await?;
        Ok(Outcome {
            jobs: tally.count() as u64,
            elapsed_secs: elapsed.as_secs_f64(),
            ..Outcome::default()
        })
    }

    /// A running client; producers insert at the offered rate.
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
                std::future::ready(Ok(JobResult::Completed))
            }
        };
        let client = self.start_client(Arc::clone(&tally), handler).await?;
        // Lets the dispatcher open its LISTEN connection before the first job.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let payload = self.settings.payload_bytes;
        let started = Instant::now();
        let pool = self.producers.clone();
        let offered = load::open_loop(rate, self.settings.jobs, &ledger, move |i| {
            let pool = pool.clone();
            async move {
                awa::insert_with(&pool, &PeerTask(PeerJob::new(i, payload)), opts())
                    .await
                    .map(drop)
                    .map_err(|e| BoxError::from(format!("insert failed: {e}")))
            }
        })
        .await;
        let elapsed = match offered {
            Ok(()) => self.drain(started, &tally, &client).await?,
            Err(e) => {
                client.shutdown(Duration::from_secs(30)).await;
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

    /// A filled queue; each job asks for a retry after the delay on its
    /// first attempt and completes on its second.
    async fn retry(&self) -> Result<Outcome, BoxError> {
        self.fill().await?;
        let delay = Duration::from_millis(self.settings.retry_delay_ms);
        let retries = Retries::new(self.settings.jobs);
        let tally = Tally::new(self.settings.jobs);
        let handler = {
            let retries = Arc::clone(&retries);
            move |job: PeerJob| {
                let result = match retries.start(job.index) {
                    Attempt::First => {
                        retries.failed(job.index);
                        JobResult::RetryAfter(delay)
                    }
                    Attempt::Again => JobResult::Completed,
                };
                std::future::ready(Ok(result))
            }
        };
        let started = Instant::now();
        let client = self.start_client(Arc::clone(&tally), handler).await?;
        let elapsed = self.drain(started, &tally, &client).await?;
        self.expect_drained().await?;
        let (lateness_us, early) = retries.lateness_us(delay);
        Ok(Outcome {
            jobs: tally.count() as u64,
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
                    Ok(JobResult::Completed)
                }
            }
        };
        let started = Instant::now();
        let client = self.start_client(Arc::clone(&tally), handler).await?;
        let elapsed = self.drain(started, &tally, &client).await?;
        self.expect_drained().await?;
        let peak_rss_kib = load::peak_rss_kib();
        Ok(Outcome {
            jobs: tally.count() as u64,
            elapsed_secs: elapsed.as_secs_f64(),
            peak_rss_kib,
            ..Outcome::default()
        })
    }
}
