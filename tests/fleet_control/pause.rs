//! Pausing and resuming a queue across every worker process.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::child::{FleetQueues, JobA, JobB};
use crate::fleet::Fleet;
use crate::support::{Broker, within};

/// Each handled job id of `queue`, with how many times it was handled.
fn handled(fleet: &Fleet, queue: &str) -> BTreeMap<String, usize> {
    let mut ids = BTreeMap::new();
    for line in fleet.matching(|l| l.words[0] == "HANDLED" && l.words[1] == queue) {
        *ids.entry(line.words[3].clone()).or_insert(0) += 1;
    }
    ids
}

/// Jobs of `queue` that started after `pid` said it paused it, plus
/// `grace` (a job spawned just before the pause may print its start a
/// moment later), and before `until`.
fn started_while_paused(fleet: &Fleet, queue: &str, grace: Duration, until: Instant) -> usize {
    let paused = fleet.matching(|l| l.words[0] == "PAUSED");
    fleet
        .matching(|l| l.words[0] == "STARTED" && l.words[1] == queue && l.at < until)
        .iter()
        .filter(|s| paused.iter().any(|p| p.pid == s.pid && s.at > p.at + grace))
        .count()
}

async fn enqueue(fleet: &Fleet, n: u32, work_ms: u64) {
    let a: Vec<JobA> = (0..n)
        .map(|n| JobA {
            n,
            work_ms,
            until_cancelled: false,
        })
        .collect();
    let b: Vec<JobB> = (0..n).map(|n| JobB { n, work_ms }).collect();
    assert!(
        fleet
            .producer
            .enqueue_batch(&a)
            .await
            .iter()
            .all(Result::is_ok)
    );
    assert!(
        fleet
            .producer
            .enqueue_batch(&b)
            .await
            .iter()
            .all(Result::is_ok)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_reaches_every_process_and_new_ones_and_a_resume_too() {
    let Some(broker) = Broker::new("control-pause").await else {
        return;
    };
    let mut fleet = Fleet::new(&broker, "pause").await;
    for _ in 0..3 {
        fleet.spawn().await;
    }
    let (a, b) = (fleet.name(FleetQueues::A), fleet.name(FleetQueues::B));
    enqueue(&fleet, 150, 40).await;
    within("some jobs of A are handled", async {
        while handled(&fleet, "a").len() < 10 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    let asked = Instant::now();
    fleet.producer.pause(&FleetQueues::A).await.unwrap();
    let paused = fleet.all_say("PAUSED", &a, asked).await;
    eprintln!(
        "every process paused `{a}` {:?} after the command",
        paused - asked
    );
    assert!(
        paused - asked < Duration::from_secs(5),
        "the pause took {:?}",
        paused - asked
    );
    let b_at_pause = handled(&fleet, "b").len();
    let a_at_pause = handled(&fleet, "a").len();

    // A process started while the queue is paused stays off it.
    let late = fleet.spawn().await;
    within("the new process says it is paused", async {
        while !fleet.any(|l| l.pid == late && l.words[0] == "PAUSED" && l.words[1] == a) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let resume_asked = Instant::now();
    assert_eq!(
        started_while_paused(&fleet, "a", Duration::from_millis(500), resume_asked),
        0,
        "no job of the paused queue starts"
    );
    assert!(
        handled(&fleet, "a").len() <= a_at_pause + 4 * 3,
        "at most the jobs running at the pause finish"
    );
    assert!(
        handled(&fleet, "b").len() > b_at_pause,
        "the other queue keeps flowing"
    );

    fleet.producer.resume(&FleetQueues::A).await.unwrap();
    let resumed = fleet.all_say("RESUMED", &a, resume_asked).await;
    eprintln!(
        "every process resumed `{a}` {:?} after the command",
        resumed - resume_asked
    );
    within("every job is handled", async {
        while handled(&fleet, "a").len() < 150 || handled(&fleet, "b").len() < 150 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    for queue in ["a", "b"] {
        let twice: Vec<_> = handled(&fleet, queue)
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .collect();
        assert!(twice.is_empty(), "handled twice on {queue}: {twice:?}");
    }
    fleet.stop().await;
    for q in [&a, &b] {
        assert_eq!(broker.ready(&format!("{q}.dead")).await, 0, "{q}");
        assert_eq!(broker.ready(&format!("{q}.suspect")).await, 0, "{q}");
    }
    let _ = b;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_pause_resume_cycles_under_a_backlog_dead_letter_nothing() {
    let Some(broker) = Broker::new("control-cycles").await else {
        return;
    };
    let mut fleet = Fleet::new(&broker, "cycles").await;
    for _ in 0..2 {
        fleet.spawn().await;
    }
    let a = fleet.name(FleetQueues::A);
    enqueue(&fleet, 300, 15).await;
    for cycle in 0..5 {
        let asked = Instant::now();
        fleet.producer.pause(&FleetQueues::A).await.unwrap();
        fleet.all_say("PAUSED", &a, asked).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let asked = Instant::now();
        fleet.producer.resume(&FleetQueues::A).await.unwrap();
        fleet.all_say("RESUMED", &a, asked).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        eprintln!(
            "cycle {cycle}: {} of 300 handled",
            handled(&fleet, "a").len()
        );
    }
    within("every job is handled", async {
        while handled(&fleet, "a").len() < 300 || handled(&fleet, "b").len() < 300 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    fleet.stop().await;
    assert_eq!(
        broker.ready(&format!("{a}.dead")).await,
        0,
        "nothing dead-lettered"
    );
    assert_eq!(
        broker.ready(&format!("{a}.suspect")).await,
        0,
        "nothing suspected"
    );
}
