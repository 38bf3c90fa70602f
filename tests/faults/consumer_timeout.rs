//! Long jobs against the broker's consumer timeout, on a private node whose
//! `consumer_timeout` is 3 s, checked every second (`channel_tick_interval`):
//!
//! - with the worker's check off, a job longer than the timeout is
//!   delivered again while its first run still runs (RabbitMQ before 4.3;
//!   4.3 no longer applies the timeout to classic queues, so there the
//!   first run ends and is acknowledged, and the job is not delivered
//!   again: the worker's own job timeout is the only bound left);
//! - told the broker's timeout, the worker refuses a job timeout that does
//!   not fit under it;
//! - with a job timeout under it, a slow job is cut short by the worker and
//!   retried, one run at a time, and never delivered again by the broker;
//! - on a quorum queue, a job longer than the timeout is delivered again on
//!   every version; RabbitMQ 4.3 cancels the consumer instead of closing
//!   its channel, and the worker says that a consumer timeout did it (not
//!   a deleted queue) and consumes again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuey::Error;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use queuey::retry::{Backoff, RetryPolicy};

use crate::fault::node::PrivateNode;
use crate::fault::scenario::{Numbered as _, fault_queue};
use crate::support::within;

fault_queue!(PlainQueues, PlainJob, "consumer-timeout-plain", |c| c
    .prefetch(1));
fault_queue!(QuorumQueues, QuorumJob, "consumer-timeout-quorum", |c| c
    .prefetch(1)
    .queue_type(queuey::queue::QueueType::Quorum));
fault_queue!(BoundQueues, BoundJob, "consumer-timeout-bound", |c| c
    .prefetch(1)
    .retry(
        RetryPolicy::new(3, Backoff::fixed(Duration::from_millis(100)).unwrap()).unwrap()
    ));

/// The node's consumer timeout.
const CONSUMER_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the node checks it.
const TICK: Duration = Duration::from_secs(1);

/// One run of a handler: when it started and ended (an end is recorded
/// also when the run is cut short and its future dropped).
#[derive(Debug, Clone)]
struct Run {
    attempt: u32,
    redelivered: bool,
    started: Instant,
    ended: Option<Instant>,
}

/// The ledger of handler runs.
#[derive(Debug, Default)]
struct Runs(Mutex<Vec<Run>>);

impl Runs {
    /// Records a run's start; the guard records its end when dropped.
    fn start(self: &Arc<Self>, ctx: &JobContext) -> (usize, EndOnDrop) {
        let mut runs = self.0.lock().unwrap();
        runs.push(Run {
            attempt: ctx.attempt(),
            redelivered: ctx.redelivered(),
            started: Instant::now(),
            ended: None,
        });
        let index = runs.len() - 1;
        (index, EndOnDrop(Arc::clone(self), index))
    }

    fn all(&self) -> Vec<Run> {
        self.0.lock().unwrap().clone()
    }

    /// The runs, timed from the first one's start.
    fn describe(&self) -> String {
        let runs = self.all();
        let Some(origin) = runs.first().map(|r| r.started) else {
            return "no run".to_owned();
        };
        let at = |t: Instant| format!("{:.2} s", (t - origin).as_secs_f64());
        runs.iter()
            .map(|r| {
                format!(
                    "attempt {}{} from {} to {}",
                    r.attempt,
                    if r.redelivered { " (redelivered)" } else { "" },
                    at(r.started),
                    r.ended.map_or_else(|| "…".to_owned(), at)
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Pairs of runs that were under way at the same time.
    fn overlapping(&self) -> Vec<(usize, usize)> {
        let runs = self.all();
        let mut pairs = Vec::new();
        for (i, a) in runs.iter().enumerate() {
            for (j, b) in runs.iter().enumerate().skip(i + 1) {
                let a_end = a.ended.unwrap_or_else(Instant::now);
                if b.started < a_end && a.started < b.ended.unwrap_or_else(Instant::now) {
                    pairs.push((i, j));
                }
            }
        }
        pairs
    }
}

struct EndOnDrop(Arc<Runs>, usize);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let mut runs = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
        runs[self.1].ended = Some(Instant::now());
    }
}

async fn backend(
    node: &PrivateNode,
    label: &str,
    consumer_timeout: Option<Duration>,
) -> Arc<RabbitMqBackend> {
    let options = RabbitMqOptions::default()
        .connection_name(format!("queuey-fault-consumer-timeout-{label}"))
        .consumer_timeout(consumer_timeout);
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(&node.url(), options),
    )
    .await
    .expect("connects to the private node");
    Arc::new(backend)
}

/// Whether RabbitMQ `version` (`rabbitmqctl version`) applies its
/// consumer timeout to classic queues: measured on 3.10.8 (it does) and
/// 4.3.6 (it does not).
fn times_out_classic_consumers(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) < (4, 3)
}

async fn wait_for(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let waiting = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(bound, waiting).await.is_err() {
        panic!("timed out after {bound:?}: {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_jobs_meet_the_consumer_timeout_unless_the_job_timeout_fits_under_it() {
    crate::support::install_log_capture();
    let timeout_ms = CONSUMER_TIMEOUT.as_millis().to_string();
    let tick_ms = TICK.as_millis().to_string();
    let Some(node) = crate::private::node_with_rabbit_env(
        "consumer-timeout",
        &[
            ("consumer_timeout", timeout_ms.as_str()),
            ("channel_tick_interval", tick_ms.as_str()),
        ],
    )
    .await
    else {
        return;
    };
    let applied = node
        .ctl(&["eval", "{application:get_env(rabbit, consumer_timeout), application:get_env(rabbit, channel_tick_interval)}."])
        .await
        .expect("rabbitmqctl eval");
    assert_eq!(
        applied.split_whitespace().collect::<String>(),
        format!("{{{{ok,{timeout_ms}}},{{ok,{tick_ms}}}}}"),
        "the node runs with the test's settings"
    );
    let version = node.ctl(&["version"]).await.expect("rabbitmqctl version");
    let version = version.trim().to_owned();

    // (a) The worker's check off: one job whose first run takes twice the
    // timeout. The broker closes the channel and delivers the job again
    // while the first run is still going; a second job slot lets the worker
    // start it at once (with one, it would wait for the first run to end).
    let plain = backend(&node, "plain", None).await;
    let runs = Arc::new(Runs::default());
    let first_run = CONSUMER_TIMEOUT * 2;
    let worker = {
        let runs = Arc::clone(&runs);
        Worker::<PlainQueues, _>::builder(Arc::clone(&plain))
            .handler(handler_fn(move |_: PlainJob, ctx: JobContext| {
                let runs = Arc::clone(&runs);
                async move {
                    let (index, _end) = runs.start(&ctx);
                    if index == 0 {
                        tokio::time::sleep(first_run).await;
                    }
                    Ok::<(), JobError>(())
                }
            }))
            .concurrency(2)
            .build()
            .await
            .expect("the check is off: the worker builds")
    };
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    Producer::<PlainQueues, _>::new(Arc::clone(&plain))
        .await
        .unwrap()
        .enqueue(&PlainJob::numbered(1))
        .await
        .unwrap();
    wait_for(
        "the first run to end",
        first_run + Duration::from_secs(15),
        || runs.all().first().is_some_and(|r| r.ended.is_some()),
    )
    .await;
    wait_for("the job to be settled", Duration::from_secs(10), || {
        handle.jobs_settled() >= 1
    })
    .await;
    let seen = runs.all();
    eprintln!(
        "(a) RabbitMQ {version}: {}; settle failures {}",
        runs.describe(),
        handle.settle_failures()
    );
    if times_out_classic_consumers(&version) {
        assert!(
            seen.len() >= 2,
            "the broker never delivered the job again: {seen:?}"
        );
        let (first, second) = (&seen[0], &seen[1]);
        let redelivered_after = second.started - first.started;
        assert!(
            redelivered_after >= CONSUMER_TIMEOUT,
            "delivered again before the consumer timeout: {redelivered_after:?}"
        );
        assert!(
            redelivered_after < CONSUMER_TIMEOUT + TICK + Duration::from_secs(3),
            "{redelivered_after:?}"
        );
        assert!(second.redelivered, "{second:?}");
        assert!(
            runs.overlapping().contains(&(0, 1)),
            "the second run started while the first still ran: {seen:?}"
        );
        // The first run is settled just after its handler returns: wait
        // for that settle, which goes to the channel the broker closed.
        wait_for(
            "the first run's acknowledgement to fail on the closed channel",
            Duration::from_secs(10),
            || handle.settle_failures() >= 1,
        )
        .await;
    } else {
        // No timeout on a classic queue: one run, as long as the handler
        // takes, acknowledged on the channel it came from.
        assert_eq!(seen.len(), 1, "delivered again: {seen:?}");
        assert_eq!(handle.settle_failures(), 0, "{seen:?}");
    }
    handle.shutdown();
    within("run", running)
        .await
        .unwrap()
        .expect("run ends cleanly");

    // (b) Told the broker's timeout, the worker refuses a job timeout that
    // does not fit under it, margin included (a tenth: 300 ms).
    let told = backend(&node, "told", Some(CONSUMER_TIMEOUT)).await;
    for job_timeout in [Duration::from_secs(5), Duration::from_millis(2_800)] {
        let refused = Worker::<BoundQueues, _>::builder(Arc::clone(&told))
            .handler(handler_fn(|_: BoundJob, _: JobContext| async {
                Ok::<(), JobError>(())
            }))
            .job_timeout(job_timeout)
            .build()
            .await
            .err()
            .unwrap_or_else(|| panic!("a job timeout of {job_timeout:?} was accepted"));
        assert!(matches!(refused, Error::InvalidConfig(_)), "{refused:?}");
        let text = refused.to_string();
        assert!(
            text.contains(&format!("job timeout of {job_timeout:?}")),
            "{text}"
        );
        assert!(text.contains("consumer timeout of 3s"), "{text}");
        assert!(text.contains("`WorkerBuilder::job_timeout`"), "{text}");
        assert!(
            text.contains("`RabbitMqOptions::consumer_timeout`"),
            "{text}"
        );
    }

    // (c) A job timeout under it: a job that would run 10 s is cut short
    // after 1 s and retried, twice, then succeeds; one run at a time, never
    // delivered again by the broker.
    let runs = Arc::new(Runs::default());
    let job_timeout = Duration::from_secs(1);
    let worker = {
        let runs = Arc::clone(&runs);
        Worker::<BoundQueues, _>::builder(Arc::clone(&told))
            .handler(handler_fn(move |_: BoundJob, ctx: JobContext| {
                let runs = Arc::clone(&runs);
                async move {
                    let _end = runs.start(&ctx).1;
                    if ctx.attempt() < 3 {
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                    Ok::<(), JobError>(())
                }
            }))
            .job_timeout(job_timeout)
            .build()
            .await
            .expect("a job timeout under the consumer timeout builds")
    };
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    Producer::<BoundQueues, _>::new(Arc::clone(&told))
        .await
        .unwrap()
        .enqueue(&BoundJob::numbered(2))
        .await
        .unwrap();
    wait_for(
        "the third attempt to succeed",
        Duration::from_secs(30),
        || handle.jobs_finished() >= 1,
    )
    .await;
    // Past the consumer timeout and a tick more: nothing comes back.
    tokio::time::sleep(CONSUMER_TIMEOUT + TICK * 2).await;
    let seen = runs.all();
    eprintln!("(c) {}", runs.describe());
    assert_eq!(
        seen.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2, 3],
        "{seen:?}"
    );
    assert!(seen.iter().all(|r| !r.redelivered), "{seen:?}");
    assert!(runs.overlapping().is_empty(), "{seen:?}");
    for cut in &seen[..2] {
        let ran = cut.ended.expect("ended") - cut.started;
        // Measured inside the handler, which starts a moment after the
        // job timeout's clock does.
        assert!(
            ran + Duration::from_millis(100) >= job_timeout,
            "cut short early: {ran:?}"
        );
        assert!(ran < job_timeout + Duration::from_secs(2), "{ran:?}");
    }
    assert_eq!(handle.settle_failures(), 0);
    assert_eq!(handle.jobs_finished(), 1);
    handle.shutdown();
    within("run", running)
        .await
        .unwrap()
        .expect("run ends cleanly");

    // (d) A quorum queue, the worker's check off: the broker takes a job
    // back past the timeout on every version. RabbitMQ 4.3 cancels the
    // consumer (its channel stays open); before, it closes the channel.
    let runs = Arc::new(Runs::default());
    let worker = {
        let runs = Arc::clone(&runs);
        Worker::<QuorumQueues, _>::builder(Arc::clone(&plain))
            .handler(handler_fn(move |_: QuorumJob, ctx: JobContext| {
                let runs = Arc::clone(&runs);
                async move {
                    let (index, _end) = runs.start(&ctx);
                    if index == 0 {
                        tokio::time::sleep(first_run).await;
                    }
                    Ok::<(), JobError>(())
                }
            }))
            .concurrency(2)
            .build()
            .await
            .expect("the check is off: the worker builds")
    };
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    Producer::<QuorumQueues, _>::new(Arc::clone(&plain))
        .await
        .unwrap()
        .enqueue(&QuorumJob::numbered(3))
        .await
        .unwrap();
    wait_for(
        "the job to be delivered again",
        first_run + Duration::from_secs(15),
        || runs.all().len() >= 2,
    )
    .await;
    eprintln!("(d) RabbitMQ {version}: {}", runs.describe());
    let queue = queuey::Queues::name(&QuorumQueues::Work);
    let named = crate::support::warnings_mentioning(queue)
        .iter()
        .any(|w| w.contains("consumer timeout"));
    if times_out_classic_consumers(&version) {
        // The channel closed: the worker consumes again on a new one.
        assert!(!named, "a closed channel is not a cancel");
    } else {
        assert!(
            named,
            "the worker names the consumer timeout: {:?}",
            crate::support::warnings_mentioning(queue)
        );
    }
    handle.shutdown();
    within("run", running)
        .await
        .unwrap()
        .expect("run ends cleanly");
    for backend in [plain, told] {
        within("close", backend.close()).await.unwrap();
    }
}
