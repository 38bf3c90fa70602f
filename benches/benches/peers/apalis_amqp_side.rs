//! The apalis-amqp side: apalis-amqp 1 as its documentation shows, at its
//! defaults but for the queue's name and its `prefetch_count` (the run's
//! slots; it runs every job delivered at once). Producers `push` through
//! backends of their own, one per producer, which publish the job's JSON
//! with neither a publisher confirm nor a delivery mode: `push` returns once
//! the message is handed to the connection. The worker acks each job after
//! its handler returned.
//!
//! apalis-amqp has no delay of its own for a failed job (it nacks it
//! without requeue). The Retry row uses apalis's retry layer with tower's
//! backoff fixed at the run's delay: the job waits in the worker's memory,
//! its delivery unacknowledged and holding a prefetch slot, and is gone if
//! the process dies meanwhile.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apalis::layers::WorkerBuilderExt;
use apalis::layers::retry::backoff::{ExponentialBackoffMaker, MakeBackoff};
use apalis::layers::retry::{HasherRng, RetryPolicy};
use apalis_amqp::{AmqpBackend, AmqpTask, Config};
use apalis_core::backend::TaskSink;
use apalis_core::error::{BoxDynError, WorkerError};
use apalis_core::worker::builder::WorkerBuilder;
use apalis_core::worker::context::WorkerContext;
use apalis_core::worker::event::Event;
use apalis_core::worker::ext::event_listener::EventListenerExt;
use futures::Sink;
use lapin::ConnectionProperties;
use tokio::sync::Semaphore;

use crate::amqp::delete_queues;
use crate::load::{
    Attempt, CLEANUP_LIMIT, Ledger, PeerJob, Retries, SIDE_LIMIT, Tally, bounded, closed_loop,
    open_loop, peak_rss_kib, reset_peak_rss, worker_outcome,
};
use crate::side::{BoxError, Outcome, Promise, Row, Settings};

/// The longest any wait of a run may take.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// How long the Latency row lets the worker start consuming before the
/// first enqueue.
const WARM_UP: Duration = Duration::from_secs(1);

/// What apalis-amqp promises on `row`.
pub fn promise(row: Row) -> Promise {
    match row {
        Row::Retry => Promise::Runs(
            "no broker-side delay: the retry waits in worker memory (apalis's retry layer), \
             its delivery unacknowledged and holding a prefetch slot, lost if the process dies",
        ),
        Row::Enqueue | Row::Completions | Row::Latency | Row::Memory => Promise::Runs(
            "no publisher confirm, transient message (no delivery mode), durable queue",
        ),
    }
}

/// Runs `row` with `settings` on a queue of its own, then deletes it,
/// whatever happened.
pub async fn run(row: Row, settings: &Settings) -> Result<Outcome, BoxError> {
    let name = format!("queuey-peers-apalis.{}", uuid::Uuid::new_v4().simple());
    let measured = bounded("the run", SIDE_LIMIT, async {
        let pool = connection_pool(&settings.amqp_url, &name).await?;
        let measured = measure(row, settings, &pool, &name).await;
        if let Ok(connection) = pool.get().await {
            let _ = connection.close(200, "run done".into()).await;
        }
        pool.close();
        measured
    })
    .await;
    let cleaned = bounded(
        "deleting the queues",
        CLEANUP_LIMIT,
        delete_queues(&settings.amqp_url, &name, vec![name.clone()]),
    )
    .await;
    let outcome = measured?;
    cleaned?;
    Ok(outcome)
}

/// The connection pool apalis-amqp takes, its connections named after
/// the run, with one connection open.
async fn connection_pool(url: &str, name: &str) -> Result<deadpool_lapin::Pool, BoxError> {
    let name = name.to_owned();
    let config = deadpool_lapin::Config {
        url: Some(url.to_owned()),
        pool: None,
    };
    let pool = config.create_pool(
        move || ConnectionProperties::default().with_connection_name(name.as_str().into()),
        deadpool_lapin::Runtime::Tokio1,
    )?;
    drop(pool.get().await?);
    Ok(pool)
}

/// Opens the backend's channel (and declares its queue) the way a first
/// `push` does: a worker whose backend has no channel yet takes a delivery
/// before it consumes, and panics.
async fn open(backend: &mut AmqpBackend<PeerJob>) -> Result<(), BoxError> {
    poll_fn(|cx| Sink::<AmqpTask>::poll_ready(Pin::new(&mut *backend), cx)).await?;
    Ok(())
}

/// Backends for the producers, each lent to one `push` at a time.
struct Senders {
    backends: Mutex<Vec<AmqpBackend<PeerJob>>>,
    free: Semaphore,
}

impl Senders {
    /// `n` backends like `template`, each with its channel open.
    async fn open(template: &AmqpBackend<PeerJob>, n: usize) -> Result<Senders, BoxError> {
        let mut backends = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let mut backend = template.clone();
            open(&mut backend).await?;
            backends.push(backend);
        }
        Ok(Senders {
            free: Semaphore::new(backends.len()),
            backends: Mutex::new(backends),
        })
    }

    async fn push(&self, job: PeerJob) -> Result<(), BoxError> {
        let _permit = self.free.acquire().await?;
        let mut backend = self
            .backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .ok_or("no free backend while holding a permit")?;
        let pushed = backend.push(job).await;
        self.backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(backend);
        pushed.map_err(|e| format!("push: {e}").into())
    }
}

async fn measure(
    row: Row,
    settings: &Settings,
    pool: &deadpool_lapin::Pool,
    name: &str,
) -> Result<Outcome, BoxError> {
    let jobs = settings.jobs;
    let bytes = settings.payload_bytes;
    let config = Config::default()
        .queue(name)
        .prefetch_count(u16::try_from(settings.slots)?);
    let template = AmqpBackend::<PeerJob>::new(pool.clone()).with_config(config);
    let senders = Arc::new(Senders::open(&template, settings.producers).await?);
    let enqueue = {
        let senders = Arc::clone(&senders);
        move |i: usize| {
            let senders = Arc::clone(&senders);
            async move { senders.push(PeerJob::new(i, bytes)).await }
        }
    };
    if row == Row::Enqueue {
        let elapsed = bounded(
            "enqueueing",
            RUN_LIMIT,
            closed_loop(settings.producers, jobs, enqueue),
        )
        .await?;
        return Ok(Outcome::enqueued(jobs, elapsed));
    }
    if row != Row::Latency {
        bounded(
            "enqueueing the backlog",
            RUN_LIMIT,
            closed_loop(settings.producers, jobs, enqueue.clone()),
        )
        .await?;
    }
    if row == Row::Memory {
        reset_peak_rss()?;
    }
    let (ledger, retries, tally) = (Ledger::new(jobs), Retries::new(jobs), Tally::new(jobs));
    let handler = {
        let (ledger, retries, tally) = (
            Arc::clone(&ledger),
            Arc::clone(&retries),
            Arc::clone(&tally),
        );
        move |job: PeerJob| {
            let (ledger, retries, tally) = (
                Arc::clone(&ledger),
                Arc::clone(&retries),
                Arc::clone(&tally),
            );
            async move { handle(row, job, &ledger, &retries, &tally).await }
        }
    };
    let stopper = Stopper::default();
    let listener = stopper.listener(jobs);
    let worker_name = format!("{name}-worker");
    let started = Instant::now();
    let mut backend = template.clone();
    open(&mut backend).await?;
    let builder = WorkerBuilder::new(worker_name).backend(backend);
    let running: Pin<Box<dyn Future<Output = Result<(), WorkerError>> + Send>> = match row {
        Row::Retry => {
            let delay = Duration::from_millis(settings.retry_delay_ms);
            let backoff = ExponentialBackoffMaker::new(delay, delay, 0.0, HasherRng::default())?
                .make_backoff();
            Box::pin(
                builder
                    .retry(RetryPolicy::retries(1).with_backoff(backoff))
                    .on_event(listener)
                    .build(handler)
                    .run(),
            )
        }
        _ => Box::pin(builder.on_event(listener).build(handler).run()),
    };
    let producing = async {
        if row != Row::Latency {
            return Ok(());
        }
        tokio::time::sleep(WARM_UP).await;
        let rate = settings.rate.ok_or("the Latency row needs a rate")?;
        let produced = bounded(
            "offering the jobs",
            RUN_LIMIT,
            open_loop(rate, jobs, &ledger, enqueue),
        )
        .await;
        if produced.is_err() {
            stopper.stop();
        }
        produced
    };
    let (ran, produced) = tokio::join!(tokio::time::timeout(RUN_LIMIT, running), producing);
    let peak_rss_kib = peak_rss_kib();
    produced?;
    ran.map_err(|_| format!("the worker did not finish in {RUN_LIMIT:?}"))?
        .map_err(|e| format!("the apalis worker failed: {e}"))?;
    if let Some(error) = stopper.error() {
        return Err(format!("a job failed: {error}").into());
    }
    if tally.count() < jobs {
        return Err(format!("{} of {jobs} jobs completed", tally.count()).into());
    }
    Ok(worker_outcome(
        row,
        started,
        Duration::from_millis(settings.retry_delay_ms),
        (&tally, &ledger, &retries),
        peak_rss_kib,
    ))
}

/// The handler of every row: it records each start, fails first attempts
/// in the Retry row, holds each job until all have started in the Memory
/// row, and counts completions.
async fn handle(
    row: Row,
    job: PeerJob,
    ledger: &Ledger,
    retries: &Retries,
    tally: &Tally,
) -> Result<(), BoxDynError> {
    ledger.started(job.index);
    match row {
        Row::Retry => {
            if retries.start(job.index) == Attempt::First {
                retries.failed(job.index);
                return Err("the first attempt fails".into());
            }
        }
        Row::Memory => ledger.all_started().await,
        Row::Enqueue | Row::Completions | Row::Latency => {}
    }
    std::hint::black_box(&job.pad);
    tally.completed();
    Ok(())
}

/// Stops the worker once every job's ack was sent (apalis reports each
/// job's success after its ack), or at the first job that failed for good.
#[derive(Clone, Default)]
struct Stopper {
    worker: Arc<Mutex<Option<WorkerContext>>>,
    error: Arc<Mutex<Option<String>>>,
}

impl Stopper {
    fn listener(&self, jobs: usize) -> impl Fn(&WorkerContext, &Event) + Send + Sync + 'static {
        let stopper = self.clone();
        let acked = AtomicUsize::new(0);
        move |ctx: &WorkerContext, event: &Event| match event {
            Event::Start => {
                *stopper.worker.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.clone());
            }
            Event::Success(_) => {
                let acked = acked.fetch_add(1, Ordering::AcqRel) + 1;
                if acked == jobs {
                    let _ = ctx.stop();
                }
            }
            Event::Error(e) => {
                stopper
                    .error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert_with(|| e.to_string());
                let _ = ctx.stop();
            }
            _ => {}
        }
    }

    /// Stops the worker, if it has started.
    fn stop(&self) {
        if let Some(ctx) = &*self.worker.lock().unwrap_or_else(|p| p.into_inner()) {
            let _ = ctx.stop();
        }
    }

    fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
