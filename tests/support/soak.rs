//! The fault scenarios of `tests/faults/` at any size, for a soak run by
//! hand:
//!
//! ```sh
//! AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//!     cargo run -p queuey --release --example soak -- SCENARIO [JOBS] [HOLDS | once]
//! ```
//!
//! `SCENARIO` is one of `none`, `close`, `reset`, `black-hole`,
//! `stop-app`, `kill-9`, `worker-crash`, `store-kill`, `cluster`,
//! `restart-backlog`; `JOBS` defaults to 200000 (`cluster` and
//! `restart-backlog`: 20000). Each
//! run has one producer backend and one worker (`worker-crash`: worker
//! processes, this binary started again, killed with SIGKILL every 1.5 s),
//! injects its fault until every job is confirmed, waits until every
//! confirmed job was handled and the queue is empty, and prints the
//! total-queue verdict and a RELIABILITY.md table row. It exits with 1 if a
//! confirmed job was lost.
//!
//! `HOLDS` (`quorum` or `classic`) sends every job through a hold queue of
//! that kind once: its first attempt fails and it comes back after 1 s, so
//! the faults land while jobs wait in holds and move back to the work queue
//! (`kill-9 5000 classic` shows what classic holds lose in a broker crash).
//!
//! `once` gives the worker the idempotency layer on a private
//! `redis-server` (the `redis-server` program needed), and the report
//! counts the handler runs it let through; `store-kill` (always `once`)
//! kills that Redis with SIGKILL every 4 s instead of breaking the broker.
//!
//! `close` closes the run's own connections on the broker of `AMQP_URL`
//! with `rabbitmqctl`; `reset` and `black-hole` go through an in-process
//! TCP proxy; `stop-app` and `kill-9` start a private RabbitMQ node of their
//! own (root, the `rabbitmq-server` package) and never touch the broker of
//! `AMQP_URL`. `cluster` starts a three-node cluster of private nodes, runs
//! the leader-kill form of the cluster failover scenario of
//! `tests/faults/cluster.rs` (quorum queues and holds all led by node 1, the
//! clients' node, which is killed with SIGKILL while jobs flow and
//! restarted before the final count) with its jobs spread at 250 a second,
//! prints the verdict and a row, and stops the cluster. `restart-backlog`
//! queues `JOBS` jobs on a classic work queue of a private node, runs them
//! with one worker (16 at a time, 10 ms each), kills the node after 3 s and
//! starts it again, and prints how soon the worker ran at 80 % of its pace
//! again and where the poison guard sent the jobs the broker returned.
//! Runs are heavy: one at a time.

#[path = "fault/mod.rs"]
mod fault;

use fault::scenario::{self, Fault, Plan, Site, fault_queue};

fault_queue!(SoakQueues, SoakJob, "soak");
fault_queue!(BacklogQueues, BacklogJob, "soak-backlog", |c| c);
fault_queue!(
    ClusterQueues,
    ClusterJob,
    "soak-cluster",
    crate::fault::failover::quorum_config
);

const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if fault::child::is_child() {
        runtime.block_on(fault::child::child_worker::<SoakJob>());
        return;
    }
    let mut args = std::env::args().skip(1);
    let usage = "usage: soak SCENARIO [JOBS] [HOLDS | once]; SCENARIO: none, close, reset, \
                 black-hole, stop-app, kill-9, worker-crash, store-kill, cluster, \
                 restart-backlog; HOLDS: quorum, classic";
    let scenario = args.next();
    let cluster = scenario.as_deref() == Some("cluster");
    let backlog = scenario.as_deref() == Some("restart-backlog");
    let fault = scenario.as_deref().and_then(Fault::parse);
    if fault.is_none() && !cluster && !backlog {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let jobs = match args.next().map(|j| j.parse::<u32>()) {
        None if cluster || backlog => 20_000,
        None => 200_000,
        Some(Ok(jobs)) if jobs > 0 => jobs,
        Some(_) => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    if backlog {
        let (report, guard) = until_stopped(&runtime, soak_backlog(jobs));
        println!("{report}; {guard}");
        if !report.check.lost.is_empty() || !report.drained {
            std::process::exit(1);
        }
        return;
    }
    let Some(fault) = fault else {
        let report = until_stopped(&runtime, soak_cluster(jobs));
        println!("{report}");
        println!("{}", report.row());
        if report.unaccounted() > 0 || !report.check.unexpected.is_empty() || report.timed_out {
            std::process::exit(1);
        }
        return;
    };
    let mut once = false;
    let holds = match args.next().as_deref() {
        None => None,
        Some("quorum") => Some(queuey::rabbitmq::HoldQueues::Quorum),
        Some("classic") => Some(queuey::rabbitmq::HoldQueues::Classic),
        Some("once") => {
            once = true;
            None
        }
        Some(_) => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let mut plan = Plan::soak(fault, jobs);
    if once {
        plan = plan.once(jobs);
    }
    if let Some(holds) = holds {
        plan = plan.through_holds(holds);
        // A job lost in a hold never comes back: wait a bounded time for
        // the stragglers, then report what is missing.
        plan.deadline = std::time::Duration::from_secs(240);
    }
    let report = until_stopped(&runtime, soak(plan));
    println!("{report}");
    println!("{}", report.row());
    if !report.check.lost.is_empty() || !report.check.unexpected.is_empty() || report.timed_out {
        std::process::exit(1);
    }
}

/// Runs `run` to its end, unless Ctrl-C or SIGTERM comes first: then the
/// run is dropped (which stops the private nodes it started) and the
/// process exits.
fn until_stopped<F: std::future::Future>(runtime: &tokio::runtime::Runtime, run: F) -> F::Output {
    let ended = runtime.block_on(async {
        tokio::select! {
            ended = run => Some(ended),
            () = queuey::shutdown_signal() => None,
        }
    });
    ended.unwrap_or_else(|| {
        eprintln!("interrupted");
        std::process::exit(130)
    })
}

async fn soak(plan: Plan) -> scenario::Report {
    let fault = plan.fault;
    if fault.needs_private_node() {
        if let Err(why) = fault::node::available() {
            eprintln!("cannot start a private RabbitMQ node: {why}");
            std::process::exit(2);
        }
        let mut node = fault::node::PrivateNode::start("soak").await;
        let url = node.url();
        let site = Site {
            url,
            tls: queuey::rabbitmq::TlsOptions::default(),
            node: Some(&mut node),
            child: None,
        };
        return scenario::run::<SoakJob>(&plan, site).await;
    }
    let url = std::env::var("AMQP_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let child = (fault == Fault::WorkerCrash).then(|| {
        let program = std::env::current_exe().expect("this program's path");
        (program, Vec::new())
    });
    scenario::run::<SoakJob>(
        &plan,
        Site {
            url,
            tls: queuey::rabbitmq::TlsOptions::default(),
            node: None,
            child,
        },
    )
    .await
}

async fn soak_backlog(jobs: u32) -> (fault::backlog::BacklogReport, String) {
    if let Err(why) = fault::node::available() {
        eprintln!("cannot start a private RabbitMQ node: {why}");
        std::process::exit(2);
    }
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the soak run's only metrics recorder");
    let mut node = fault::node::PrivateNode::start("soak-backlog").await;
    let report = fault::backlog::run::<BacklogJob>(&mut node, jobs, 16).await;
    // One snapshot: a snapshot takes the counts.
    let counted: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            metrics_util::debugging::DebugValue::Counter(n) => {
                Some((key.key().name().to_owned(), n))
            }
            _ => None,
        })
        .collect();
    let count = |name: &str| -> u64 {
        counted
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, c)| c)
            .sum()
    };
    let guard = format!(
        "the poison guard sent {} jobs back to the work queue and {} to the suspect queue",
        count("queuey_rabbitmq_first_returns_total"),
        count("queuey_rabbitmq_suspects_total")
    );
    (report, guard)
}

async fn soak_cluster(jobs: u32) -> fault::failover::FailoverReport {
    if let Err(why) = fault::node::available() {
        eprintln!("cannot start a private RabbitMQ cluster: {why}");
        std::process::exit(2);
    }
    let mut cluster = fault::cluster::Cluster::start("soak", 3).await;
    let (started, joined) = cluster.formed_in();
    eprintln!(
        "cluster: nodes started in {:.1} s, joined in {:.1} s",
        started.as_secs_f64(),
        joined.as_secs_f64()
    );
    let plan = fault::failover::FailoverPlan::soak(jobs);
    fault::failover::run::<ClusterJob>(&plan, &mut cluster).await
}
