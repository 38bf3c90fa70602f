//! A sharded quorum queue on a three-node cluster: its shards' leaders
//! spread over the nodes (`x-queue-leader-locator: balanced`), and the node
//! leading one shard killed with SIGKILL while jobs flow costs no job.
//!
//! One logical queue of [`SHARDS`] quorum shards, plus its lane. A producer
//! and a worker connect with every node's address, node 1 first; every
//! queue is declared through node 1, so node 1 leads the lane and the
//! dead-letter queues, and the shards' leaders are placed by the broker.
//! Half the jobs carry a key (one of [`KEYS`] customers), the others go to
//! the shards in turn; every job succeeds at once (nothing goes through a
//! hold: a quorum hold whose leader is killed can stall on RabbitMQ 3.10.8,
//! which `cluster.rs` covers). A few seconds in, the node other than node
//! 1 that leads the most shards is killed; it is not restarted.
//!
//! The test asserts: the shards were led by at least two distinct nodes
//! before the kill, every shard had a leader on a live node again after
//! it, every confirmed job was handled (0 lost, 0 unexpected; duplicates
//! counted and printed), jobs were handled after the kill, the worker never
//! stopped by itself, every job with a key was handled from its key's
//! shard, every shard delivered jobs and the lane none, and every queue was
//! empty at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuey::prelude::*;
use queuey::queue::QueueType;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use queuey::shard::{parse_shard_name, shard_for_key};

use crate::fault::cluster::{Cluster, Placement};
use crate::fault::ledger::{Check, Ledger};
use crate::fault::scenario::{self, Numbered, Pace};

/// Shards of the run's queue.
const SHARDS: u16 = 4;
/// Distinct keys among the keyed jobs.
const KEYS: u32 = 10;
/// The node the clients reach first (and every queue is declared through).
const CLIENT_NODE: usize = 0;
/// When the shard leader is killed, counted from the first enqueue.
const KILL_AT: Duration = Duration::from_secs(3);
/// How long, once every job is confirmed, the run waits for the last ones
/// to be handled and every queue to be empty.
const DRAIN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardedQueues {
    Work,
}

impl queuey::Queues for ShardedQueues {
    const ALL: &'static [Self] = &[ShardedQueues::Work];

    fn name(&self) -> &'static str {
        static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
        NAME.get_or_init(|| {
            let name = format!("queuey-fault.shards.{}", uuid::Uuid::new_v4().simple());
            Box::leak(name.into_boxed_str())
        })
    }

    fn config(&self) -> queuey::queue::QueueConfig {
        queuey::queue::QueueConfig::new(self.name())
            .queue_type(QueueType::Quorum)
            .shards(SHARDS)
            .prefetch(32)
    }
}

/// A numbered job; even numbers carry a key ([`ShardJob::key_of`]), odd
/// ones none.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ShardJob {
    n: u32,
}

impl ShardJob {
    /// The key of job `n`, if it has one.
    fn key_of(n: u32) -> Option<String> {
        n.is_multiple_of(2)
            .then(|| format!("customer-{}", (n / 2) % KEYS))
    }
}

impl queuey::Job for ShardJob {
    type Queues = ShardedQueues;
    type Output = ();
    const QUEUE: ShardedQueues = ShardedQueues::Work;
    const NAME: &'static str = "shard_fault_job";

    fn key(&self) -> Option<String> {
        ShardJob::key_of(self.n)
    }
}

impl Numbered for ShardJob {
    fn numbered(n: u32) -> Self {
        ShardJob { n }
    }

    fn number(&self) -> u32 {
        self.n
    }
}

/// Which shard each handled job came from, as its handler saw it.
#[derive(Debug, Default)]
struct Seen {
    /// Jobs handled from each shard.
    by_shard: BTreeMap<u16, u64>,
    /// Jobs handled from the lane (none expected: the producer shards).
    from_lane: u64,
    /// Keyed jobs handled from another shard than their key's:
    /// (job, shard it came from, its key's shard).
    misplaced: Vec<(u32, u16, u16)>,
}

/// What the run measured.
#[derive(Debug)]
struct ShardReport {
    queue: String,
    jobs: u32,
    /// The shards' placements just before the kill.
    before: BTreeMap<String, Placement>,
    /// The node killed.
    killed: Option<usize>,
    /// The shards' placements once each had a leader on a live node again.
    after: Result<BTreeMap<String, Placement>, String>,
    /// From the kill until every shard had a leader on a live node.
    led_in: Option<Duration>,
    check: Check,
    producer_errors: BTreeMap<String, u64>,
    /// Jobs handled after the kill.
    handled_after_kill: u64,
    seen: Seen,
    /// Messages in every queue of the run at the end.
    left: BTreeMap<String, u64>,
    worker_exit: Option<String>,
    worker_result: String,
    settle_failures: u64,
    timed_out: bool,
    elapsed: Duration,
}

impl ShardReport {
    /// The distinct nodes that led a shard before the kill.
    fn leading_nodes(&self) -> BTreeSet<usize> {
        self.before.values().filter_map(|p| p.leader).collect()
    }

    fn assert_nothing_lost(&self) {
        let shards = usize::from(SHARDS);
        assert_eq!(
            self.before.len(),
            shards,
            "every shard listed before the kill: {self}"
        );
        assert!(
            self.leading_nodes().len() >= 2,
            "the shards' leaders were not spread over the nodes: {self}"
        );
        let killed = self.killed.expect("a shard leader was killed");
        assert_ne!(killed, CLIENT_NODE, "{self}");
        let after = self.after.as_ref().expect("every shard led again");
        assert!(
            after
                .values()
                .all(|p| p.leader.is_some_and(|l| l != killed)),
            "a shard was still led by the killed node: {self}"
        );
        assert!(!self.timed_out, "the run hit its deadline: {self}");
        assert!(self.check.lost.is_empty(), "confirmed jobs lost: {self}");
        assert!(
            self.check.unexpected.is_empty(),
            "unknown jobs handled: {self}"
        );
        assert_eq!(
            self.check.confirmed, self.jobs as usize,
            "not every job was confirmed: {self}"
        );
        assert!(
            self.handled_after_kill > 0,
            "no job was handled after the kill: {self}"
        );
        assert!(
            self.worker_exit.is_none(),
            "the worker stopped by itself: {self}"
        );
        assert_eq!(self.worker_result, "Ok", "Worker::run failed: {self}");
        assert!(
            self.seen.misplaced.is_empty(),
            "keyed jobs came from another shard than their key's: {self}"
        );
        assert_eq!(
            self.seen.by_shard.len(),
            shards,
            "a shard delivered no job: {self}"
        );
        assert_eq!(self.seen.from_lane, 0, "jobs came from the lane: {self}");
        let work_queues = self
            .left
            .keys()
            .filter(|q| **q == self.queue || is_shard_of(q, &self.queue))
            .count();
        assert_eq!(
            work_queues,
            shards + 1,
            "the lane and every shard listed at the end: {self}"
        );
        assert!(
            self.left.values().all(|&m| m == 0),
            "messages were left in a queue: {self}"
        );
    }
}

impl fmt::Display for ShardReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let placed = |placements: &BTreeMap<String, Placement>| {
            placements
                .iter()
                .map(|(q, p)| format!("{}: {p}", q.rsplit('.').next().unwrap_or(q)))
                .collect::<Vec<_>>()
                .join("; ")
        };
        writeln!(
            f,
            "[sharded quorum queue, {SHARDS} shards, 3 nodes] {} jobs in {:.1} s: {}",
            self.jobs,
            self.elapsed.as_secs_f64(),
            self.check
        )?;
        writeln!(f, "  before the kill: {}", placed(&self.before))?;
        match &self.after {
            Ok(after) => writeln!(
                f,
                "  killed {}; every shard led again in {}: {}",
                self.killed
                    .map_or("none".to_owned(), |k| format!("n{}", k + 1)),
                self.led_in
                    .map_or("–".to_owned(), |d| format!("{:.1} s", d.as_secs_f64())),
                placed(after)
            )?,
            Err(e) => writeln!(f, "  after the kill: {e}")?,
        }
        write!(
            f,
            "  handled after the kill {}; by shard {:?}, from the lane {}, keyed jobs off their \
             shard {:?}; producer errors {:?}; settle failures {}; {} queues listed at the end, \
             not empty: {:?}; worker exit {:?}; worker result {}",
            self.handled_after_kill,
            self.seen.by_shard,
            self.seen.from_lane,
            self.seen.misplaced.iter().take(10).collect::<Vec<_>>(),
            self.producer_errors,
            self.settle_failures,
            self.left.len(),
            self.left
                .iter()
                .filter(|&(_, &m)| m > 0)
                .collect::<BTreeMap<_, _>>(),
            self.worker_exit,
            self.worker_result
        )
    }
}

/// Whether `name` is one of `queue`'s shards (`queue.s{n}`).
fn is_shard_of(name: &str, queue: &str) -> bool {
    parse_shard_name(name).is_some_and(|(base, _)| base == queue)
}

/// The placements of `queue`'s shards only.
async fn shard_placements(
    cluster: &Cluster,
    queue: &str,
) -> Result<BTreeMap<String, Placement>, String> {
    let mut placements = cluster.placements(queue).await?;
    placements.retain(|name, _| is_shard_of(name, queue));
    Ok(placements)
}

/// The node, other than the clients', that leads the most shards.
fn victim(placements: &BTreeMap<String, Placement>) -> Option<usize> {
    let mut led = BTreeMap::<usize, usize>::new();
    for leader in placements.values().filter_map(|p| p.leader) {
        *led.entry(leader).or_default() += 1;
    }
    led.into_iter()
        .filter(|&(node, _)| node != CLIENT_NODE)
        .max_by_key(|&(node, count)| (count, std::cmp::Reverse(node)))
        .map(|(node, _)| node)
}

/// A backend on every node of `cluster`, node 1 first.
async fn backend(cluster: &Cluster, name: &str) -> Arc<RabbitMqBackend> {
    let options = RabbitMqOptions::default()
        .connection_name(name)
        .heartbeat(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(3))
        .call_timeout(Duration::from_secs(10))
        .reconnect_delay(Duration::from_millis(50), Duration::from_secs(1));
    Arc::new(
        RabbitMqBackend::with_options(cluster.urls_from(CLIENT_NODE), options)
            .await
            .expect("a client connects to the cluster"),
    )
}

async fn run(cluster: &mut Cluster, pace: &Pace) -> ShardReport {
    let started = Instant::now();
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let queue = <ShardJob as Job>::QUEUE.name().to_owned();
    let ledger = Arc::new(Ledger::default());
    ledger.attempted(pace.jobs);

    // The producer declares the lane, the shards and their companions
    // through node 1; the broker places the shards' leaders.
    let producer_backend = backend(cluster, &format!("queuey-shards-producer-{run_id}")).await;
    let producer = Producer::<ShardedQueues, _>::new(Arc::clone(&producer_backend))
        .await
        .expect("the producer declares the sharded queue");
    let before = cluster
        .await_leaders(&queue, usize::from(SHARDS), Duration::from_secs(30))
        .await
        .map(|mut all| {
            all.retain(|name, _| is_shard_of(name, &queue));
            all
        })
        .unwrap_or_default();
    let killed = victim(&before);

    let worker_backend = backend(cluster, &format!("queuey-shards-worker-{run_id}")).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let kill_done = Arc::new(AtomicBool::new(false));
    let after_kill = Arc::new(AtomicU64::new(0));
    let (log, seen_by, flag, counter) = (
        Arc::clone(&ledger),
        Arc::clone(&seen),
        Arc::clone(&kill_done),
        Arc::clone(&after_kill),
    );
    let worker = Worker::<ShardedQueues, _>::builder(Arc::clone(&worker_backend))
        .handler(handler_fn(move |job: ShardJob, ctx: JobContext| {
            let (log, seen_by) = (Arc::clone(&log), Arc::clone(&seen_by));
            let (flag, counter) = (Arc::clone(&flag), Arc::clone(&counter));
            async move {
                {
                    let mut seen = seen_by.lock().unwrap_or_else(|p| p.into_inner());
                    match ctx.shard() {
                        Some(shard) => {
                            *seen.by_shard.entry(shard).or_default() += 1;
                            if let Some(key) = job.key() {
                                let expected = shard_for_key(&key, SHARDS);
                                if expected != shard {
                                    seen.misplaced.push((job.n, shard, expected));
                                }
                            }
                        }
                        None => seen.from_lane += 1,
                    }
                }
                if flag.load(Ordering::Acquire) {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                log.handled(job.n);
                Ok::<_, JobError>(())
            }
        }))
        .concurrency(pace.concurrency)
        .shutdown_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect("the worker builds");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    // Jobs flow; the shard leader dies under them.
    let producing = scenario::produce_paced::<ShardJob>(&producer, pace, &ledger);
    let killing = async {
        tokio::time::sleep(KILL_AT).await;
        let Some(node) = killed else {
            return (
                Err("no shard was led by another node than n1".to_owned()),
                None,
            );
        };
        let at = Instant::now();
        cluster.kill9(node).await;
        kill_done.store(true, Ordering::Release);
        let after = cluster
            .await_leaders(&queue, usize::from(SHARDS), Duration::from_secs(60))
            .await;
        let led_in = at.elapsed();
        let after = match after {
            Ok(_) => shard_placements(cluster, &queue).await,
            Err(e) => Err(e),
        };
        (after, Some(led_in))
    };
    let (producer_errors, (after, led_in)) = tokio::join!(producing, killing);

    // Every confirmed job handled and every queue empty, or the deadline.
    let last_call = Instant::now() + DRAIN;
    let mut worker_exit = None;
    let mut timed_out = false;
    let left = loop {
        if running.is_finished() && worker_exit.is_none() {
            worker_exit = Some("Worker::run returned before the shutdown".to_owned());
        }
        let left = cluster.messages(&queue).await.unwrap_or_default();
        let (done, confirmed) = ledger.confirmed_handled();
        let listed = left
            .keys()
            .filter(|q| **q == queue || is_shard_of(q, &queue))
            .count();
        if done == confirmed && listed == usize::from(SHARDS) + 1 && left.values().all(|&m| m == 0)
        {
            break left;
        }
        if Instant::now() > last_call {
            timed_out = true;
            break left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let worker_result = scenario::shut_down(&handle, running).await;
    let settle_failures = handle.settle_failures();
    scenario::close(&worker_backend).await;
    scenario::close(&producer_backend).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
    ShardReport {
        queue,
        jobs: pace.jobs,
        before,
        killed,
        after,
        led_in,
        check: ledger.check(),
        producer_errors,
        handled_after_kill: after_kill.load(Ordering::Relaxed),
        seen,
        left,
        worker_exit,
        worker_result,
        settle_failures,
        timed_out,
        elapsed: started.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_spreads_its_leaders_and_loses_no_job_when_a_shard_leader_dies() {
    let _one = crate::private::one_cluster_at_a_time().await;
    let mut cluster = private_cluster!("shards", 3);
    let pace = Pace {
        jobs: 2_000,
        concurrency: 32,
        spread: Duration::from_secs(8),
        deadline: Duration::from_secs(120),
    };
    let report = run(&mut cluster, &pace).await;
    let stopping = Instant::now();
    let (started, joined) = cluster.formed_in();
    drop(cluster);
    eprintln!(
        "{report}\n  cluster: nodes started in {:.1} s, joined in {:.1} s, stopped in {:.1} s",
        started.as_secs_f64(),
        joined.as_secs_f64(),
        stopping.elapsed().as_secs_f64()
    );
    report.assert_nothing_lost();
}
