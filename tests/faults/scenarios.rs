//! The fault scenarios at CI size (a few thousand jobs each), with
//! total-queue accounting: 0 confirmed jobs lost, 0 unexpected, no worker
//! restart, one producer backend for the whole run; duplicates reported.
//! The same scenarios with the idempotency layer on a private Redis (fewer
//! jobs, the same faults) must also run every job's handler once; and with
//! that Redis killed mid-run, every job still runs (at-least-once).
//! `cargo run -p queuey --release --example soak -- SCENARIO JOBS [once]` runs the
//! same at any size.

use crate::fault::scenario::{self, Fault, Plan, Site, fault_queue};

fault_queue!(NoneQueues, NoneJob, "none");
fault_queue!(CloseQueues, CloseJob, "close");
fault_queue!(ResetQueues, ResetJob, "reset");
fault_queue!(HoleQueues, HoleJob, "black-hole");
fault_queue!(StopQueues, StopJob, "stop-app");
fault_queue!(KillQueues, KillJob, "kill-9");
fault_queue!(CrashQueues, CrashJob, "worker-crash");
fault_queue!(HeldQueues, HeldJob, "held-kill-9");
fault_queue!(CloseOnceQueues, CloseOnceJob, "close-once");
fault_queue!(ResetOnceQueues, ResetOnceJob, "reset-once");
fault_queue!(KillOnceQueues, KillOnceJob, "kill-9-once");
fault_queue!(CrashOnceQueues, CrashOnceJob, "worker-crash-once");
fault_queue!(StoreKillQueues, StoreKillJob, "store-kill");

/// Jobs of a run whose worker handles each job once: fewer than the plain
/// runs, under the same faults.
const ONCE_JOBS: u32 = 2_000;

fn shared(test: &str) -> Option<Site<'static>> {
    let url = crate::support::amqp_url(test)?;
    Some(Site {
        url,
        tls: queuey::rabbitmq::TlsOptions::default(),
        node: None,
        child: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_faults_every_job_is_handled() {
    let Some(site) = shared("without_faults_every_job_is_handled") else {
        return;
    };
    let report = scenario::run::<NoneJob>(&Plan::ci(Fault::None), site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_by_the_broker_lose_nothing() {
    let Some(site) = shared("connections_closed_by_the_broker_lose_nothing") else {
        return;
    };
    let report = scenario::run::<CloseJob>(&Plan::ci(Fault::Close), site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_by_the_broker_run_each_job_once() {
    let Some(site) = shared("connections_closed_by_the_broker_run_each_job_once") else {
        return;
    };
    let plan = Plan::ci(Fault::Close).once(ONCE_JOBS);
    let report = scenario::run::<CloseOnceJob>(&plan, site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_handled_once();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_resets_run_each_job_once() {
    let Some(site) = shared("tcp_resets_run_each_job_once") else {
        return;
    };
    let plan = Plan::ci(Fault::Reset).once(ONCE_JOBS);
    let report = scenario::run::<ResetOnceJob>(&plan, site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_handled_once();
}

/// The store killed twice mid-run (and started again empty): the layer
/// fails open, so every job still runs, at-least-once, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_store_loses_nothing_and_says_jobs_run_at_least_once() {
    // The harness's broker view installs the log capture.
    let broker = broker!("a_killed_store_loses_nothing_and_says_jobs_run_at_least_once");
    let site = Site {
        url: broker.url.clone(),
        tls: queuey::rabbitmq::TlsOptions::default(),
        node: None,
        child: None,
    };
    let plan = Plan::ci(Fault::StoreKill).once(ONCE_JOBS);
    let report = scenario::run::<StoreKillJob>(&plan, site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
    let warnings = crate::support::warnings_mentioning(&report.queue);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("idempotency store") && w.contains("at-least-once")),
        "no warning said the jobs run at-least-once: {warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_resets_lose_nothing() {
    let Some(site) = shared("tcp_resets_lose_nothing") else {
        return;
    };
    let report = scenario::run::<ResetJob>(&Plan::ci(Fault::Reset), site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_s_black_hole_loses_nothing() {
    let Some(site) = shared("a_20_s_black_hole_loses_nothing") else {
        return;
    };
    let report = scenario::run::<HoleJob>(&Plan::ci(Fault::BlackHole), site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
}

/// `stop_app`/`start_app`, then `kill -9` and a restart, on one private node
/// (one after the other, so the node is started once); then `kill -9` again
/// with every job failing its first attempt and waiting 1 s in a quorum hold
/// queue (the default), so that jobs are in holds and on their way back to
/// the work queue at each kill. The first version's classic holds lost jobs
/// there (`cargo run -p queuey --release --example soak -- kill-9 20000 classic`
/// measures it); quorum holds move them at least once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_stopped_or_killed_loses_nothing() {
    let mut node = private_node!("a_broker_stopped_or_killed_loses_nothing");
    let url = node.url();
    let stopped = scenario::run::<StopJob>(
        &Plan::ci(Fault::StopApp),
        Site {
            url: url.clone(),
            tls: queuey::rabbitmq::TlsOptions::default(),
            node: Some(&mut node),
            child: None,
        },
    )
    .await;
    eprintln!("{stopped}\n{}", stopped.row());
    let killed = scenario::run::<KillJob>(
        &Plan::ci(Fault::Kill9),
        Site {
            url,
            tls: queuey::rabbitmq::TlsOptions::default(),
            node: Some(&mut node),
            child: None,
        },
    )
    .await;
    eprintln!("{killed}\n{}", killed.row());
    let held = scenario::run::<HeldJob>(
        &Plan::ci(Fault::Kill9).through_holds(queuey::rabbitmq::HoldQueues::Quorum),
        Site {
            url: node.url(),
            tls: queuey::rabbitmq::TlsOptions::default(),
            node: Some(&mut node),
            child: None,
        },
    )
    .await;
    eprintln!("{held}\n{}", held.row());
    let once = scenario::run::<KillOnceJob>(
        &Plan::ci(Fault::Kill9).once(ONCE_JOBS),
        Site {
            url: node.url(),
            tls: queuey::rabbitmq::TlsOptions::default(),
            node: Some(&mut node),
            child: None,
        },
    )
    .await;
    eprintln!("{once}\n{}", once.row());
    stopped.assert_nothing_lost();
    killed.assert_nothing_lost();
    held.assert_nothing_lost();
    once.assert_handled_once();
}

/// The test name the crash scenario starts its worker processes with.
const WORKER_PROCESS: &str = "scenarios::worker_process";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_killed_mid_job_loses_nothing() {
    let Some(mut site) = shared("a_worker_process_killed_mid_job_loses_nothing") else {
        return;
    };
    let program = std::env::current_exe().expect("the test binary's path");
    let args = ["--ignored", "--exact", WORKER_PROCESS, "--nocapture"];
    site.child = Some((program, args.iter().map(|a| (*a).to_owned()).collect()));
    let report = scenario::run::<CrashJob>(&Plan::ci(Fault::WorkerCrash), site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
}

/// The worker processes (the same as above: the queue and the store come
/// in their environment) handle each job once, but for the jobs cut short
/// by a kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_killed_mid_job_reruns_only_jobs_cut_short() {
    let Some(mut site) = shared("a_worker_process_killed_mid_job_reruns_only_jobs_cut_short")
    else {
        return;
    };
    let program = std::env::current_exe().expect("the test binary's path");
    let args = ["--ignored", "--exact", WORKER_PROCESS, "--nocapture"];
    site.child = Some((program, args.iter().map(|a| (*a).to_owned()).collect()));
    let plan = Plan::ci(Fault::WorkerCrash).once(ONCE_JOBS);
    let report = scenario::run::<CrashOnceJob>(&plan, site).await;
    eprintln!("{report}\n{}", report.row());
    report.assert_handled_once();
}

/// Not a test: the worker process of the crash scenario, which starts this
/// binary again with this test's name. Runs until it is killed.
#[test]
#[ignore = "the worker process of a_worker_process_killed_mid_job_loses_nothing, started by it"]
fn worker_process() {
    assert!(
        crate::fault::child::is_child(),
        "only a_worker_process_killed_mid_job_loses_nothing starts this"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(crate::fault::child::child_worker::<CrashJob>());
}
