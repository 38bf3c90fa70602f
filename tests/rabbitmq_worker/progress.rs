//! Job progress on RabbitMQ: a handler's reports reach a caller that
//! watches the job over direct reply-to, before its output, and show beside
//! the running job in the worker's heartbeats.

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "fleet")]
use queuey::backend::Heartbeats;
use queuey::control::Progress;
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqOptions;
use tokio::sync::Semaphore;

use crate::scenario::{backend, wait_for};
use crate::support::within;

scenario!(ProgressQueues, ProgressJob, "progress", |config| config);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watching_caller_and_the_heartbeats_see_the_handlers_reports() {
    let broker = broker!("a_watching_caller_and_the_heartbeats_see_the_handlers_reports");
    let q = ProgressQueues::Work.name();
    broker.track(q);
    broker.track(&format!("{q}.dead"));
    let backend = backend(&broker, "progress", RabbitMqOptions::default()).await;
    // Each step waits for a permit: the test decides when the job moves on.
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::<ProgressQueues, _>::builder(backend.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .handler(handler_fn({
            let gate = Arc::clone(&gate);
            move |job: ProgressJob, ctx: JobContext| {
                let gate = Arc::clone(&gate);
                async move {
                    for step in 1..=job.n {
                        gate.acquire().await.unwrap().forget();
                        let percent = u8::try_from(step * 100 / job.n).unwrap_or(100);
                        ctx.progress(percent, &format!("step {step} of {}", job.n));
                    }
                    Ok::<(), JobError>(())
                }
            }
        }))
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    let producer = Producer::<ProgressQueues, _>::new(backend.clone())
        .await
        .unwrap();

    let mut watch = producer
        .enqueue_and_watch(&ProgressJob { n: 4 }, Duration::from_secs(120))
        .await
        .unwrap();
    #[cfg(feature = "fleet")]
    let job_id = watch.job_id();
    gate.add_permits(1);
    let first = within("the first report", watch.progress()).await;
    assert_eq!(first, Some(Progress::new(25, "step 1 of 4")));

    // The heartbeats list the running job with its latest report.
    gate.add_permits(1);
    let second = within("the second report", watch.progress()).await;
    assert_eq!(second, Some(Progress::new(50, "step 2 of 4")));
    #[cfg(feature = "fleet")]
    within("the heartbeats show the report", async {
        loop {
            let workers = backend.workers().await.unwrap();
            let shown = workers
                .iter()
                .flat_map(|worker| &worker.running)
                .find(|job| job.job_id == job_id)
                .and_then(|job| job.progress.clone());
            if shown == Some(Progress::new(50, "step 2 of 4")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;

    gate.add_permits(2);
    while let Some(progress) = within("a later report", watch.progress()).await {
        assert!(progress.percent > 50, "reports never go back: {progress}");
    }
    within("the outcome", watch.output()).await.unwrap();
    wait_for("the job is done", || handle.jobs_finished() == 1).await;
    handle.shutdown();
    within("the worker stops", running).await.unwrap().unwrap();
}
