//! Cancelling jobs wherever they wait, across worker processes.

use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::options::{BasicGetOptions, BasicPublishOptions};
use lapin::types::AMQPValue;
use queuey::control::CANCELLED_REASON;
use queuey::job::Envelope;
use queuey::rabbitmq::topology::REASON_HEADER;

use crate::child::{FleetQueues, JobA};
use crate::fleet::Fleet;
use crate::support::{Broker, within};

fn job(n: u32, work_ms: u64) -> JobA {
    JobA {
        n,
        work_ms,
        until_cancelled: false,
    }
}

/// Reads every dead letter of `queue` (acknowledging them): job id, reason
/// and when it was read.
async fn dead_letters(broker: &Broker, queue: &str) -> Vec<(String, String)> {
    let channel = broker.channel().await;
    let mut found = Vec::new();
    while let Some(message) = channel
        .basic_get(
            format!("{queue}.dead").as_str().into(),
            BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
    {
        let envelope = Envelope::decode(&message.delivery.data).expect("an envelope");
        let reason = message
            .delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(REASON_HEADER).cloned())
            .map(|v| match v {
                AMQPValue::LongString(s) => s.to_string(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        found.push((envelope.job_id.to_string(), reason));
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_jobs_are_dead_lettered_wherever_they_wait() {
    let Some(broker) = Broker::new("control-cancel").await else {
        return;
    };
    let mut fleet = Fleet::new(&broker, "cancel").await;
    let a = fleet.name(FleetQueues::A);
    broker.track(&format!("{a}.suspect"));
    broker.hold(&a, 10_000);
    fleet.spawn().await;
    let p = fleet.producer.clone();

    // In a 10 s hold, cancelled at 2 s.
    let enqueued = Instant::now();
    let held = p
        .enqueue_after(&job(1, 0), Duration::from_secs(10))
        .await
        .unwrap();
    // Behind a backlog.
    let backlog: Vec<JobA> = (100..140).map(|n| job(n, 50)).collect();
    assert!(p.enqueue_batch(&backlog).await.iter().all(Result::is_ok));
    let queued = p.enqueue(&job(2, 0)).await.unwrap();
    p.cancel(queued).await.unwrap();
    // Running: its handler waits for the signal.
    let running = p
        .enqueue(&JobA {
            n: 3,
            work_ms: 0,
            until_cancelled: true,
        })
        .await
        .unwrap();
    within("the running job starts", async {
        while !fleet.any(|l| l.words[0] == "STARTED" && l.words[3] == running.to_string()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    p.cancel(running).await.unwrap();
    within("the running job hears it", async {
        while !fleet.any(|l| l.words[0] == "SIGNALLED" && l.words[1] == running.to_string()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2).saturating_sub(enqueued.elapsed())).await;
    p.cancel(held).await.unwrap();

    // On the suspect queue: a copy that came back unsettled once.
    let suspect = queuey::job::Envelope::new(
        "a",
        a.clone(),
        serde_json::value::to_raw_value(&job(4, 0)).unwrap(),
    );
    p.cancel(suspect.job_id).await.unwrap();
    let channel = broker.channel().await;
    channel
        .basic_publish(
            "".into(),
            format!("{a}.suspect").as_str().into(),
            BasicPublishOptions::default(),
            &suspect.encode().unwrap(),
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    // Cancelled while no worker runs; a worker started later honours it.
    fleet.stop().await;
    let later = p.enqueue(&job(5, 0)).await.unwrap();
    p.cancel(later).await.unwrap();
    fleet.spawn().await;

    let cancelled = [held, queued, running, suspect.job_id, later].map(|id| id.to_string());
    let mut dead = Vec::new();
    within("every cancelled job is dead-lettered", async {
        while dead.len() < cancelled.len() {
            dead.extend(dead_letters(&broker, &a).await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        enqueued.elapsed() >= Duration::from_secs(10),
        "the held job came back after its hold, never early"
    );
    let mut ids: Vec<&str> = dead.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    let mut expected: Vec<&str> = cancelled.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(ids, expected);
    assert!(dead.iter().all(|(_, r)| r == CANCELLED_REASON), "{dead:?}");
    for id in [&cancelled[0], &cancelled[1], &cancelled[3], &cancelled[4]] {
        assert!(
            !fleet.any(|l| l.words[0] == "STARTED" && l.words[3] == **id),
            "cancelled job {id} never runs"
        );
    }
    within("the backlog is handled", async {
        while fleet.matching(|l| l.words[0] == "HANDLED").len() < backlog.len() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    fleet.stop().await;
}
