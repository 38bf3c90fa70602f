//! Per-key limits across a fleet of worker processes, on a private node
//! and a private `redis-server`: one worker killed with SIGKILL while it
//! holds running slots, then replaced, and the broker killed and started
//! again, while 160 limited jobs run. No job is lost, the concurrency
//! limit holds throughout (copies of one job's message included: a copy
//! delivered while another runs waits for its slot), and so does the
//! rate, in the seconds after the broker came back too (see
//! [`AFTERMATH`]).
//!
//! The work queue is a classic queue (the default): deferred jobs come
//! back at its top priority, ahead of the backlog, as the limits expect,
//! and a classic queue marks its whole recovered backlog redelivered after
//! the broker restart, so every waiting job also passes the poison guard
//! once, which must spend no attempt either.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use queuey::handler::JobRequest;
use queuey::layers::limit::LimitLayer;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use queuey::store::Rate;
use queuey_redis::RedisStore;
use uuid::Uuid;

use crate::fault::chaos;
use crate::fault::child::{self, on_control_stream};
use crate::fault::fleet::Fleet;
use crate::fault::private_redis::PrivateRedis;
use crate::fault::runs::{self, Peak, Run, Start, Writer};
use crate::fault::scenario::{self, Numbered, fault_queue};

fault_queue!(LimitQueues, LimitJob, "limits", |c| c
    .prefetch(child::CONCURRENCY as u16));

/// Worker processes alive at once.
const WORKERS: usize = 4;
/// Keys, and jobs of each.
const KEYS: u32 = 4;
const JOBS: u32 = KEYS * 40;
/// Jobs of a key running at once, at most, fleet-wide.
const PER_KEY: usize = 3;
/// Starts of a key per second, and the burst on top.
const RATE: u32 = 10;
const BURST: u32 = 2;
/// The running slots' lease: short, so that a killed worker's slots come
/// back within the run. Jobs end well before a third of it, when the first
/// renewal would be due.
const LEASE: Duration = Duration::from_secs(3);
/// The limit's name in the store.
const LIMIT: &str = "fault_limit";
/// The variable giving a worker process the store's URL.
const STORE_VAR: &str = "QUEUEY_FAULT_LIMIT_STORE";
/// The test name the worker processes run.
const WORKER_PROCESS: &str = "limits::limits_worker_process";
/// The bound on each step's wait (generous: a small shared machine).
const BOUND: Duration = Duration::from_secs(60);
/// How long after the broker went down an acknowledgement may still have
/// been under way (the job then runs again, at-least-once).
const ACK_MARGIN: Duration = Duration::from_secs(1);
/// The shortest job.
const SHORTEST: Duration = Duration::from_millis(100);
/// The seconds after the first start that follows the broker restart,
/// reported apart. A job told to wait for a reserved turn sits in a hold
/// queue until the turn is due; jobs whose turns fell due while the broker
/// was down come back together once it is up again. The store checks each
/// overdue turn against the starts made and promises the others the next
/// free starts, so even then no second holds more than the rate and its
/// burst.
const AFTERMATH: Duration = Duration::from_secs(5);

/// A job's key.
fn key_of(job: u32) -> String {
    format!("k{}", job % KEYS)
}

/// How long job `job`'s handler runs: 100 to 300 ms.
fn duration_of(job: u32) -> Duration {
    SHORTEST + Duration::from_millis(u64::from(job * 37 % 201))
}

/// Four worker processes, 8 job slots each, run 160 jobs of four keys
/// limited to 3 running at once per key and 10 starts a second (burst 2),
/// their slots leased for 3 s. One worker is killed (`kill -9`) while its
/// ledger shows jobs running and replaced; once its slots' leases have run
/// out, the broker is killed and started again. From the merged ledgers:
/// every job finished at least once; never more than 3 of a key ran at
/// once, a killed job counting as running until its slot's lease ran out,
/// and no run of a job began while another run of it still held its slot
/// (a copy of its message after the restart, or its rerun after the
/// kill); no second held more than 12 starts of a key, the [`AFTERMATH`]
/// of the restart included; and
/// every start was a first attempt, though nearly every job waited
/// (deferred) before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_key_limits_hold_across_a_fleet_through_a_worker_kill_and_a_broker_restart() {
    let began = Instant::now();
    let mut node = private_node!(
        "per_key_limits_hold_across_a_fleet_through_a_worker_kill_and_a_broker_restart"
    );
    let store = PrivateRedis::start();
    let url = node.url();
    let queue = <LimitJob as Job>::QUEUE.name().to_owned();
    let program = std::env::current_exe().expect("the test binary's path");
    let args: Vec<String> = ["--ignored", "--exact", WORKER_PROCESS, "--nocapture"]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
    let mut fleet = Fleet::start(
        WORKERS,
        program,
        &args,
        &url,
        &queue,
        &[(STORE_VAR, &store.url())],
    );
    let setup = began.elapsed();
    for member in 0..WORKERS {
        wait_for(&mut fleet, "the worker processes to start", |fleet| {
            runs::is_ready(&fleet.current_ledger(member))
        })
        .await;
    }
    enqueue(&url, &queue).await;
    let t0 = runs::now_us();

    // A worker killed while it runs jobs (holding their slots), replaced.
    wait_for(&mut fleet, "jobs to run", |fleet| {
        started(fleet) >= 12 && busiest(fleet).1 > 0
    })
    .await;
    let (victim, _) = busiest(&fleet);
    let kill_us = runs::now_us();
    fleet.kill(victim);
    let cut_short = runs::open_runs(&fleet.current_ledger(victim));
    fleet.replace(victim);
    wait_for(&mut fleet, "the replacement to start", |fleet| {
        runs::is_ready(&fleet.current_ledger(victim))
    })
    .await;

    // The broker killed and started again while jobs run, once the killed
    // worker's slots have come back (so that the fleet ran beside them
    // while they were held).
    let leases_out = kill_us + runs::micros(LEASE + Duration::from_secs(1));
    wait_for(&mut fleet, "the killed worker's leases to run out", |_| {
        runs::now_us() > leases_out
    })
    .await;
    let down_us = runs::now_us();
    let done_before = JOBS as usize - runs::lost(&runs::parse(&fleet.ledgers()), JOBS).len();
    node.kill9().await;
    node.restart().await;
    let up_us = runs::now_us();

    // Every job done, the queue empty.
    let node_name = node.name().to_owned();
    let drained = tokio::time::timeout(BOUND, async {
        loop {
            check_alive(&mut fleet);
            let runs = runs::parse(&fleet.ledgers());
            if runs::lost(&runs, JOBS).is_empty()
                && chaos::queue_depth(Some(&node_name), &queue).await == Some((0, 0))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .is_ok();
    // No handler cut short by the end of the run: a copy of a job that
    // came back late may still run.
    if drained {
        wait_for(&mut fleet, "the last handlers to end", |fleet| {
            (0..fleet.size()).all(|m| runs::open_runs(&fleet.current_ledger(m)) == 0)
        })
        .await;
    }
    fleet.kill_all();
    let all = runs::parse(&fleet.ledgers());
    let logs = fleet.logs();

    let verdict = Verdict::of(&all, [down_us, up_us]);
    let report = format!(
        "{verdict}; waits {}; worker {victim} killed at +{:.1} s with {cut_short} jobs running \
         ({}), the broker down at +{:.1} s ({done_before} of {JOBS} jobs done) for {:.1} s; \
         leases lost {}; set-up {:.1} s, whole test {:.1} s",
        waits(&logs),
        secs(kill_us - t0),
        reruns(&all, kill_us),
        secs(down_us - t0),
        secs(up_us - down_us),
        logs.matches("ran out before it could be renewed").count(),
        setup.as_secs_f64(),
        began.elapsed().as_secs_f64(),
    );
    eprintln!("{report}");
    let context = || format!("{report}\n{}", tail(&logs, 60));
    assert!(drained, "the jobs did not all finish: {}", context());
    assert!(verdict.lost.is_empty(), "jobs were lost: {}", context());
    assert!(cut_short > 0, "the killed worker ran no job: {}", context());
    assert!(
        done_before < JOBS as usize,
        "the broker restarted after the jobs were done: {}",
        context()
    );
    assert_eq!(
        verdict.beside_a_copy,
        0,
        "runs began beside a running copy of their job: {}",
        context()
    );
    for (key, peak) in &verdict.at_once {
        assert!(
            peak.count <= PER_KEY,
            "{} jobs of {key} ran at once at +{:.3} s ({}): {}",
            peak.count,
            secs(peak.at_us.saturating_sub(t0)),
            running_at(&all, key, peak.at_us, t0),
            context()
        );
    }
    for peaks in [&verdict.per_second, &verdict.aftermath_per_second] {
        for (key, peak) in peaks {
            assert!(
                peak.count <= (RATE + BURST) as usize,
                "{} jobs of {key} started within a second from +{:.3} s ({}): {}",
                peak.count,
                secs(peak.at_us.saturating_sub(t0)),
                starts_within(&all, key, peak.at_us),
                context()
            );
        }
    }
    assert!(
        verdict.later_attempts.is_empty(),
        "jobs spent attempts waiting: {:?}: {}",
        verdict.later_attempts,
        context()
    );
    assert!(
        verdict.waited > 0,
        "no job waited: the limits never bit: {}",
        context()
    );
}

/// What the merged ledgers say.
struct Verdict {
    runs: usize,
    lost: Vec<u32>,
    /// Runs past each job's first.
    again: usize,
    /// Runs that started while another run of the same job (a copy of
    /// its message) still ran or held its slot.
    beside_a_copy: usize,
    /// Jobs whose run was cut short by the kill, or whose acknowledgement
    /// the broker restart may have lost: their next runs may be later
    /// attempts.
    exempt: BTreeSet<u32>,
    /// Starts past attempt 1 of jobs not exempt.
    later_attempts: Vec<(u32, u32)>,
    /// The highest attempt of any start.
    top_attempt: u32,
    /// Starts that had waited (been deferred) before.
    waited: usize,
    /// Runs at once.
    at_once: BTreeMap<String, Peak>,
    /// Starts per second over the whole run.
    per_second: BTreeMap<String, Peak>,
    /// Starts per second in the aftermath of the restart.
    aftermath_per_second: BTreeMap<String, Peak>,
    /// The aftermath, from when the broker went down.
    aftermath: std::ops::Range<u64>,
}

impl Verdict {
    fn of(runs: &[Run], [down_us, up_us]: [u64; 2]) -> Verdict {
        let margin = runs::micros(ACK_MARGIN);
        let exempt: BTreeSet<u32> = runs
            .iter()
            .filter(|run| {
                let cut_by_kill = run.killed && run.end_us.is_none();
                let cut_by_restart =
                    run.start_us < up_us && run.end_us.is_none_or(|end| end + margin > down_us);
                cut_by_kill || cut_by_restart
            })
            .map(|run| run.job)
            .collect();
        let later_attempts = runs
            .iter()
            .filter(|run| run.attempt != 1 && !exempt.contains(&run.job))
            .map(|run| (run.job, run.attempt))
            .collect();
        let distinct: BTreeSet<u32> = runs.iter().map(|run| run.job).collect();
        let back_us = runs
            .iter()
            .map(|run| run.start_us)
            .find(|&start| start > up_us)
            .unwrap_or(up_us);
        let aftermath = down_us..back_us + runs::micros(AFTERMATH);
        let during: Vec<Run> = runs
            .iter()
            .filter(|run| aftermath.contains(&run.start_us))
            .cloned()
            .collect();
        Verdict {
            runs: runs.len(),
            lost: runs::lost(runs, JOBS),
            again: runs.len() - distinct.len(),
            beside_a_copy: runs
                .iter()
                .filter(|run| copy_running(runs, run).is_some())
                .count(),
            exempt,
            later_attempts,
            top_attempt: runs.iter().map(|run| run.attempt).max().unwrap_or(0),
            waited: runs.iter().filter(|run| run.deferrals > 0).count(),
            at_once: runs::most_at_once(runs, LEASE),
            per_second: runs::busiest_window(runs, Duration::from_secs(1)),
            aftermath_per_second: runs::busiest_window(&during, Duration::from_secs(1)),
            aftermath,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let counts = |peaks: &BTreeMap<String, Peak>| -> BTreeMap<String, usize> {
            peaks.iter().map(|(k, p)| (k.clone(), p.count)).collect()
        };
        write!(
            f,
            "{JOBS} jobs in {} runs ({} again), lost {:?}; most running at once per key {:?} \
             (limit {PER_KEY}; {} runs began beside a running copy of their job); most starts in one second per key {:?} (limit {}), and in the {:.1} s \
             after the broker went down {:?}; starts after waiting {}; highest attempt {} ({} \
             jobs exempt: cut short by the kill or the restart)",
            self.runs,
            self.again,
            self.lost,
            counts(&self.at_once),
            self.beside_a_copy,
            counts(&self.per_second),
            RATE + BURST,
            secs(self.aftermath.end - self.aftermath.start),
            counts(&self.aftermath_per_second),
            self.waited,
            self.top_attempt,
            self.exempt.len(),
        )
    }
}

/// The run of `run`'s job that was running, or holding its slot, when
/// `run` started, if any: a copy of the job's message delivered twice (a
/// broker that restarts keeps the copy of a message whose acknowledgement
/// it had not taken, beside the one published in its place), or a rerun
/// of a job the kill cut short. The limit makes such a run wait for the
/// slot, so there should be none.
fn copy_running<'a>(runs: &'a [Run], run: &Run) -> Option<&'a Run> {
    runs.iter().find(|other| {
        other.job == run.job
            && other.start_us < run.start_us
            && runs::running_until(other, LEASE) > run.start_us
    })
}

/// How many times the workers deferred a job for its limit, by reason
/// (from their debug lines).
fn waits(logs: &str) -> String {
    let waits: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("the job waits for its limit"))
        .collect();
    let count = |why: &str| {
        let field = format!("wait=\"{why}\"");
        waits.iter().filter(|line| line.contains(&field)).count()
    };
    format!(
        "{} (rate {}, concurrency {}, store {})",
        waits.len(),
        count("rate"),
        count("concurrency"),
        count("store")
    )
}

/// For each run the kill cut short: its job, how long after the kill the
/// job started again, and the most runs of its key at once (it included)
/// while its slot stayed leased after the kill.
fn reruns(runs: &[Run], kill_us: u64) -> String {
    let cut: Vec<String> = runs
        .iter()
        .filter(|run| run.killed && run.end_us.is_none())
        .map(|run| {
            let again = runs
                .iter()
                .filter(|other| other.job == run.job && other.start_us > run.start_us)
                .map(|other| other.start_us)
                .min()
                .map_or("never again".to_owned(), |at| {
                    format!("again after {:.1} s", secs(at - kill_us))
                });
            let until = runs::running_until(run, LEASE);
            let beside = runs::most_between(runs, LEASE, &run.key, kill_us, until);
            format!(
                "job {} of {} {again}, leased {:.1} s more, {beside} at once",
                run.job,
                run.key,
                secs(until.saturating_sub(kill_us))
            )
        })
        .collect();
    cut.join("; ")
}

/// The runs of `key` running at `at_us` (see [`runs::running_until`]):
/// job, process, and when it asked, started and ended or stopped counting
/// (s after `t0`).
fn running_at(runs: &[Run], key: &str, at_us: u64, t0: u64) -> String {
    let at = |us: u64| secs(us.saturating_sub(t0));
    runs.iter()
        .filter(|run| run.key == key && run.start_us <= at_us)
        .filter(|run| runs::running_until(run, LEASE) > at_us)
        .map(|run| {
            format!(
                "job {} in process {}{} asked {:.3} started {:.3} {} {:.3}",
                run.job,
                run.process,
                if run.killed { " (killed)" } else { "" },
                at(run.asked_us),
                at(run.start_us),
                if run.end_us.is_some() {
                    "ended"
                } else {
                    "counted until"
                },
                at(runs::running_until(run, LEASE))
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The runs of `key` that started within a second from `from_us`: job,
/// deferrals before, and when it asked and started (ms after `from_us`).
fn starts_within(runs: &[Run], key: &str, from_us: u64) -> String {
    let offset = |us: u64| (us as i64 - from_us as i64) / 1_000;
    runs.iter()
        .filter(|run| {
            run.key == key && run.start_us >= from_us && run.start_us < from_us + 1_000_000
        })
        .map(|run| {
            format!(
                "job {} deferred {} asked {} started {}",
                run.job,
                run.deferrals,
                offset(run.asked_us),
                offset(run.start_us)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn secs(us: u64) -> f64 {
    Duration::from_micros(us).as_secs_f64()
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Handler starts across the fleet's current processes.
fn started(fleet: &Fleet) -> usize {
    (0..fleet.size())
        .map(|m| fleet.current_ledger(m).matches("\nS ").count())
        .sum()
}

/// The member running the most jobs now, and how many.
fn busiest(fleet: &Fleet) -> (usize, usize) {
    (0..fleet.size())
        .map(|m| (m, runs::open_runs(&fleet.current_ledger(m))))
        .max_by_key(|&(_, open)| open)
        .unwrap_or((0, 0))
}

/// Fails when a worker process ended by itself.
fn check_alive(fleet: &mut Fleet) {
    let exited = fleet.exited();
    assert!(
        exited.is_empty(),
        "worker processes {exited:?} ended by themselves:\n{}",
        tail(&fleet.logs(), 60)
    );
}

/// Polls `done` every 20 ms (failing if a worker process ends) until it
/// holds, failing after [`BOUND`].
async fn wait_for(fleet: &mut Fleet, what: &str, mut done: impl FnMut(&mut Fleet) -> bool) {
    let started = Instant::now();
    while !done(fleet) {
        check_alive(fleet);
        assert!(
            started.elapsed() < BOUND,
            "waited {BOUND:?} for {what}:\n{}",
            tail(&fleet.logs(), 60)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Enqueues the jobs `0..JOBS`, each confirmed.
async fn enqueue(url: &str, queue: &str) {
    let options = on_control_stream(
        RabbitMqOptions::default().connection_name("queuey-fault-limits-producer"),
        &child::control_stream(queue),
    );
    let (backend, producer) = scenario::producer::<LimitJob>(url, options).await;
    let failed: Vec<String> = futures::stream::iter(0..JOBS)
        .map(|n| {
            let producer = &producer;
            async move { producer.enqueue(&LimitJob::numbered(n)).await }
        })
        .buffer_unordered(16)
        .filter_map(|sent| async move { sent.err().map(|e| e.to_string()) })
        .collect()
        .await;
    assert!(failed.is_empty(), "enqueueing failed: {failed:?}");
    scenario::close(&backend).await;
}

/// Not a test: a worker process of the per-key limits test, which starts
/// this binary again with this test's name. Runs until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of the per-key limits test, started by it"]
async fn limits_worker_process() {
    assert!(
        child::is_child(),
        "only the per-key limits test starts this"
    );
    tracing_subscriber::fmt()
        // Each wait of the limit is a debug line: the test counts them.
        .with_env_filter("info,lapin=warn,queuey_tower::limit=debug")
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    limited_worker().await;
}

/// The body of a worker process: consumes the parent's queue, each job
/// inside the limit, writing its runs to the process's ledger.
async fn limited_worker() {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let ledger = Arc::new(Writer::open(&var("QUEUEY_FAULT_LEDGER")));
    let queue = var("QUEUEY_FAULT_QUEUE");
    let options = on_control_stream(
        RabbitMqOptions::default()
            .connection_name(format!("queuey-fault-limits-{}", std::process::id())),
        &child::control_stream(&queue),
    );
    let backend = Arc::new(
        RabbitMqBackend::with_options(&var("QUEUEY_FAULT_CHILD_URL"), options)
            .await
            .expect("the worker process connects"),
    );
    let store = RedisStore::connect(&var(STORE_VAR))
        .await
        .expect("the store connects");
    // When the layer began to ask for each job's turn and slot.
    let asked: Arc<Mutex<HashMap<Uuid, u64>>> = Arc::default();
    let asking = Arc::clone(&asked);
    let rate = format!("{RATE}/s")
        .parse::<Rate>()
        .and_then(|rate| rate.with_burst(BURST))
        .expect("a rate");
    let limit = LimitLayer::new(LIMIT, store, move |request: &JobRequest<LimitJob>| {
        asking
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request.ctx().job_id(), runs::now_us());
        Some(key_of(request.job().number()))
    })
    .concurrency(PER_KEY as u32)
    .expect("a concurrency limit")
    .rate(rate)
    .lease(LEASE);
    let log = Arc::clone(&ledger);
    let handler = handler_fn(move |job: LimitJob, ctx: JobContext| {
        let (log, asked) = (Arc::clone(&log), Arc::clone(&asked));
        async move {
            let n = job.number();
            let asked_us = asked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&ctx.job_id())
                .unwrap_or(0);
            let run = log.started(&Start {
                key: key_of(n),
                job: n,
                attempt: ctx.attempt(),
                deferrals: ctx.deferrals(),
                asked_us,
            });
            tokio::time::sleep(duration_of(n)).await;
            log.ended(run);
            Ok::<(), JobError>(())
        }
    });
    let worker = Worker::<LimitQueues, _>::builder(backend)
        .concurrency(child::CONCURRENCY)
        .handler_with(handler, limit)
        .build()
        .await
        .expect("the worker builds");
    ledger.ready();
    let result = worker.run().await;
    eprintln!("the worker process's run ended: {result:?}");
}
