//! One run: a fresh logical queue of N shards on the cluster, `jobs`
//! enqueued into it from [`TASKS`] tasks, then drained by a worker; the
//! CPU of every node, of this process and of the machine read around each
//! of the two phases.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lapin::options::QueueDeleteOptions;
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqBackend;

use crate::BenchResult;
use crate::cpu::{Sample, Used};
use crate::private::cluster::Cluster;
use crate::queue::{self, ScaleJob, ScaleQueues};

/// Tasks enqueueing at once (each waits for its confirm), as in the
/// `enqueue-64` row of `broker_throughput`.
pub(crate) const TASKS: usize = 64;
/// The worker's job slots, and the logical queue's prefetch (split over
/// the lane and the shards: each consumer takes ceil(100 / N)).
pub(crate) const CONCURRENCY: u16 = 100;
/// The longest a phase may take.
const PHASE_TIMEOUT: Duration = Duration::from_secs(300);
/// A pause before each phase, so the broker's work on the previous one
/// (its queues' deletion, its own bookkeeping) does not spill into it.
const PAUSE: Duration = Duration::from_millis(500);

/// What the cluster and the clients the runs share.
pub(crate) struct Bench<'a> {
    pub(crate) cluster: &'a Cluster,
    pub(crate) producer: Arc<RabbitMqBackend>,
    pub(crate) worker: Arc<RabbitMqBackend>,
    /// A plain AMQP connection to node 1 that deletes each run's queues.
    pub(crate) admin: lapin::Connection,
    /// Each node's VM pid, by node index.
    pub(crate) pids: Vec<Option<u32>>,
    /// The start of every connection's name: `queuey-bench-{id}`.
    pub(crate) connection_prefix: String,
}

/// One measured phase.
#[derive(Debug, Clone)]
pub(crate) struct Phase {
    pub(crate) jobs: usize,
    pub(crate) used: Used,
}

impl Phase {
    pub(crate) fn rate(&self) -> f64 {
        self.jobs as f64 / self.used.wall.as_secs_f64()
    }
}

/// How a run's queue is laid out on the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Its shards (1: an unsharded queue).
    pub(crate) shards: u16,
    /// The node its queues are first declared through, which leads those
    /// the broker places on the declaring node (an unsharded queue, the
    /// lane, the dead-letter and suspect queues); `None`: the clients'
    /// node, node 1.
    pub(crate) declared_on: Option<usize>,
}

impl Layout {
    /// "4", or "1, declared through n2".
    pub(crate) fn label(self) -> String {
        match self.declared_on {
            None => self.shards.to_string(),
            Some(node) => format!("{}, declared through n{}", self.shards, node + 1),
        }
    }
}

/// One run of one layout.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub(crate) layout: Layout,
    /// The node leading each broker queue jobs went through: the queue
    /// itself, or each shard in order.
    pub(crate) leaders: Vec<Option<usize>>,
    pub(crate) enqueue: Phase,
    pub(crate) consume: Phase,
}

impl Bench<'_> {
    /// One run: declare, enqueue, drain, delete.
    pub(crate) async fn run(&self, layout: Layout, jobs: usize) -> BenchResult<Run> {
        let name = queue::fresh(layout.shards, CONCURRENCY);
        let outcome = self.measure(name, layout, jobs).await;
        // The run's queues go, whatever happened.
        let deleted = self.delete(&queue::broker_queues()).await;
        let run = outcome?;
        deleted?;
        Ok(run)
    }

    async fn measure(&self, name: &str, layout: Layout, jobs: usize) -> BenchResult<Run> {
        if let Some(node) = layout.declared_on {
            self.declare_through(node).await?;
        }
        let shards = layout.shards;
        let producer = Producer::<ScaleQueues, _>::new(Arc::clone(&self.producer)).await?;
        let physical: Vec<String> = ScaleQueues::Work
            .config()
            .physical()
            .iter()
            .map(|q| q.name().to_owned())
            .collect();
        let placements = self
            .cluster
            .await_leaders(name, physical.len(), Duration::from_secs(60))
            .await?;
        let leaders = physical
            .iter()
            .filter(|q| shards == 1 || q.as_str() != name)
            .map(|q| placements.get(q).and_then(|p| p.leader))
            .collect();

        // Every task's first enqueue opens its publishing channel, unmeasured.
        let job = ScaleJob::new();
        let warm_up = futures::future::try_join_all((0..TASKS).map(|_| producer.enqueue(&job)));
        tokio::time::timeout(PHASE_TIMEOUT, warm_up).await??;

        tokio::time::sleep(PAUSE).await;
        let before = Sample::now(&self.pids);
        let mut running = tokio::task::JoinSet::new();
        for task in 0..TASKS {
            let (producer, job) = (producer.clone(), job.clone());
            let share = jobs / TASKS + usize::from(task < jobs % TASKS);
            running.spawn(async move {
                for _ in 0..share {
                    producer.enqueue(&job).await?;
                }
                Ok::<_, queuey::Error>(())
            });
        }
        let joined = tokio::time::timeout(PHASE_TIMEOUT, running.join_all()).await;
        let enqueue = Phase {
            jobs,
            used: before.until(&Sample::now(&self.pids)),
        };
        for outcome in joined? {
            outcome?;
        }

        tokio::time::sleep(PAUSE).await;
        let consume = self.drain(jobs + TASKS).await?;
        Ok(Run {
            layout,
            leaders,
            enqueue,
            consume,
        })
    }

    /// Declares the current queue set through a connection to node `node`
    /// alone, and closes it.
    async fn declare_through(&self, node: usize) -> BenchResult<()> {
        let options = queuey::rabbitmq::RabbitMqOptions::default()
            .connection_name(format!("{}-declarer", self.connection_prefix));
        let backend = RabbitMqBackend::with_options(self.cluster.node(node).url(), options).await?;
        let declared = Producer::<ScaleQueues, _>::new(backend.clone())
            .await
            .map(drop);
        backend.close().await?;
        Ok(declared?)
    }

    /// A worker with the default stack and a no-op handler drains `jobs`
    /// jobs; the clock runs from `run()` (which opens its consumers) until
    /// every job is settled.
    async fn drain(&self, jobs: usize) -> BenchResult<Phase> {
        let completed = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&completed);
        let worker = Worker::<ScaleQueues, _>::builder(Arc::clone(&self.worker))
            .concurrency(usize::from(CONCURRENCY))
            .handler(handler_fn(move |job: ScaleJob, _ctx: JobContext| {
                let counter = Arc::clone(&counter);
                async move {
                    std::hint::black_box(job);
                    counter.fetch_add(1, Ordering::Release);
                    Ok::<_, JobError>(())
                }
            }))
            .build()
            .await?;
        let handle = worker.handle();
        let before = Sample::now(&self.pids);
        let started = Instant::now();
        let running = tokio::spawn(worker.run());
        let mut settled = 0;
        while settled < jobs as u64 && started.elapsed() < PHASE_TIMEOUT && !running.is_finished() {
            // Coarse polling until near the end, so that the observer does
            // not wake a thread a thousand times a second on shared cores.
            let left = (jobs as u64).saturating_sub(settled);
            let poll = if left > 2_000 { 20 } else { 1 };
            tokio::time::sleep(Duration::from_millis(poll)).await;
            settled = handle.jobs_settled() + handle.settle_failures();
        }
        let used = before.until(&Sample::now(&self.pids));
        handle.shutdown();
        tokio::time::timeout(PHASE_TIMEOUT, running).await???;
        let done = completed.load(Ordering::Acquire);
        if done != jobs || handle.settle_failures() > 0 {
            return Err(format!(
                "the worker completed {done} of {jobs} jobs ({} settles failed)",
                handle.settle_failures()
            )
            .into());
        }
        Ok(Phase { jobs, used })
    }

    /// Deletes `queues` through the admin connection, each on a fresh
    /// channel (a refusal closes the channel it ran on); a queue that does
    /// not exist counts as deleted.
    async fn delete(&self, queues: &[String]) -> BenchResult<()> {
        let mut failed = Vec::new();
        for queue in queues {
            let deleted = async {
                let channel = self.admin.create_channel().await?;
                let deleting =
                    channel.queue_delete(queue.as_str().into(), QueueDeleteOptions::default());
                let result = tokio::time::timeout(Duration::from_secs(30), deleting).await?;
                let _ = channel.close(200, "deleted".into()).await;
                BenchResult::Ok(result)
            }
            .await;
            match deleted {
                Ok(Ok(_)) => {}
                Ok(Err(e)) if is_not_found(&e) => {}
                Ok(Err(e)) => failed.push(format!("{queue}: {e}")),
                Err(e) => failed.push(format!("{queue}: {e}")),
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!("could not delete: {}", failed.join("; ")).into())
        }
    }
}

fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp) if amqp.get_id() == 404)
}
