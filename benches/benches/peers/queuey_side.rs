//! The queuey side, used as its documentation shows: the default
//! `Producer` (each enqueue returns once the broker confirmed the
//! persistent message) and a `Worker` with the default stack on a
//! `RabbitMqBackend`, `concurrency` set to the run's slots and the queue's
//! prefetch to match, everything else at its defaults. It runs twice: on
//! the default queue (a classic queue with 10 priority levels, so that
//! retried and deferred jobs come back ahead of the backlog) and on one
//! without priority levels (`max_priority(0)`: they come back behind it),
//! as plain as the other RabbitMQ sides' queues. The Retry row gives
//! the queue a retry policy of two attempts with a fixed backoff of the
//! run's delay: the default stack's retry layer parks the job in a hold
//! queue on the broker. Each run has its own queue and control stream,
//! deleted at the end with the dead-letter, suspect and hold queues.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use queuey::JobHandler;
use queuey::backend::hold_delay_ms;
use queuey::prelude::*;
use queuey::queue::QueueConfig;
use queuey::rabbitmq::topology::SHORTEST_HOLD_MS;
use queuey::rabbitmq::{HoldQueues, RabbitMqBackend, RabbitMqOptions};
use queuey::retry::{Backoff, RetryPolicy};
use serde::{Deserialize, Serialize};

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

/// The queue's priority levels in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Levels {
    /// The default: 10 levels; a retried job comes back ahead of the
    /// backlog.
    Default,
    /// None (`max_priority(0)`): a retried job comes back behind the
    /// backlog.
    None,
}

/// What queuey promises on `row` with `levels`.
pub fn promise(row: Row, levels: Levels) -> Promise {
    match (row, levels) {
        (Row::Retry, Levels::Default) => Promise::Runs(
            "the retry waits in a quorum hold queue on the broker, never released early, and \
             comes back ahead of the backlog; publisher confirm, persistent message, durable \
             queue with 10 priority levels",
        ),
        (Row::Retry, Levels::None) => Promise::Runs(
            "the retry waits in a quorum hold queue on the broker, never released early, and \
             comes back behind the backlog; publisher confirm, persistent message, durable queue",
        ),
        (_, Levels::Default) => Promise::Runs(
            "publisher confirm, persistent message, durable queue with 10 priority levels",
        ),
        (_, Levels::None) => Promise::Runs("publisher confirm, persistent message, durable queue"),
    }
}

/// Runs `row` with `settings` on a queue of its own, then deletes what the
/// run created, whatever happened.
pub async fn run(row: Row, settings: &Settings, levels: Levels) -> Result<Outcome, BoxError> {
    let name = format!("queuey-peers.{}", uuid::Uuid::new_v4().simple());
    let delay = Duration::from_millis(settings.retry_delay_ms);
    let retry = match row {
        Row::Retry => Some(RetryPolicy::new(2, Backoff::fixed(delay)?)?),
        _ => None,
    };
    let setup = QueueSetup {
        name: Box::leak(name.clone().into_boxed_str()),
        prefetch: u16::try_from(settings.slots)
            .map_err(|_| format!("{} slots do not fit a prefetch", settings.slots))?,
        retry,
        levels,
    };
    SETUP
        .set(setup)
        .map_err(|_| "the queuey side runs once per process")?;
    let options = RabbitMqOptions::default()
        .connection_name(name.clone())
        .control_stream(format!("{name}.control"));
    let granularity = options.settings().retry_granularity();
    let deferred_suffix = options.settings().deferred_suffix().to_owned();
    let measured = bounded("the run", SIDE_LIMIT, async {
        let backend =
            Arc::new(RabbitMqBackend::with_options(settings.amqp_url.as_str(), options).await?);
        let measured = measure(row, settings, &backend).await;
        backend.close().await?;
        measured
    })
    .await;
    let mut queues = vec![
        name.clone(),
        format!("{name}.dead"),
        format!("{name}.suspect"),
        format!("{name}.control"),
        format!("{name}.control.workers"),
    ];
    if row == Row::Retry {
        let ttl_ms = hold_delay_ms(&name, delay, granularity)?.max(SHORTEST_HOLD_MS);
        for holds in [HoldQueues::Quorum, HoldQueues::Classic] {
            queues.push(holds.name(&name, &deferred_suffix, ttl_ms)?);
        }
    }
    let cleaned = bounded(
        "deleting the queues",
        CLEANUP_LIMIT,
        delete_queues(&settings.amqp_url, &name, queues),
    )
    .await;
    let outcome = measured?;
    cleaned?;
    Ok(outcome)
}

/// The run's queue set: one queue, named and sized for the run.
///
/// A `Queues` set names its queues statically; each run here needs a queue
/// of its own, so this set is written by hand and reads its name, prefetch
/// and retry policy from [`SETUP`], set once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerQueues {
    /// The run's queue.
    Work,
}

/// The queue of this process's run.
#[derive(Debug)]
struct QueueSetup {
    name: &'static str,
    prefetch: u16,
    retry: Option<RetryPolicy>,
    levels: Levels,
}

static SETUP: OnceLock<QueueSetup> = OnceLock::new();

impl Queues for PeerQueues {
    const ALL: &'static [Self] = &[PeerQueues::Work];

    fn name(&self) -> &'static str {
        SETUP.get().map_or("queuey-peers.unset", |s| s.name)
    }

    fn config(&self) -> QueueConfig {
        let Some(setup) = SETUP.get() else {
            return QueueConfig::new(self.name());
        };
        let config = QueueConfig::new(setup.name).prefetch(setup.prefetch);
        let config = match setup.levels {
            Levels::Default => config,
            Levels::None => config.max_priority(0),
        };
        match &setup.retry {
            Some(policy) => config.retry(policy.clone()),
            None => config,
        }
    }
}

/// The job: [`PeerJob`]'s fields, as queuey's payload.
#[derive(Job, Serialize, Deserialize, Debug)]
#[job(queue = PeerQueues::Work, name = "peer_job")]
pub struct PeerWork {
    index: usize,
    pad: String,
}

impl PeerWork {
    fn new(index: usize, payload_bytes: usize) -> PeerWork {
        let PeerJob { index, pad } = PeerJob::new(index, payload_bytes);
        PeerWork { index, pad }
    }
}

/// The handler of every row: it records each start, fails first attempts
/// in the Retry row, holds each job until all have started in the Memory
/// row, and counts completions.
struct PeerHandler {
    row: Row,
    ledger: Arc<Ledger>,
    retries: Arc<Retries>,
    tally: Arc<Tally>,
}

impl JobHandler for PeerHandler {
    type Job = PeerWork;

    async fn handle(&self, job: PeerWork, _ctx: JobContext) -> Result<(), JobError> {
        self.ledger.started(job.index);
        match self.row {
            Row::Retry => {
                if self.retries.start(job.index) == Attempt::First {
                    self.retries.failed(job.index);
                    return Err(JobError::retryable("the first attempt fails"));
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

async fn measure(
    row: Row,
    settings: &Settings,
    backend: &Arc<RabbitMqBackend>,
) -> Result<Outcome, BoxError> {
    let producer = Producer::<PeerQueues, _>::new(Arc::clone(backend)).await?;
    let jobs = settings.jobs;
    let bytes = settings.payload_bytes;
    let enqueue = {
        let producer = producer.clone();
        move |i: usize| {
            let producer = producer.clone();
            async move {
                producer.enqueue(&PeerWork::new(i, bytes)).await?;
                Ok::<(), BoxError>(())
            }
        }
    };
    if row == Row::Enqueue {
        // One enqueue per producer first, not timed, so that the
        // producer's channels are open when the clock starts.
        closed_loop(settings.producers, settings.producers, enqueue.clone()).await?;
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
            closed_loop(settings.producers, jobs, enqueue),
        )
        .await?;
    }
    if row == Row::Memory {
        reset_peak_rss()?;
    }
    let handler = PeerHandler {
        row,
        ledger: Ledger::new(jobs),
        retries: Retries::new(jobs),
        tally: Tally::new(jobs),
    };
    let (ledger, retries, tally) = (
        Arc::clone(&handler.ledger),
        Arc::clone(&handler.retries),
        Arc::clone(&handler.tally),
    );
    let worker = Worker::<PeerQueues, _>::builder(Arc::clone(backend))
        .concurrency(settings.slots)
        .handler(handler)
        .build()
        .await?;
    let handle = worker.handle();
    let started = Instant::now();
    let mut running = tokio::spawn(worker.run());
    let worked = async {
        if row == Row::Latency {
            tokio::time::sleep(WARM_UP).await;
            let rate = settings.rate.ok_or("the Latency row needs a rate")?;
            bounded(
                "offering the jobs",
                RUN_LIMIT,
                open_loop(rate, jobs, &ledger, move |i| {
                    let producer = producer.clone();
                    async move {
                        producer.enqueue(&PeerWork::new(i, bytes)).await?;
                        Ok(())
                    }
                }),
            )
            .await?;
        }
        tokio::select! {
            done = tally.wait_done(started, RUN_LIMIT) => done,
            ended = &mut running => Err(format!("the worker stopped early: {:?}", ended?).into()),
        }
    }
    .await;
    let peak_rss_kib = peak_rss_kib();
    handle.shutdown();
    if !running.is_finished() {
        tokio::time::timeout(RUN_LIMIT, &mut running)
            .await
            .map_err(|_| "the worker did not stop")???;
    }
    worked?;
    if handle.settle_failures() > 0 {
        return Err(format!("{} settles failed", handle.settle_failures()).into());
    }
    Ok(worker_outcome(
        row,
        started,
        Duration::from_millis(settings.retry_delay_ms),
        (&tally, &ledger, &retries),
        peak_rss_kib,
    ))
}
