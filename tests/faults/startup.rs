//! A worker and a producer started before their broker: both wait for it
//! (the backend's connect wait) instead of failing, connect once it is up,
//! and every job is handled.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use tokio::sync::oneshot;

use crate::fault::ledger::Ledger;
use crate::fault::scenario::{Numbered as _, fault_queue};
use crate::support::within;

fault_queue!(EarlyQueues, EarlyJob, "early", |c| c.prefetch(16));

const JOBS: u32 = 500;
/// How long the processes run before their broker starts.
const HEAD_START: Duration = Duration::from_secs(10);

fn options(label: &str) -> RabbitMqOptions {
    // The default connect wait (2 minutes) covers the head start and the
    // node's boot; a short longest pause keeps the test's own wait short.
    RabbitMqOptions::default()
        .connection_name(format!("queuey-fault-early-{label}"))
        .reconnect_delay(Duration::from_millis(100), Duration::from_secs(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_before_its_broker_connects_once_it_is_up_and_handles_every_job() {
    const TEST: &str = "a_worker_started_before_its_broker_connects_once_it_is_up";
    // The shared harness installs the log capture.
    let _shared = broker!(TEST);
    let Some(mut node) = crate::private::planned_node("early").await else {
        return;
    };
    let url = node.url();
    let ledger = Arc::new(Ledger::default());
    ledger.attempted(JOBS);

    // The worker: connects (waiting), builds, hands its handle over, runs.
    let (handle_tx, handle_rx) = oneshot::channel();
    let worker = {
        let (url, ledger) = (url.clone(), Arc::clone(&ledger));
        tokio::spawn(async move {
            let backend = RabbitMqBackend::with_options(&url, options("worker"))
                .await
                .map_err(|e| e.to_string())?;
            let connected = Instant::now();
            let handler = handler_fn(move |job: EarlyJob, _ctx: JobContext| {
                let ledger = Arc::clone(&ledger);
                async move {
                    ledger.handled(job.number());
                    Ok::<(), JobError>(())
                }
            });
            let worker = Worker::<EarlyQueues, _>::builder(Arc::new(backend))
                .handler(handler)
                .build()
                .await
                .map_err(|e| e.to_string())?;
            let _ = handle_tx.send((worker.handle(), connected));
            worker.run().await.map_err(|e| e.to_string())
        })
    };
    // The producer, started at the same time: enqueues every job once
    // connected.
    let producer = {
        let (url, ledger) = (url.clone(), Arc::clone(&ledger));
        tokio::spawn(async move {
            let backend = RabbitMqBackend::with_options(&url, options("producer")).await?;
            let connected = Instant::now();
            let producer = Producer::<EarlyQueues, _>::new(Arc::new(backend)).await?;
            for n in 0..JOBS {
                producer.enqueue(&EarlyJob::numbered(n)).await?;
                ledger.confirmed(n);
            }
            Ok::<_, queuey::Error>(connected)
        })
    };

    tokio::time::sleep(HEAD_START).await;
    assert!(
        !worker.is_finished() && !producer.is_finished(),
        "a process gave up before its broker started"
    );
    let booting = Instant::now();
    node.restart().await;
    let booted = booting.elapsed();

    let connected_producer = within("the producer to enqueue every job", producer)
        .await
        .expect("the producer task")
        .expect("the producer connects once the broker is up and enqueues");
    let (handle, connected_worker) = within("the worker to connect and build", handle_rx)
        .await
        .expect("the worker connects once the broker is up and builds");
    for connected in [connected_worker, connected_producer] {
        assert!(connected > booting, "connected before the broker started");
    }
    within("every confirmed job to be handled", async {
        while ledger.confirmed_handled().0 < JOBS as usize {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    handle.shutdown();
    within("the worker to stop", worker)
        .await
        .expect("the worker task")
        .expect("the worker ran until shut down");

    let check = ledger.check();
    eprintln!(
        "head start {HEAD_START:?}, node boot {booted:?}, worker connected {:?} and producer {:?} \
         after the boot began; {check}",
        connected_worker - booting,
        connected_producer - booting,
    );
    assert!(check.lost.is_empty(), "{check}");
    assert!(check.unexpected.is_empty(), "{check}");
    assert_eq!(check.confirmed, JOBS as usize, "{check}");
    assert_eq!(check.duplicated, 0, "no fault, no duplicate: {check}");

    // Each backend said it was waiting, a few times, not once per attempt.
    let waits: Vec<String> = crate::support::warnings_mentioning(&format!(":{}/", node.port()))
        .into_iter()
        .filter(|line| line.contains("cannot be reached yet"))
        .collect();
    let most = 2 * (1 + (HEAD_START + booted).as_secs() / 10 + 1);
    assert!(
        (2..=most as usize).contains(&waits.len()),
        "{} waiting lines (at most {most}): {waits:?}",
        waits.len()
    );
}
