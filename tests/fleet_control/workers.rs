//! The workers' heartbeats, as the list of workers shows them.

use std::time::Duration;

use queuey::backend::Heartbeats;
use queuey::control::Heartbeat;

use crate::child::{FleetQueues, JobA};
use crate::fleet::Fleet;
use crate::support::{Broker, within};

async fn workers(fleet: &Fleet) -> Vec<Heartbeat> {
    within("the list of workers", fleet.producer.backend().workers())
        .await
        .expect("the workers are listed")
}

/// Waits until the list of workers satisfies `done`.
async fn until(fleet: &Fleet, what: &str, done: impl Fn(&[Heartbeat]) -> bool) -> Vec<Heartbeat> {
    within(what, async {
        loop {
            let listed = workers(fleet).await;
            if done(&listed) {
                return listed;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_show_what_they_run_and_drop_off_when_they_stop_or_die() {
    let Some(broker) = Broker::new("control-workers").await else {
        return;
    };
    let mut fleet = Fleet::new(&broker, "workers").await;
    let first = fleet.spawn().await;
    let second = fleet.spawn().await;
    let long = fleet
        .producer
        .enqueue(&JobA {
            n: 1,
            work_ms: 0,
            until_cancelled: true,
        })
        .await
        .unwrap();
    let listed = until(&fleet, "both workers, one running the long job", |w| {
        w.len() == 2 && w.iter().any(|b| b.running.iter().any(|j| j.job_id == long))
    })
    .await;
    let a = fleet.name(FleetQueues::A);
    for beat in &listed {
        assert!(beat.queues.contains(&a), "{beat:?}");
        assert_eq!(beat.concurrency, 4);
        assert_eq!(beat.connection, "connected");
        assert!([first, second].contains(&beat.pid));
    }

    // Killed: it drops off once its heartbeats are old.
    let runner = listed
        .iter()
        .find(|b| b.running.iter().any(|j| j.job_id == long))
        .unwrap()
        .pid;
    let index = fleet
        .children
        .iter()
        .position(|c| c.id() == runner)
        .unwrap();
    let mut killed = fleet.children.remove(index);
    killed.kill().unwrap();
    killed.wait().unwrap();
    until(&fleet, "the killed worker drops off", |w| {
        w.len() == 1 && w[0].pid != runner
    })
    .await;
    // Stopped cleanly: its last heartbeat takes it off at once.
    fleet.producer.cancel(long).await.unwrap();
    fleet.stop().await;
    assert!(workers(&fleet).await.is_empty());
}
