//! The hold watchdog against a quorum hold that stopped releasing, on a
//! private node with the management API over plain http.
//!
//! The hold's dead-letter worker (RabbitMQ 3.10's `rabbit_fifo_dlx_worker`,
//! one per quorum queue with at-least-once dead-lettering, under the
//! `rabbit_fifo_dlx_sup` supervisor on the queue leader's node) is
//! terminated through its supervisor, which does not restart it: the state
//! a real stall leaves behind. Jobs held into the hold then expire and stay
//! there. The watchdog must report the hold, the remedy (restarting the
//! hold's Raft member, whose next term as leader starts a new worker) must
//! bring every job back to the work queue, and the report must clear.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use queuey::rabbitmq::{HoldQueues, RabbitMqBackend, RabbitMqOptions, StalledHold};
use queuey_core::backend::Backend;
use queuey_core::{Disposition, Envelope, QueueConfig};

use crate::fault::cluster::restart_member_expression;
use crate::fault::node::PrivateNode;
use crate::support::within;

/// Jobs held into the stalled hold.
const JOBS: usize = 20;
/// Their delay: the hold is `q.deferred.quorum.1000`.
const DELAY: Duration = Duration::from_secs(1);
/// The watchdog's pace in this test.
const POLL: Duration = Duration::from_secs(2);
const STALL_AFTER: Duration = Duration::from_secs(10);
/// How long the report may take after the jobs are held: their delay, the
/// broker's statistics interval (5 s), the window and two reads, with
/// plenty of room for a small shared machine.
const REPORT_BOUND: Duration = Duration::from_secs(90);
/// How long the jobs may take to come back after the remedy.
const RELEASE_BOUND: Duration = Duration::from_secs(90);

/// The snapshotter of the test binary's one global metrics recorder.
fn metrics() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("no other global metrics recorder in the fault suite");
        snapshotter
    })
}

/// The value of `queuey_hold_stalled{queue, hold}`, if it was ever set.
fn stalled_gauge(queue: &str, hold: &str) -> Option<f64> {
    metrics()
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let labelled = |name: &str, wanted: &str| {
                key.labels().any(|l| l.key() == name && l.value() == wanted)
            };
            match value {
                DebugValue::Gauge(v)
                    if key.name() == "queuey_hold_stalled"
                        && labelled("queue", queue)
                        && labelled("hold", hold) =>
                {
                    Some(v.into_inner())
                }
                _ => None,
            }
        })
}

/// Terminates the dead-letter worker of quorum queue `hold` through its
/// supervisor; returns how many workers were found for it.
async fn stop_dead_letter_worker(node: &PrivateNode, hold: &str) -> String {
    assert!(!hold.contains(['"', '\\']), "`{hold}` cannot be quoted");
    let expression = format!(
        "QRes = rabbit_misc:r(<<\"/\">>, queue, <<\"{hold}\">>), \
         Workers = [P || {{_, P, _, _}} <- supervisor:which_children(rabbit_fifo_dlx_sup), \
                         is_pid(P), element(2, sys:get_state(P)) =:= QRes], \
         [ok = supervisor:terminate_child(rabbit_fifo_dlx_sup, P) || P <- Workers], \
         length(Workers)."
    );
    node.ctl(&["eval", &expression])
        .await
        .expect("the dead-letter worker is stopped")
}

/// Jobs the broker counts in `queue`, as AMQP sees them (a passive declare).
async fn amqp_count(url: &str, queue: &str) -> u32 {
    let connection = within(
        "a plain connection",
        lapin::Connection::connect(url, lapin::ConnectionProperties::default()),
    )
    .await
    .expect("a plain connection");
    let channel = within("a channel", connection.create_channel())
        .await
        .expect("a channel");
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let count = within(
        "a passive declare",
        channel.queue_declare(queue.into(), passive, FieldTable::default()),
    )
    .await
    .expect("the queue exists")
    .message_count();
    let _ = connection.close(200, "done".into()).await;
    count
}

fn job(queue: &str, n: usize) -> Envelope {
    let payload = serde_json::value::to_raw_value(&serde_json::json!({ "n": n })).unwrap();
    Envelope::new("hold_watch_job", queue, payload)
}

/// Polls `probe` every half second until it answers, failing after `bound`.
async fn wait_for<T>(what: &str, bound: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(started.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_dead_letter_worker_stopped_is_reported_and_the_remedy_clears_it() {
    let test = "hold_watch";
    let Some(node) = crate::private::management_node(test).await else {
        return;
    };
    // The suite's one subscriber: the log capture other tests read.
    crate::support::install_log_capture();
    metrics();
    let queue = format!("hold-watch-{}", uuid::Uuid::new_v4().simple());
    let delay_ms = u64::try_from(DELAY.as_millis()).unwrap();
    let hold = HoldQueues::Quorum
        .name(&queue, ".deferred", delay_ms)
        .unwrap();
    let options = RabbitMqOptions::default()
        .connection_name("hold-watch")
        .management_url(node.mgmt_http_url())
        .hold_watch_interval(POLL)
        .hold_stall_after(STALL_AFTER);
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(node.url().as_str(), options),
    )
    .await
    .expect("connects to the private node");
    let config = QueueConfig::new(queue.as_str());
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut deliveries = within("consume", backend.consume(&config)).await.unwrap();

    // The hold works at first: a job held for a second comes back.
    within(
        "hold the first job",
        backend.publish_after(&job(&queue, 0), DELAY),
    )
    .await
    .unwrap();
    let first = within("the first held job back", deliveries.next())
        .await
        .expect("a delivery")
        .expect("a good delivery");
    within("ack", first.settle(Disposition::Ack)).await.unwrap();

    let stopped = stop_dead_letter_worker(&node, &hold).await;
    assert_eq!(stopped.trim(), "1", "one dead-letter worker for `{hold}`");

    let mut held = BTreeMap::new();
    for n in 1..=JOBS {
        let envelope = job(&queue, n);
        held.insert(envelope.job_id, 0u32);
        within("hold a job", backend.publish_after(&envelope, DELAY))
            .await
            .unwrap();
    }
    let held_at = Instant::now();

    let reported: StalledHold = wait_for("the stalled hold reported", REPORT_BOUND, || {
        backend
            .stalled_holds()
            .into_iter()
            .find(|h| h.hold == hold && h.jobs == JOBS as u64)
    })
    .await;
    let report_took = held_at.elapsed();
    assert_eq!(reported.queue, queue);
    assert_eq!(stalled_gauge(&queue, &hold), Some(1.0));
    // AMQP alone cannot see the stuck jobs: a passive declare counts only
    // those still waiting for their delay.
    assert_eq!(amqp_count(&node.url(), &hold).await, 0);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), deliveries.next())
            .await
            .is_err(),
        "a job came back from a hold whose worker is stopped"
    );

    // The remedy: restart the hold's Raft member (one node: it leads).
    let remedy = restart_member_expression(&hold).unwrap();
    let remedied_at = Instant::now();
    node.ctl(&["eval", &remedy]).await.expect("the remedy runs");

    let mut duplicates = 0;
    let mut unexpected = 0;
    within_bound(
        "every held job back in the work queue",
        RELEASE_BOUND,
        async {
            while held.values().any(|seen| *seen == 0) {
                let delivery = deliveries
                    .next()
                    .await
                    .expect("the consumer stream goes on")
                    .expect("a good delivery");
                match held.get_mut(&delivery.envelope().job_id) {
                    Some(seen) => {
                        *seen += 1;
                        if *seen > 1 {
                            duplicates += 1;
                        }
                    }
                    None => unexpected += 1,
                }
                delivery.settle(Disposition::Ack).await.unwrap();
            }
        },
    )
    .await;
    let released_in = remedied_at.elapsed();
    let lost = held.values().filter(|seen| **seen == 0).count();
    assert_eq!((lost, unexpected), (0, 0));

    wait_for("the report cleared", REPORT_BOUND, || {
        backend.stalled_holds().is_empty().then_some(())
    })
    .await;
    let cleared_in = remedied_at.elapsed();
    assert_eq!(stalled_gauge(&queue, &hold), Some(0.0));
    eprintln!(
        "hold watch: {JOBS} jobs held into a stalled hold; reported after {report_took:?} \
         (poll {POLL:?}, window {STALL_AFTER:?}); after the remedy every job back in \
         {released_in:?} ({duplicates} duplicates, 0 lost), report cleared in {cleared_in:?}"
    );

    drop(deliveries);
    within("close", backend.close()).await.unwrap();
    drop(node);
}

/// Awaits `f`, failing the test after `bound`.
async fn within_bound<T>(what: &str, bound: Duration, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(bound, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {bound:?}: {what}"),
    }
}
