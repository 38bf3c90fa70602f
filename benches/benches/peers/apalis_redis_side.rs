//! The apalis-redis 1 side, on the private redis-server of the run's AOF
//! variant, used as the crate's README shows: producers push through a
//! `RedisStorage` on a `ConnectionManager`, and a worker runs on the same
//! storage with apalis' defaults (task leases, heartbeats, results kept), a
//! tower concurrency limit for its slots, and a poll every 10 ms (see
//! [`POLL_INTERVAL`] and [`SteadyPolls`]). The Retry row leaves the retry to
//! the storage itself: a failed task goes back to its scheduled set in
//! Redis. Each run has a queue of its own; its keys are deleted at the end,
//! whatever happened.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use apalis_core::backend::TaskSink;
use apalis_core::backend::ext::BackendExt;
use apalis_core::backend::ext::poll_strategy::{PollSnapshot, PollStrategy};
use apalis_core::error::{BoxDynError, WorkerError};
use apalis_core::worker::builder::WorkerBuilder;
use apalis_redis::{Config, ConnectionManager, RedisStorage};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower::limit::ConcurrencyLimitLayer;

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
/// How often the worker polls (see [`SteadyPolls`]). apalis-redis 1.0 files
/// every push in its scheduled set, due at once, and publishes no wake-up
/// for it (so its pubsub-driven `RedisStorageFactory` would not wake a
/// worker either): a fetch, which promotes what is due, is how a worker
/// learns of new work, and how a failed task whose retry is due comes back.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The largest fetch batch: a batch of 1,000 jobs of 20 KB can outlast the
/// connection's 500 ms response timeout, which ends the worker.
const MAX_BATCH: usize = 100;
/// The sorted set where apalis-redis lists the queues its workers
/// registered on, outside any queue's keys.
const QUEUES_LIST: &str = "core:apalis:queues:list";

/// What apalis-redis promises on `row`.
pub fn promise(row: Row) -> Promise {
    match row {
        Row::Retry => Promise::Runs(
            "the storage puts a failed task back in its scheduled set in Redis, due at the \
             failure's whole second + the attempt number in seconds (not configurable), \
             found by the next 10 ms poll: a second start can come before failure + 1 s",
        ),
        Row::Enqueue | Row::Completions | Row::Latency | Row::Memory => Promise::Runs(
            "push acknowledged once its Lua script ran, kept as the server's AOF fsync keeps \
             it; tasks leased to a worker are re-enqueued when its heartbeats stop; the \
             worker finds new tasks by polling every 10 ms",
        ),
    }
}

/// Runs `row` with `settings` on a queue of its own, then deletes the
/// queue's keys, whatever happened.
pub async fn run(row: Row, settings: &Settings) -> Result<Outcome, BoxError> {
    let queue = format!("peer-apalis-{}", uuid::Uuid::new_v4().simple());
    let measured = measure(row, settings, &queue).await;
    let cleared = delete_queue(&settings.redis_url, &queue).await;
    let outcome = measured?;
    cleared?;
    Ok(outcome)
}

/// The queue's configuration: apalis' defaults, with a fetch batch as
/// large as the worker's slots up to [`MAX_BATCH`].
fn config(queue: &str, slots: usize) -> Config {
    Config::default()
        .queue(queue)
        .batch_size(slots.clamp(1, MAX_BATCH))
}

/// Pushes job `index` through the crate's own sink.
async fn push(
    conn: ConnectionManager,
    config: Config,
    index: usize,
    bytes: usize,
) -> Result<(), BoxError> {
    let mut storage = RedisStorage::<PeerJob>::new(conn).with_config(config);
    storage.push(PeerJob::new(index, bytes)).await?;
    Ok(())
}

/// Runs `row` on `queue`: the untimed backlog where the row has one, then
/// the measured part.
async fn measure(row: Row, settings: &Settings, queue: &str) -> Result<Outcome, BoxError> {
    let conn = apalis_redis::connect(settings.redis_url.as_str()).await?;
    let config = config(queue, settings.slots);
    let (jobs, bytes) = (settings.jobs, settings.payload_bytes);
    let enqueue = {
        let (conn, config) = (conn.clone(), config.clone());
        move |i: usize| push(conn.clone(), config.clone(), i, bytes)
    };
    if row == Row::Enqueue {
        // One push per producer first, not timed, so that the scripts are
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
    let mut worker = RunningWorker::start(settings, queue, Arc::clone(&probe)).await?;
    let worked = async {
        if row == Row::Latency {
            tokio::time::sleep(WARM_UP).await;
            let rate = settings.rate.ok_or("the Latency row needs a rate")?;
            open_loop(rate, jobs, &probe.ledger, move |i| {
                push(conn.clone(), config.clone(), i, bytes)
            })
            .await?;
        }
        worker.wait_done(&probe.tally, started).await
    }
    .await;
    let peak_rss_kib = peak_rss_kib();
    let stopped = worker.stop().await;
    worked?;
    stopped?;
    Ok(worker_outcome(
        row,
        started,
        Duration::from_millis(settings.retry_delay_ms),
        (&probe.tally, &probe.ledger, &probe.retries),
        peak_rss_kib,
    ))
}

/// The handler's shared state: it records each start, fails first attempts
/// in the Retry row, holds each job until all have started in the Memory
/// row, and counts completions.
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

    /// The task function.
    async fn handle(self: Arc<Self>, job: PeerJob) -> Result<(), BoxDynError> {
        let index = job.index;
        if index >= self.jobs {
            return Err(format!("job index {index} is out of the run's range").into());
        }
        self.ledger.started(index);
        match self.row {
            Row::Retry => {
                if self.retries.start(index) == Attempt::First {
                    self.retries.failed(index);
                    return Err("the first attempt fails".into());
                }
            }
            Row::Memory => self.ledger.all_started().await,
            Row::Enqueue | Row::Completions | Row::Latency => {}
        }
        std::hint::black_box(&job.pad);
        self.tally.completed();
        Ok(())
    }
}

/// An apalis worker running on its own task until told to stop.
struct RunningWorker {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), WorkerError>>,
    ended: bool,
}

impl RunningWorker {
    /// Starts a worker on `queue` with the run's slots.
    async fn start(settings: &Settings, queue: &str, probe: Arc<Probe>) -> Result<Self, BoxError> {
        let slots = settings.slots.max(1);
        let conn = apalis_redis::connect(settings.redis_url.as_str()).await?;
        let backend = RedisStorage::<PeerJob>::new(conn)
            .with_config(config(queue, slots))
            .poll_with_strategy(SteadyPolls { timer: None });
        let worker = WorkerBuilder::new(format!("{queue}-worker"))
            .backend(backend)
            .layer(ConcurrencyLimitLayer::new(slots))
            .build(move |job: PeerJob| Arc::clone(&probe).handle(job));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(worker.run_until(async move {
            // A dropped sender stops the worker as well.
            let _ = stopped.await;
            Ok::<(), WorkerError>(())
        }));
        Ok(Self {
            stop,
            task,
            ended: false,
        })
    }

    /// Waits until every job has completed, or fails if the worker ends
    /// first or the run's time runs out.
    async fn wait_done(&mut self, tally: &Tally, started: Instant) -> Result<(), BoxError> {
        tokio::select! {
            done = tally.wait_done(started, RUN_LIMIT) => done,
            ended = &mut self.task => {
                self.ended = true;
                Err(format!("the apalis worker stopped early: {:?}", ended?).into())
            }
        }
    }

    /// Stops the worker gracefully (it flushes its pending acknowledgements)
    /// and answers how it ended.
    async fn stop(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        if self.ended {
            return Ok(());
        }
        match tokio::time::timeout(STOP_LIMIT, self.task).await {
            Ok(joined) => Ok(joined??),
            Err(_) => Err("the apalis worker did not stop".into()),
        }
    }
}

/// Wakes the worker [`POLL_INTERVAL`] after each poll that finds no timer
/// running.
///
/// apalis' own interval and backoff strategies answer "poll now" once per
/// timer and arm the next timer only on the next poll; when that "poll now"
/// lands on a poll that only collects a fetch already in flight and comes
/// back empty, no timer is armed and the worker sleeps until its next
/// heartbeat, 30 s later. This strategy wakes the worker itself when its
/// timer fires, so that the next poll always arms the next timer.
struct SteadyPolls {
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl PollStrategy for SteadyPolls {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(POLL_INTERVAL)));
        match timer.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                self.timer = None;
                cx.waker().wake_by_ref();
                Poll::Ready(Some(()))
            }
        }
    }
}

/// Deletes every key of `queue`, and its entry in apalis' list of queues.
async fn delete_queue(url: &str, queue: &str) -> Result<(), BoxError> {
    let mut redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    redis::cmd("ZREM")
        .arg(QUEUES_LIST)
        .arg(Config::default().queue(queue).workers_set())
        .query_async::<()>(&mut redis)
        .await?;
    crate::redis_keys::delete_matching(&mut redis, &format!("{queue}:*")).await
}
