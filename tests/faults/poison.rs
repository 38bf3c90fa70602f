//! The poison guard against a job that kills its worker process: worker
//! children (default options, so the guard's default limit) started again by
//! the test each time one dies.

use std::collections::BTreeMap;
use std::time::Duration;

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::fault::child::Children;
use crate::fault::ledger::Ledger;
use crate::fault::scenario::{Numbered as _, fault_queue};
use crate::support::{header, within};

fault_queue!(PoisonQueues, PoisonJob, "poison", |c| c.prefetch(10));

/// The test name the poison test starts its worker processes with.
const WORKER_PROCESS: &str = "poison::poison_worker_process";
/// Innocent jobs, queued before and after the poison job.
const JOBS: u32 = 30;
const POISON: u32 = 10;

/// The job numbered `POISON` kills every worker that starts it; the 29 jobs
/// queued around it (prefetch 10, so some are always in flight beside it)
/// must all be handled, none counted more than twice, and the poison job
/// must end in `q.dead` after exactly the limit (5) of kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_kills_its_worker_is_dead_lettered_after_the_limit_and_spares_its_neighbours() {
    let broker = broker!(
        "a_job_that_kills_its_worker_is_dead_lettered_after_the_limit_and_spares_its_neighbours"
    );
    let q = PoisonQueues::Work.name();
    broker.track(q);
    let dead = format!("{q}.dead");
    broker.track(&dead);
    let suspects = format!("{q}.suspect");
    let limit = queuey::rabbitmq::options::DEFAULT_POISON_GUARD_LIMIT;

    let options = broker
        .isolate(RabbitMqOptions::default().connection_name(broker.connection_name("producer")));
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(&broker.url, options),
    )
    .await
    .expect("connects");
    let producer = Producer::<PoisonQueues, _>::new(std::sync::Arc::new(backend))
        .await
        .unwrap();
    let mut ids = BTreeMap::new();
    for n in 0..JOBS {
        ids.insert(producer.enqueue(&PoisonJob::numbered(n)).await.unwrap(), n);
    }
    let poison_id = *ids.iter().find(|(_, n)| **n == POISON).unwrap().0;

    let program = std::env::current_exe().expect("the test binary's path");
    let args = ["--ignored", "--exact", WORKER_PROCESS, "--nocapture"];
    let control = crate::fault::child::control_stream(q);
    broker.track(&control);
    broker.track(&format!("{control}.workers"));
    let mut kids = Children::new(
        program,
        args.iter().map(|a| (*a).to_owned()).collect(),
        &broker.url,
        q,
    );
    kids.env("QUEUEY_FAULT_POISON", &POISON.to_string());
    kids.spawn();
    // Every worker that dies is replaced, until the poison job is dead and
    // every other job handled.
    let ledger = Ledger::default();
    within("the poison job dead and every other job handled", async {
        loop {
            if kids.exited() {
                kids.spawn();
            }
            ledger.reset_handled();
            for text in kids.ledgers() {
                ledger.record_file(&text);
            }
            let innocent_done = (0..JOBS)
                .filter(|n| *n != POISON)
                .all(|n| ledger.times_handled(n) > 0);
            if innocent_done
                && broker.ready(&dead).await == 1
                && broker.ready_and_unacked(q).await == Some((0, 0))
                && broker.ready_and_unacked(&suspects).await == Some((0, 0))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let started = kids.started();
    let logs = kids.logs().join("\n--- the next worker ---\n");
    kids.kill();

    // The poison job ran (and killed its worker) exactly `limit` times.
    assert_eq!(ledger.times_handled(POISON), limit, "{logs}");
    assert_eq!(started, limit + 1, "one worker per kill, and one alive");
    let letter = broker
        .get(&dead)
        .await
        .expect("the poison job's dead letter");
    assert_eq!(
        header(&letter, "x-death-reason").as_deref(),
        Some(
            "delivered 5 times without being settled: the worker died or lost its connection \
             while handling it (or could not settle it)"
        )
    );
    assert_eq!(
        header(
            &letter,
            queuey::rabbitmq::topology::UNSETTLED_DELIVERIES_HEADER
        )
        .as_deref(),
        Some("i64:5")
    );
    assert_eq!(header(&letter, "x-original-queue").as_deref(), Some(q));

    // Each move is logged with the job's new count: a first return goes
    // back to the work queue, a later one to the suspect queue. The poison
    // job climbed 1..limit-1, going back once and then to the suspect
    // queue; an innocent job beside it came back at most twice (beside its
    // first two runs, which are not alone), never near the limit.
    let mut poison_counts = Vec::new();
    let mut innocent_returns = 0;
    for line in logs.lines().filter(|l| {
        l.contains("moved to the suspect queue") || l.contains("again to its work queue")
    }) {
        let id = field(line, "job_id").expect("a job id");
        let count: u32 = field(line, "unsettled_deliveries")
            .and_then(|c| c.parse().ok())
            .expect("a count");
        let to_suspects = line.contains("moved to the suspect queue");
        assert_eq!(to_suspects, count > 1, "{line}");
        if id == poison_id.to_string() {
            poison_counts.push(count);
        } else {
            innocent_returns += 1;
            assert!(count <= 2, "an innocent job counted {count} times: {line}");
        }
    }
    assert_eq!(poison_counts, (1..limit).collect::<Vec<_>>(), "{logs}");
    assert!(
        innocent_returns > 0,
        "no job was in flight beside the poison job: {logs}"
    );
    for n in (0..JOBS).filter(|n| *n != POISON) {
        assert!(ledger.times_handled(n) >= 1, "job {n} was never handled");
    }
    eprintln!(
        "{started} workers; innocent jobs came back {innocent_returns} times; \
         innocent handlings: {}",
        (0..JOBS)
            .filter(|n| *n != POISON)
            .map(|n| ledger.times_handled(n))
            .sum::<u32>()
    );
}

/// The value of `name=` in a log line, up to the next space.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!("{name}="))? + name.len() + 1;
    line[at..].split_whitespace().next()
}

/// Not a test: a worker process of the poison test, which starts this
/// binary again with this test's name. Runs until it is killed (by the
/// poison job or by the test); logs queuey's lines to its log file.
#[test]
#[ignore = "a worker process of the poison test, started by it"]
fn poison_worker_process() {
    assert!(
        crate::fault::child::is_child(),
        "only the poison test starts this"
    );
    tracing_subscriber::fmt()
        .with_env_filter("info,lapin=warn,queuey_rabbitmq::consumer::guard=debug")
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(crate::fault::child::child_worker::<PoisonJob>());
}
