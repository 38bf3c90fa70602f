//! The queuey side: `Producer::enqueue` and a `Worker` with the default
//! stack on a `RabbitMqBackend`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use queuey::backend::hold_delay_ms;
use queuey::job::Unique;
use queuey::layers::idempotency::IdempotencyLayer;
use queuey::layers::limit::{JobKey, LimitLayer};
use queuey::prelude::*;
use queuey::queue::QueueConfig;
use queuey::rabbitmq::{HoldQueues, RabbitMqBackend, RabbitMqOptions};
use queuey::store::RedisStore;
use queuey::worker::WorkerHandle;
use queuey::{EnqueueOptions, JobHandler};
use serde::{Deserialize, Serialize};
use tokio::sync::Barrier;

use crate::broker::{Broker, PAYLOAD_BYTES, listed};
use crate::{BenchResult, Measured, RUN_TIMEOUT, Stopwatch};

/// The benchmark's queue set: one queue, given a fresh name before every
/// run.
///
/// Queue names in queuey are static on purpose (a queue set is a type), but
/// every run here needs a queue of its own, so this set is written by hand
/// and reads its name and prefetch from [`CURRENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BenchQueues {
    Work,
}

/// The queue of the current run.
#[derive(Debug, Clone, Copy)]
struct CurrentQueue {
    name: &'static str,
    prefetch: u16,
    /// queuey's default ten priority levels, or none.
    priorities: bool,
}

static CURRENT: RwLock<CurrentQueue> = RwLock::new(CurrentQueue {
    name: "queuey-bench.unset",
    prefetch: 1,
    priorities: true,
});

impl Queues for BenchQueues {
    const ALL: &'static [Self] = &[BenchQueues::Work];

    fn name(&self) -> &'static str {
        current().name
    }

    fn config(&self) -> QueueConfig {
        let queue = current();
        let config = QueueConfig::new(queue.name).prefetch(queue.prefetch);
        if queue.priorities {
            config
        } else {
            config.max_priority(0)
        }
    }
}

fn current() -> CurrentQueue {
    *CURRENT.read().unwrap_or_else(|p| p.into_inner())
}

/// Points [`BenchQueues::Work`] at `name`. The name is leaked: a `Queues`
/// name lives for the whole program, and a benchmark process makes a few
/// dozen of them.
fn use_queue(name: &str, prefetch: u16, priorities: bool) {
    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
    *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = CurrentQueue {
        name,
        prefetch,
        priorities,
    };
}

/// The backoff of [`BenchJob`]'s retry (its `delay` below).
const RETRY_DELAY: Duration = Duration::from_millis(1);

/// The job: a body that makes its JSON payload [`PAYLOAD_BYTES`] long. It
/// fails its first attempt only in the retry run, and then comes back after
/// a fixed 1 ms backoff ([`RETRY_DELAY`]), rounded up to the backend's
/// `retry_granularity`.
#[derive(Job, Serialize, Deserialize, Clone)]
#[job(
    queue = BenchQueues::Work,
    name = "bench_noop",
    retry(max_attempts = 2, backoff = "fixed", delay = "1ms")
)]
pub(crate) struct BenchJob {
    body: String,
}

impl BenchJob {
    pub(crate) fn new() -> BenchJob {
        BenchJob::sized(PAYLOAD_BYTES)
    }

    /// A job whose JSON payload is `payload_bytes` long (at least 11).
    pub(crate) fn sized(payload_bytes: usize) -> BenchJob {
        // `{"body":""}` is 11 bytes.
        BenchJob {
            body: "x".repeat(payload_bytes.saturating_sub(11)),
        }
    }
}

/// A handler that does nothing but count the jobs it completed; with
/// `fail_first`, attempt 1 fails with a retryable error; with a `gate`, it
/// holds its job until that many jobs are held at once.
struct NoopHandler {
    fail_first: bool,
    completed: Arc<AtomicUsize>,
    gate: Option<Arc<Barrier>>,
}

impl JobHandler for NoopHandler {
    type Job = BenchJob;

    async fn handle(&self, job: BenchJob, ctx: JobContext) -> Result<(), JobError> {
        if let Some(gate) = &self.gate {
            gate.wait().await;
        }
        std::hint::black_box(job);
        if self.fail_first && ctx.attempt() == 1 {
            return Err(JobError::retryable("the first attempt fails"));
        }
        self.completed.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

/// A backend with its own named connection; `publish` sets
/// `publish_concurrency` and `publish_window` (`None` keeps the defaults).
pub(crate) async fn backend(
    broker: &Broker,
    label: &str,
    publish: Option<(usize, usize)>,
    retry_granularity: Duration,
) -> BenchResult<RabbitMqBackend> {
    let mut options = RabbitMqOptions::default()
        .connection_name(broker.connection_name(label))
        .control_stream(broker.control_stream())
        .retry_granularity(retry_granularity);
    if let Some((channels, window)) = publish {
        options = options.publish_concurrency(channels).publish_window(window);
    }
    if let Some(ca) = broker.ca() {
        options = options.tls(queuey::rabbitmq::TlsOptions::default().ca_pem(ca));
    }
    Ok(RabbitMqBackend::with_options(broker.url(), options).await?)
}

/// Declares a fresh queue set through `backend` (the work queue, its
/// dead-letter queue and its suspect queue) and tracks them for deletion.
pub(crate) async fn fresh_queue(
    broker: &Broker,
    backend: &RabbitMqBackend,
    prefetch: u16,
    priorities: bool,
) -> BenchResult<(String, Producer<BenchQueues, RabbitMqBackend>)> {
    let queue = broker.fresh_queue();
    broker.track(&format!("{queue}.dead"));
    broker.track(&format!("{queue}.suspect"));
    use_queue(&queue, prefetch, priorities);
    let producer = Producer::<BenchQueues, _>::new(backend.clone()).await?;
    Ok((queue, producer))
}

/// `jobs` enqueues from one task with `Producer::enqueue_batch`, `batch`
/// jobs per call. One job is enqueued first, unmeasured.
pub(crate) async fn enqueue_batch(
    broker: &Broker,
    backend: &RabbitMqBackend,
    batch: usize,
    jobs: usize,
    priorities: bool,
) -> BenchResult<Measured> {
    let (queue, producer) = fresh_queue(broker, backend, 1, priorities).await?;
    let job = BenchJob::new();
    tokio::time::timeout(RUN_TIMEOUT, producer.enqueue(&job)).await??;
    let jobs_to_send = vec![job; batch];

    let clock = Stopwatch::start();
    let mut left = jobs;
    let sent = tokio::time::timeout(RUN_TIMEOUT, async {
        while left > 0 {
            let n = left.min(batch);
            for outcome in producer.enqueue_batch(&jobs_to_send[..n]).await {
                outcome?;
            }
            left -= n;
        }
        BenchResult::Ok(())
    })
    .await;
    let measured = clock.stop(jobs);
    sent??;
    broker.expect_ready(&queue, jobs + 1).await?;
    Ok(measured)
}

/// The memory row: a worker with prefetch and concurrency `jobs` takes
/// `jobs` jobs of `payload_bytes` from a filled queue, and its handler
/// holds each until all are held at once. Returns the growth of the
/// process's peak resident set over its size at the start, in bytes.
pub(crate) async fn hold_all(
    broker: &Broker,
    backend: &RabbitMqBackend,
    jobs: usize,
    payload_bytes: usize,
) -> BenchResult<u64> {
    let prefetch = u16::try_from(jobs)?;
    let (queue, _producer) = fresh_queue(broker, backend, prefetch, false).await?;
    broker.fill_sized(&queue, jobs, payload_bytes).await?;
    broker.expect_ready(&queue, jobs).await?;
    let base = crate::system::reset_peak_rss()?;
    let gate = Some(Arc::new(Barrier::new(jobs)));
    let worked = work(backend, prefetch, jobs, false, gate, Around::Nothing).await?;
    let peak = crate::system::peak_rss()?;
    if worked.measured.jobs != jobs {
        return Err(format!(
            "the worker completed {} of {jobs} jobs",
            worked.measured.jobs
        )
        .into());
    }
    Ok(peak.saturating_sub(base))
}

/// `jobs` enqueues from `tasks` tasks, each enqueueing its share one after
/// the other and waiting for each confirm. Every task first enqueues one
/// job unmeasured, so the pool's channels are open when the clock starts.
pub(crate) async fn enqueue(
    broker: &Broker,
    backend: &RabbitMqBackend,
    tasks: usize,
    jobs: usize,
    priorities: bool,
    store: Option<&RedisStore>,
) -> BenchResult<Measured> {
    let (queue, producer) = fresh_queue(broker, backend, 1, priorities).await?;
    let producer = match store {
        Some(store) => Producer::builder(backend.clone())
            .store(store.clone())
            .build_undeclared(),
        None => producer,
    };
    let job = BenchJob::new();
    let warm_up = futures::future::try_join_all((0..tasks).map(|_| producer.enqueue(&job)));
    tokio::time::timeout(RUN_TIMEOUT, warm_up).await??;
    let unique = store.is_some();
    // Keys of this run only, so every claim is taken.
    let run = uuid::Uuid::new_v4().simple().to_string();

    let clock = Stopwatch::start();
    let mut running = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let producer = producer.clone();
        let job = job.clone();
        let share = crate::share(jobs, tasks, task);
        let run = run.clone();
        running.spawn(async move {
            for n in 0..share {
                if unique {
                    let key = Unique::key(format!("{run}-{task}-{n}"), Duration::from_secs(600));
                    let options = EnqueueOptions::default().unique(key);
                    producer.enqueue_with(&job, options).await?;
                } else {
                    producer.enqueue(&job).await?;
                }
            }
            BenchResult::Ok(())
        });
    }
    let joined = tokio::time::timeout(RUN_TIMEOUT, running.join_all()).await?;
    let measured = clock.stop(jobs);
    joined.into_iter().collect::<BenchResult<Vec<()>>>()?;
    broker.expect_ready(&queue, jobs + tasks).await?;
    Ok(measured)
}

/// A per-key limit on [`BenchJob`]s, keyed by a function of the request.
pub(crate) type KeyedLimit = LimitLayer<JobKey<BenchJob>>;

/// The layer a consume run puts around its handler, inside the default
/// stack.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Around<'a> {
    /// The handler alone.
    Nothing,
    /// The idempotency layer.
    Once(&'a IdempotencyLayer),
    /// A per-key limit. Its waits are deferrals: the run lasts until every
    /// job completed, and counts them ([`Measured::deferred`]).
    Limit(&'a KeyedLimit),
}

/// The idempotency layer, if given.
impl<'a> From<Option<&'a IdempotencyLayer>> for Around<'a> {
    fn from(once: Option<&'a IdempotencyLayer>) -> Self {
        once.map_or(Around::Nothing, Around::Once)
    }
}

/// A worker with the default stack drains `jobs` jobs from a filled queue
/// with prefetch and concurrency `prefetch`, its handler inside `around`.
/// The clock runs from `run()` (which opens the consumer's channel) until
/// every job is settled.
pub(crate) async fn consume<'a>(
    broker: &Broker,
    backend: &RabbitMqBackend,
    prefetch: u16,
    jobs: usize,
    priorities: bool,
    around: impl Into<Around<'a>>,
) -> BenchResult<Measured> {
    let around = around.into();
    let (queue, _producer) = fresh_queue(broker, backend, prefetch, priorities).await?;
    broker.fill(&queue, jobs).await?;
    broker.expect_ready(&queue, jobs).await?;
    let worked = work(backend, prefetch, jobs, false, None, around).await?;
    if worked.measured.deferred > 0 {
        track_holds(broker, &queue).await?;
    }
    if worked.measured.jobs != jobs || worked.settle_failures > 0 {
        return Err(format!(
            "the worker completed {} of {jobs} jobs ({} settles failed)",
            worked.measured.jobs, worked.settle_failures
        )
        .into());
    }
    broker.expect_ready(&queue, 0).await?;
    Ok(worked.measured)
}

/// Like [`consume`], but every job fails its first attempt and is retried
/// through a hold queue of the backend's kind
/// ([`RabbitMqOptions::hold_queues`]) for the job's delay rounded up to the
/// backend's `retry_granularity`: each job is delivered twice, and settled
/// once by a retry (declare the hold queue, publish to it, confirm, ack) and
/// once by an ack.
///
/// Jobs that never come back are counted, not treated as an error: the
/// run ends once no job was settled for [`STALL`], and reports how many
/// jobs are missing (neither completed nor back on the queue once the
/// worker stopped): as stranded as far as the broker still counts them in
/// the hold (read with `rabbitmqctl` when the broker runs here), the rest
/// as lost.
pub(crate) async fn retry(
    broker: &Broker,
    backend: &RabbitMqBackend,
    prefetch: u16,
    jobs: usize,
) -> BenchResult<Measured> {
    let (queue, producer) = fresh_queue(broker, backend, prefetch, true).await?;
    let holds = track_retry_holds(broker, backend, &queue)?;
    // Some of the jobs go through queuey, so that the pool's channels are
    // open when the clock starts (the lapin side opens its pool first too).
    let channels = backend.options().settings().publish_concurrency().min(jobs);
    let job = BenchJob::new();
    let warm_up = futures::future::try_join_all((0..channels).map(|_| producer.enqueue(&job)));
    tokio::time::timeout(RUN_TIMEOUT, warm_up).await??;
    broker.fill(&queue, jobs - channels).await?;
    broker.expect_ready(&queue, jobs).await?;
    let worked = work(backend, prefetch, jobs, true, None, Around::Nothing).await?;
    let mut measured = worked.measured;
    // Deliveries whose settle failed stay unacked until the worker's
    // channel closes, then go back to the queue: they are not lost.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requeued = broker.ready(&queue).await? as usize;
    let missing = jobs.saturating_sub(measured.jobs + requeued);
    // A job the broker still counts in the hold was kept, not lost: the
    // hold stopped releasing it.
    let held = if missing > 0 {
        broker.counted_in(&holds).await.unwrap_or(0)
    } else {
        0
    };
    measured.stranded = held.min(missing);
    measured.lost = missing - measured.stranded;
    measured.settle_failures = worked.settle_failures;
    Ok(measured)
}

/// Tracks for deletion the hold queue `queue`'s retries go through, under
/// the names of both families: quorum holds are never deleted by the
/// broker, and a classic hold outlives its last use by twice its TTL.
/// Returns both names.
fn track_retry_holds(
    broker: &Broker,
    backend: &RabbitMqBackend,
    queue: &str,
) -> BenchResult<Vec<String>> {
    let options = backend.options();
    // As the backend rounds it: up to the granularity, then to the
    // shortest hold.
    let ttl_ms = hold_delay_ms(queue, RETRY_DELAY, options.settings().retry_granularity())?
        .max(queuey::rabbitmq::topology::SHORTEST_HOLD_MS);
    let mut names = Vec::new();
    for holds in [HoldQueues::Quorum, HoldQueues::Classic] {
        let name = holds.name(queue, options.settings().deferred_suffix(), ttl_ms)?;
        broker.track(&name);
        names.push(name);
    }
    Ok(names)
}

/// Tracks for deletion the queues of `queue` that the broker lists (read
/// with `rabbitmqctl`, so only when it runs on this machine): the hold
/// queues its deferrals went through, named after the waits they were
/// rounded to.
async fn track_holds(broker: &Broker, queue: &str) -> BenchResult<()> {
    let vhost = broker.url().parse::<lapin::uri::AMQPUri>()?.vhost;
    let queues = listed(&vhost, "messages").await.ok_or_else(|| {
        format!("jobs were deferred, and the hold queues of `{queue}` cannot be listed")
    })?;
    let prefix = format!("{queue}.");
    for name in queues.keys().filter(|name| name.starts_with(&prefix)) {
        broker.track(name);
    }
    Ok(())
}

/// How long a worker run may go without settling anything before it is
/// ended and its missing jobs counted.
const STALL: Duration = Duration::from_secs(3);

/// A worker run: jobs completed (`measured.jobs`) and settles that failed.
struct Worked {
    measured: Measured,
    settle_failures: u64,
}

/// Runs a worker until its handler has completed `jobs` jobs, or until
/// nothing was settled for [`STALL`], then stops it. In the second case the
/// clock stops at the last settle. The handler is given inside `around`.
async fn work(
    backend: &RabbitMqBackend,
    prefetch: u16,
    jobs: usize,
    fail_first: bool,
    gate: Option<Arc<Barrier>>,
    around: Around<'_>,
) -> BenchResult<Worked> {
    let completed = Arc::new(AtomicUsize::new(0));
    let handler = NoopHandler {
        fail_first,
        completed: Arc::clone(&completed),
        gate: gate.clone(),
    };
    let builder =
        Worker::<BenchQueues, _>::builder(backend.clone()).concurrency(usize::from(prefetch));
    let worker = match around {
        Around::Once(layer) => builder.handler_with(handler, layer.clone()).build().await?,
        Around::Limit(layer) => builder.handler_with(handler, layer.clone()).build().await?,
        Around::Nothing => builder.handler(handler).build().await?,
    };
    let handle = worker.handle();
    // Every job is settled once, and once more if it is retried.
    let settles = if fail_first { 2 * jobs } else { jobs } as u64;
    let deferrals = matches!(around, Around::Limit(_));

    let clock = Stopwatch::start();
    let running = tokio::spawn(worker.run());
    let waited = wait_for_settles(&handle, settles, deferrals).await;
    let mut measured = clock.stop(0);
    handle.shutdown();
    let stopped = tokio::time::timeout(RUN_TIMEOUT, running).await;
    let last_settle = waited?;
    stopped???;
    measured.elapsed = last_settle;
    measured.jobs = completed.load(Ordering::Acquire);
    if deferrals {
        measured.deferred = handle.jobs_settled().saturating_sub(handle.jobs_finished());
    }
    Ok(Worked {
        measured,
        settle_failures: handle.settle_failures(),
    })
}

/// Polls the worker's counters until `settles` deliveries were settled
/// (with `deferrals`, plus one for each delivery deferred so far: its job
/// comes back as another), or none was for [`STALL`]; returns when the
/// last settle was seen, measured from the start. Near the end (the last
/// [`FINE_POLL_BELOW`] settles) it polls every millisecond, so the clock
/// stops up to about a millisecond late (under 0.1 % of a run); before
/// that every [`COARSE_POLL`], so that the observer does not wake a thread
/// a thousand times a second on the cores the broker and the worker share
/// (the lapin side has no observer). Even at 100k settles/s a coarse poll
/// cannot pass the fine stretch.
async fn wait_for_settles(
    handle: &WorkerHandle,
    settles: u64,
    deferrals: bool,
) -> BenchResult<Duration> {
    let started = Instant::now();
    let mut seen = 0;
    let mut last_settle = started;
    loop {
        let settled = handle.jobs_settled() + handle.settle_failures();
        let settles = if deferrals {
            settles + handle.jobs_settled().saturating_sub(handle.jobs_finished())
        } else {
            settles
        };
        if settled != seen {
            seen = settled;
            last_settle = Instant::now();
        }
        if settled >= settles || last_settle.elapsed() > STALL {
            return Ok(last_settle.duration_since(started));
        }
        if started.elapsed() > RUN_TIMEOUT {
            return Err(format!(
                "only {settled} of {settles} deliveries were settled in {RUN_TIMEOUT:?}"
            )
            .into());
        }
        let left = settles.saturating_sub(settled);
        tokio::time::sleep(if left > FINE_POLL_BELOW {
            COARSE_POLL
        } else {
            Duration::from_millis(1)
        })
        .await;
    }
}

/// See [`wait_for_settles`].
const FINE_POLL_BELOW: u64 = 5_000;
const COARSE_POLL: Duration = Duration::from_millis(20);
