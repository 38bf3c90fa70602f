//! The scenarios: a producer and a worker carry `jobs` numbered jobs while
//! one kind of fault is injected again and again; the ledger then says
//! whether any confirmed job was lost.
//!
//! One producer backend and one `Worker::run` serve the whole run (no
//! supervisor loop, no rebuilt backend): a worker that exits early is
//! reported, never restarted. Only the worker-crash scenario runs its
//! workers as child processes, killed with SIGKILL and started again (that
//! is its fault). Every job takes the plain path (the handler succeeds at
//! once), unless the plan sends every job through a hold queue: then the
//! first attempt fails and the job comes back after a 1 s hold. A plan
//! that handles each job once gives the worker the idempotency layer, on a
//! private `redis-server` started for the run.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use super::chaos::{self, Chaos};
use super::child::Children;
use super::ledger::{Check, Ledger};
use super::node::PrivateNode;
use super::once;
pub(crate) use super::plan::{Fault, Plan};
use super::proxy::Proxy;

/// A job carrying its number, the unit of the ledger.
pub(crate) trait Numbered: Job<Output = ()> + Clone {
    fn numbered(n: u32) -> Self;
    fn number(&self) -> u32;
}

/// A queue set with one queue, `Work` (prefetch 32 unless a configuration
/// function is given), and a numbered job type on it.
/// The queue's name is unique to the process unless `QUEUEY_FAULT_QUEUE`
/// names it (a worker child process consumes its parent's queue).
macro_rules! fault_queue {
    ($queues:ident, $job:ident, $label:literal) => {
        $crate::fault::scenario::fault_queue!($queues, $job, $label, |c| c.prefetch(32));
    };
    ($queues:ident, $job:ident, $label:literal, $config:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum $queues {
            Work,
        }

        impl queuey::Queues for $queues {
            const ALL: &'static [Self] = &[$queues::Work];

            fn name(&self) -> &'static str {
                static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
                NAME.get_or_init(|| {
                    let name = std::env::var("QUEUEY_FAULT_QUEUE").unwrap_or_else(|_| {
                        format!("queuey-fault.{}.{}", $label, uuid::Uuid::new_v4().simple())
                    });
                    Box::leak(name.into_boxed_str())
                })
            }

            fn config(&self) -> queuey::queue::QueueConfig {
                let config: fn(queuey::queue::QueueConfig) -> queuey::queue::QueueConfig = $config;
                config(queuey::queue::QueueConfig::new(self.name()))
            }
        }

        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub(crate) struct $job {
            n: u32,
        }

        impl queuey::Job for $job {
            type Queues = $queues;
            type Output = ();
            const QUEUE: $queues = $queues::Work;
            const NAME: &'static str = "fault_job";
        }

        impl $crate::fault::scenario::Numbered for $job {
            fn numbered(n: u32) -> Self {
                $job { n }
            }

            fn number(&self) -> u32 {
                self.n
            }
        }
    };
}
pub(crate) use fault_queue;

/// What a run measured.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) fault: Fault,
    /// The hold queues every job went through once, if it did.
    pub(crate) holds: Option<queuey::rabbitmq::HoldQueues>,
    /// Whether the worker handled each job once (the idempotency layer).
    pub(crate) once: bool,
    /// The work queue's name.
    pub(crate) queue: String,
    pub(crate) jobs: u32,
    pub(crate) faults: u32,
    pub(crate) check: Check,
    /// Failed `enqueue` calls (each retried), by error kind.
    pub(crate) producer_errors: BTreeMap<String, u64>,
    /// A worker that stopped before it was asked to (it would need a restart).
    pub(crate) worker_exit: Option<String>,
    /// What `Worker::run` returned after the shutdown.
    pub(crate) worker_result: Option<String>,
    pub(crate) settle_failures: u64,
    /// Ready and unacknowledged messages left in the queue at the end.
    pub(crate) left: Option<(u32, u32)>,
    pub(crate) timed_out: bool,
    pub(crate) elapsed: Duration,
}

impl Report {
    /// The scenario's promise: nothing confirmed is lost, nothing unknown
    /// shows up, no worker had to be restarted and the queue is empty.
    pub(crate) fn assert_nothing_lost(&self) {
        assert!(!self.timed_out, "the run hit its deadline: {self}");
        assert!(
            self.check.lost.is_empty(),
            "confirmed jobs were lost: {self}"
        );
        assert!(
            self.check.unexpected.is_empty(),
            "unknown jobs were handled: {self}"
        );
        assert_eq!(
            self.check.confirmed, self.jobs as usize,
            "not every job was confirmed: {self}"
        );
        if let Some(result) = &self.worker_result {
            assert_eq!(
                result, "Ok",
                "Worker::run failed after the shutdown: {self}"
            );
        }
        assert!(
            self.worker_exit.is_none(),
            "the worker stopped by itself: {self}"
        );
        assert_eq!(
            self.left,
            Some((0, 0)),
            "messages were left in the queue: {self}"
        );
        if self.fault != Fault::None {
            assert!(self.faults > 0, "no fault was injected: {self}");
        }
    }

    /// The promise of a worker that handles each job once, on top of
    /// [`assert_nothing_lost`](Self::assert_nothing_lost): no job's
    /// handler ran twice. Worker processes killed with SIGKILL are the
    /// exception the layer documents: a job whose handler was cut short
    /// (or killed after its side effect and before the record) runs again
    /// in the next process, so there at most every job in flight at each
    /// kill runs twice, and none twice within one process.
    pub(crate) fn assert_handled_once(&self) {
        self.assert_nothing_lost();
        assert!(self.once, "the run had no idempotency layer: {self}");
        if self.fault == Fault::WorkerCrash {
            assert_eq!(
                self.check.repeated_in_a_process, 0,
                "a job ran twice within one worker process: {self}"
            );
            let in_flight = u64::from(self.faults) * super::child::CONCURRENCY as u64;
            assert!(
                self.check.extra_runs <= in_flight,
                "more jobs ran again than were in flight at the kills: {self}"
            );
        } else {
            assert_eq!(
                self.check.extra_runs, 0,
                "a job's handler ran more than once: {self}"
            );
        }
    }

    /// ", through quorum holds" when every job went through a hold once,
    /// ", handled once" with the idempotency layer.
    fn through(&self) -> String {
        let holds = match self.holds {
            Some(queuey::rabbitmq::HoldQueues::Classic) => ", through classic holds",
            Some(_) => ", through quorum holds",
            None => "",
        };
        let once = if self.once { ", handled once" } else { "" };
        format!("{holds}{once}")
    }

    /// A row of the RELIABILITY.md table.
    pub(crate) fn row(&self) -> String {
        format!(
            "| {}{} | {} | {} × {} | {} | {} ({} extra runs) | {:.1} s |",
            self.fault.name(),
            self.through(),
            self.jobs,
            self.faults,
            self.fault.describe(),
            self.check.lost.len(),
            self.check.duplicated,
            self.check.extra_runs,
            self.elapsed.as_secs_f64()
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}{}] {} jobs, {} faults in {:.1} s: {}; producer errors {:?}; settle failures {}; \
             left {:?}; worker exit {:?}; worker result {:?}",
            self.fault.name(),
            self.through(),
            self.jobs,
            self.faults,
            self.elapsed.as_secs_f64(),
            self.check,
            self.producer_errors,
            self.settle_failures,
            self.left,
            self.worker_exit,
            self.worker_result,
        )
    }
}

/// Where the scenario's broker is: `url` for clients, and the private node
/// when the scenario breaks the broker itself.
pub(crate) struct Site<'a> {
    pub(crate) url: String,
    /// TLS for an `amqps://` url.
    pub(crate) tls: queuey::rabbitmq::TlsOptions,
    pub(crate) node: Option<&'a mut PrivateNode>,
    /// How to start a worker child process (worker-crash only): the
    /// program and its arguments.
    pub(crate) child: Option<(std::path::PathBuf, Vec<String>)>,
}

/// Runs one scenario and reports; the caller asserts.
pub(crate) async fn run<J: Numbered>(plan: &Plan, site: Site<'_>) -> Report {
    let started = Instant::now();
    let fault = plan.fault;
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let ledger = Arc::new(Ledger::default());
    ledger.attempted(plan.jobs);
    let direct = site.url.clone();
    let proxy = match fault {
        Fault::Reset | Fault::BlackHole => Some(Proxy::in_front_of(&direct).await),
        _ => None,
    };
    let url = proxy
        .as_ref()
        .map_or(direct.clone(), |(_, url)| url.clone());
    let queue = <J as Job>::QUEUE.name().to_owned();
    // The control stream its worker processes use too, deleted with the
    // queue: never the shared broker's `queuey.control`.
    let control = super::child::control_stream(&queue);
    let options = |role: &str| {
        super::child::on_control_stream(
            RabbitMqOptions::default()
                .connection_name(format!("queuey-fault-{role}-{run_id}"))
                .heartbeat(plan.heartbeat)
                .connect_timeout(Duration::from_secs(3))
                .call_timeout(Duration::from_secs(10))
                .hold_queues(plan.holds)
                .tls(site.tls.clone()),
            &control,
        )
    };
    let (producer_backend, producer) = producer::<J>(&url, options("producer")).await;
    let mut store_server = plan.once.then(super::private_redis::PrivateRedis::start);

    // The worker: in process, or a child process for the crash scenario.
    let mut in_process = None;
    let mut children = None;
    if fault == Fault::WorkerCrash {
        let (program, args) = site
            .child
            .clone()
            .expect("the crash scenario needs a child command");
        let mut kids = Children::new(program, args, &url, &queue);
        if let Some(server) = &store_server {
            kids.env(once::STORE_URL, &server.url());
        }
        kids.spawn();
        children = Some(kids);
    } else {
        let worker_backend = Arc::new(
            RabbitMqBackend::with_options(&url, options("worker"))
                .await
                .expect("the worker connects"),
        );
        let log = Arc::clone(&ledger);
        let through_holds = plan.through_holds;
        let handler = handler_fn(move |job: J, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                if through_holds && ctx.attempt() == 1 {
                    return Err(JobError::retryable("first attempts fail: off to a hold"));
                }
                log.handled(job.number());
                Ok::<(), JobError>(())
            }
        });
        let store = match &store_server {
            Some(server) => Some(once::store(&server.url()).await),
            None => None,
        };
        let worker = once::worker(
            Arc::clone(&worker_backend),
            handler,
            store,
            plan.concurrency,
            Duration::from_secs(20),
        )
        .await;
        let handle = worker.handle();
        let running = tokio::spawn(worker.run());
        in_process = Some((worker_backend, handle, running));
    }

    let node_name = site.node.as_ref().map(|n| n.name().to_owned());
    let produced = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let mut chaos = Chaos {
        fault,
        plan,
        proxy: proxy.as_ref().map(|(p, _)| p),
        node: site.node,
        children: children.as_mut(),
        store: store_server.as_mut(),
        connections: [
            format!("queuey-fault-producer-{run_id}"),
            format!("queuey-fault-worker-{run_id}"),
        ],
    };
    let producing = async {
        let errors = produce::<J>(&producer, plan, &ledger).await;
        produced.store(true, Ordering::Release);
        errors
    };
    let watching = async {
        while !produced.load(Ordering::Acquire) && started.elapsed() < plan.deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.store(true, Ordering::Release);
    };
    let (producer_errors, faults, ()) = tokio::join!(producing, chaos.run(&stop), watching);
    chaos.heal().await;
    drop(chaos);

    // Wait until every confirmed job was handled and the queue is drained.
    let node_name = node_name.as_deref();
    let mut worker_exit = None;
    let mut timed_out = false;
    let left = loop {
        if let Some(kids) = children.as_ref() {
            ledger.reset_handled();
            for text in kids.ledgers() {
                ledger.record_file(&text);
            }
        }
        if let Some((_, _, running)) = &in_process
            && running.is_finished()
            && worker_exit.is_none()
        {
            worker_exit = Some("Worker::run returned before the shutdown".to_owned());
        }
        let (done, confirmed) = ledger.confirmed_handled();
        if done == confirmed {
            let left = chaos::queue_depth(node_name, &queue).await;
            if left == Some((0, 0)) {
                break left;
            }
        }
        if started.elapsed() > plan.deadline {
            timed_out = true;
            break chaos::queue_depth(node_name, &queue).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // Stop the worker(s), then read the children's ledgers a last time.
    let mut worker_result = None;
    let mut settle_failures = 0;
    if let Some((backend, handle, running)) = in_process {
        worker_result = Some(shut_down(&handle, running).await);
        settle_failures = handle.settle_failures();
        close(&backend).await;
    }
    if let Some(mut kids) = children {
        kids.kill();
        ledger.reset_handled();
        for text in kids.ledgers() {
            ledger.record_file(&text);
        }
    }
    close(&producer_backend).await;
    drop(proxy);
    drop(store_server);
    chaos::delete_queues(node_name, &direct, &queue).await;
    Report {
        fault,
        holds: plan.through_holds.then_some(plan.holds),
        once: plan.once,
        queue,
        jobs: plan.jobs,
        faults,
        check: ledger.check(),
        producer_errors,
        worker_exit,
        worker_result,
        settle_failures,
        left,
        timed_out,
        elapsed: started.elapsed(),
    }
}

/// A producer of `J`'s queue set on its own backend (connected to `url`
/// with `options`), its queues declared.
pub(crate) async fn producer<J: Numbered>(
    url: &str,
    options: RabbitMqOptions,
) -> (
    Arc<RabbitMqBackend>,
    Producer<J::Queues, Arc<RabbitMqBackend>>,
) {
    let backend = Arc::new(
        RabbitMqBackend::with_options(url, options)
            .await
            .expect("the producer connects"),
    );
    let producer = Producer::<J::Queues, _>::new(Arc::clone(&backend))
        .await
        .expect("the producer declares its queue");
    (backend, producer)
}

/// Asks a running worker to shut down and says how its `run` ended
/// (`"Ok"`, the error, or that it did not return within 60 s).
pub(crate) async fn shut_down(
    handle: &queuey::worker::WorkerHandle,
    running: tokio::task::JoinHandle<Result<(), queuey::worker::WorkerError>>,
) -> String {
    handle.shutdown();
    match tokio::time::timeout(Duration::from_secs(60), running).await {
        Ok(Ok(Ok(()))) => "Ok".to_owned(),
        Ok(Ok(Err(e))) => format!("Err({e})"),
        Ok(Err(e)) => format!("panicked: {e}"),
        Err(_) => "did not return within 60 s of the shutdown".to_owned(),
    }
}

/// Closes a backend, bounded: a close that hangs is reported, not waited on.
pub(crate) async fn close(backend: &RabbitMqBackend) {
    match tokio::time::timeout(Duration::from_secs(40), backend.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("closing a backend failed: {e}"),
        Err(_) => eprintln!("closing a backend did not return within 40 s"),
    }
}

/// Enqueues the plan's jobs at its pace: see [`produce_paced`].
async fn produce<J: Numbered>(
    producer: &Producer<J::Queues, Arc<RabbitMqBackend>>,
    plan: &Plan,
    ledger: &Ledger,
) -> BTreeMap<String, u64> {
    let pace = Pace {
        jobs: plan.jobs,
        concurrency: plan.concurrency,
        spread: plan.spread,
        deadline: plan.deadline,
    };
    produce_paced::<J>(producer, &pace, ledger).await
}

/// How a producer enqueues a run's jobs.
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    pub(crate) jobs: u32,
    /// `enqueue` calls in flight.
    pub(crate) concurrency: usize,
    /// Publishing is spread over at least this long.
    pub(crate) spread: Duration,
    /// A job not confirmed by then is given up.
    pub(crate) deadline: Duration,
}

/// Enqueues jobs `0..jobs`, `concurrency` at a time, spread over
/// `spread`; a failed enqueue is tried again with the same job id (so a
/// worker that handles each job once handles it once even if both
/// reached the broker) until it is confirmed or the run's deadline
/// passes. Returns the failures by kind.
pub(crate) async fn produce_paced<J: Numbered>(
    producer: &Producer<J::Queues, Arc<RabbitMqBackend>>,
    pace: &Pace,
    ledger: &Ledger,
) -> BTreeMap<String, u64> {
    let started = tokio::time::Instant::now();
    let errors = std::sync::Mutex::new(BTreeMap::<String, u64>::new());
    let jobs = pace.jobs.max(1);
    futures::stream::iter(0..pace.jobs)
        .for_each_concurrent(pace.concurrency, |n| {
            let errors = &errors;
            async move {
                let at = pace.spread.mul_f64(f64::from(n) / f64::from(jobs));
                tokio::time::sleep_until(started + at).await;
                let job = J::numbered(n);
                let id = uuid::Uuid::new_v4();
                loop {
                    let options = queuey::EnqueueOptions::default().job_id(id);
                    match producer.enqueue_with(&job, options).await {
                        Ok(_) => {
                            ledger.confirmed(n);
                            return;
                        }
                        Err(e) => {
                            let kind = match &e {
                                queuey::Error::Backend(b) => format!("{:?}", b.kind()),
                                other => format!("{other}"),
                            };
                            *errors
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .entry(kind)
                                .or_default() += 1;
                            if started.elapsed() > pace.deadline {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            }
        })
        .await;
    errors.into_inner().unwrap_or_else(|p| p.into_inner())
}
