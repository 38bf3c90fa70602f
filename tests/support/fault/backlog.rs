//! The restart-under-a-backlog scenario: a backlog queued on a classic work
//! queue of a private node, a worker running it, the node killed
//! (`kill -9`) and started again; then how soon the worker runs at its
//! normal pace again, and where the poison guard sent what the broker
//! returned.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use super::chaos;
use super::ledger::{Check, Ledger};
use super::node::PrivateNode;
use super::once;
use super::scenario::{self, Numbered, Pace};

/// What each job takes.
pub(crate) const WORK: Duration = Duration::from_millis(10);
/// How long the worker runs before the kill: its normal pace is measured
/// over this, less the first and last half second.
const BEFORE_THE_KILL: Duration = Duration::from_secs(3);
/// The pace after the restart that counts as recovered: 80 % of normal.
pub(crate) const RECOVERED: f64 = 0.8;
/// How long the backlog may take to drain after the restart: generous, on
/// a small machine that may run other suites beside this one.
const DRAIN_BOUND: Duration = Duration::from_secs(240);

/// What one run saw.
pub(crate) struct BacklogReport {
    pub(crate) jobs: u32,
    pub(crate) queue: String,
    /// Jobs a second before the kill.
    pub(crate) normal_pace: f64,
    /// Jobs the worker had started when the node was killed.
    pub(crate) started_before_the_kill: usize,
    /// From the kill to the node answering again.
    pub(crate) down_for: Duration,
    /// From the node answering again to the first job finished.
    pub(crate) first_job_after: Option<Duration>,
    /// From the node answering again to the end of the first whole second
    /// that ran at [`RECOVERED`] of the normal pace.
    pub(crate) recovered_after: Option<Duration>,
    pub(crate) check: Check,
    /// Whether every job was handled and the queue emptied in time.
    pub(crate) drained: bool,
    /// The work queue at the end (ready, unacknowledged).
    pub(crate) left: Option<(u32, u32)>,
    /// The suspect queue at the end.
    pub(crate) suspect_queue: Option<(u32, u32)>,
    pub(crate) worker_result: String,
}

impl fmt::Display for BacklogReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = |d: Option<Duration>| {
            d.map_or("never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64()))
        };
        write!(
            f,
            "{} jobs; normal pace {:.0}/s; {} started before the kill; the node answered again \
             {:.1} s after it; then the first job finished after {}, a whole second at {:.0} % \
             of the normal pace ended after {}; {}; left {:?}, suspect queue {:?}; worker {}",
            self.jobs,
            self.normal_pace,
            self.started_before_the_kill,
            self.down_for.as_secs_f64(),
            seconds(self.first_job_after),
            RECOVERED * 100.0,
            seconds(self.recovered_after),
            self.check,
            self.left,
            self.suspect_queue,
            self.worker_result,
        )
    }
}

/// When jobs started and finished.
#[derive(Default)]
struct Timeline {
    started: HashSet<u32>,
    /// In order: each is read from the clock under the timeline's lock.
    finished: Vec<Instant>,
}

/// Jobs finished in `[from, to)`, of `finished` in order.
fn finished_in(finished: &[Instant], from: Instant, to: Instant) -> usize {
    finished.partition_point(|t| *t < to) - finished.partition_point(|t| *t < from)
}

/// Queues `jobs` jobs of `J` (its queue: classic, the defaults otherwise)
/// on `node`, then runs them with one worker (`concurrency` at a time, each
/// taking [`WORK`]); kills the node after 3 s, starts it again, and waits
/// until every job was handled and the queue is empty.
pub(crate) async fn run<J: Numbered>(
    node: &mut PrivateNode,
    jobs: u32,
    concurrency: usize,
) -> BacklogReport {
    let url = node.url();
    let queue = <J as Job>::QUEUE.name().to_owned();
    let control = super::child::control_stream(&queue);
    let options = |role: &str| {
        super::child::on_control_stream(
            RabbitMqOptions::default()
                .connection_name(format!("queuey-backlog-{role}"))
                .connect_timeout(Duration::from_secs(3))
                .call_timeout(Duration::from_secs(10)),
            &control,
        )
    };
    let (producer_backend, producer) = scenario::producer::<J>(&url, options("producer")).await;
    let ledger = Arc::new(Ledger::default());
    ledger.attempted(jobs);
    let pace = Pace {
        jobs,
        concurrency: 64,
        spread: Duration::ZERO,
        deadline: Duration::from_secs(180),
    };
    let errors = scenario::produce_paced::<J>(&producer, &pace, &ledger).await;
    assert!(errors.is_empty(), "queueing the backlog failed: {errors:?}");

    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let worker_backend = Arc::new(
        RabbitMqBackend::with_options(&url, options("worker"))
            .await
            .expect("the worker connects"),
    );
    let handler = {
        let ledger = Arc::clone(&ledger);
        let timeline = Arc::clone(&timeline);
        handler_fn(move |job: J, _ctx: JobContext| {
            let ledger = Arc::clone(&ledger);
            let timeline = Arc::clone(&timeline);
            async move {
                timeline.lock().unwrap().started.insert(job.number());
                tokio::time::sleep(WORK).await;
                ledger.handled(job.number());
                timeline.lock().unwrap().finished.push(Instant::now());
                Ok::<(), JobError>(())
            }
        })
    };
    let worker = once::worker(
        Arc::clone(&worker_backend),
        handler,
        None,
        concurrency,
        Duration::from_secs(20),
    )
    .await;
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());

    // The window the normal pace is measured over, not a wait for an
    // outcome.
    tokio::time::sleep(BEFORE_THE_KILL).await;
    let killed_at = Instant::now();
    node.kill9().await;
    let started_before_the_kill = timeline.lock().unwrap().started.len();
    node.restart().await;
    let answered_at = Instant::now();

    let drained = tokio::time::timeout(DRAIN_BOUND, async {
        loop {
            let (handled, confirmed) = ledger.confirmed_handled();
            if handled == confirmed
                && chaos::queue_depth(Some(node.name()), &queue).await == Some((0, 0))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .is_ok();
    let left = chaos::queue_depth(Some(node.name()), &queue).await;
    let suspect_queue = chaos::queue_depth(Some(node.name()), &format!("{queue}.suspect")).await;
    let worker_result = scenario::shut_down(&handle, running).await;
    scenario::close(&worker_backend).await;
    scenario::close(&producer_backend).await;

    let timeline = timeline.lock().unwrap();
    let finished = &timeline.finished;
    let half = Duration::from_millis(500);
    let measured = BEFORE_THE_KILL - 2 * half;
    let before = finished_in(
        finished,
        killed_at - BEFORE_THE_KILL + half,
        killed_at - half,
    );
    let normal_pace = before as f64 / measured.as_secs_f64();
    let first = finished
        .get(finished.partition_point(|t| *t <= answered_at))
        .copied();
    let second = Duration::from_secs(1);
    let recovered_after = first.and_then(|first| {
        (0..6_000)
            .map(|tenth| first + Duration::from_millis(100) * tenth)
            .find(|from| {
                finished_in(finished, *from, *from + second) as f64 >= RECOVERED * normal_pace
            })
            .map(|from| from + second - answered_at)
    });
    BacklogReport {
        jobs,
        queue,
        normal_pace,
        started_before_the_kill,
        down_for: answered_at - killed_at,
        first_job_after: first.map(|first| first - answered_at),
        recovered_after,
        check: ledger.check(),
        drained,
        left,
        suspect_queue,
        worker_result,
    }
}
