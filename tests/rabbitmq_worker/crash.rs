//! A worker that dies mid-job loses nothing: the broker delivers the job
//! again to the next worker.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::scenario::wait_for;
use crate::support::{rabbitmqctl, within};

scenario!(CrashQueues, CrashJob, "crash", |c| c.prefetch(4));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_job_loses_nothing() {
    let broker = broker!("a_worker_killed_mid_job_loses_nothing");
    let q = CrashQueues::Work.name();
    broker.track(q);
    broker.track(&format!("{q}.dead"));
    let doomed = broker.connection_name("doomed");

    // The first worker lives in a runtime of its own, which we then drop
    // with the job in flight, as a crashing process would.
    let started = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let (url, name, seen) = (broker.url.clone(), doomed.clone(), Arc::clone(&started));
    #[cfg(feature = "fleet")]
    let stream = broker.control_stream();
    runtime.spawn(async move {
        let options = RabbitMqOptions::default().connection_name(name);
        #[cfg(feature = "fleet")]
        let options = options.control_stream(stream);
        let backend = Arc::new(
            RabbitMqBackend::with_options(&url, options)
                .await
                .expect("connected"),
        );
        let worker = Worker::<CrashQueues, _>::builder(backend.clone())
            .handler(handler_fn(move |job: CrashJob, ctx: JobContext| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push((job.n, ctx.redelivered()));
                    // Never finishes: the process "dies" first.
                    std::future::pending::<()>().await;
                    Ok::<(), JobError>(())
                }
            }))
            .build()
            .await
            .expect("built");
        let _ = worker.run().await;
    });

    let producer_backend = Arc::new(
        within(
            "connect",
            RabbitMqBackend::with_options(
                &broker.url,
                broker.isolate(
                    RabbitMqOptions::default().connection_name(broker.connection_name("producer")),
                ),
            ),
        )
        .await
        .expect("connected"),
    );
    let producer = Producer::<CrashQueues, _>::new(producer_backend.clone())
        .await
        .unwrap();
    let id = producer.enqueue(&CrashJob { n: 42 }).await.unwrap();
    wait_for("the first worker to start the job", || {
        !started.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(started.lock().unwrap()[0], (42, false));

    runtime.shutdown_background();
    // The connection dies with the process; make sure of it even if the
    // client library kept its socket open after the runtime went away.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let connections = rabbitmqctl(&[
        "list_connections",
        "client_properties",
        "-q",
        "--no-table-headers",
    ])
    .await;
    if connections.contains(&doomed) {
        broker.close_connection(&doomed).await;
    }

    // A new worker gets the same job again, marked redelivered.
    let again: Arc<Mutex<Vec<(queuey::job::Uuid, bool)>>> = Arc::default();
    let log = Arc::clone(&again);
    let worker = Worker::<CrashQueues, _>::builder(producer_backend.clone())
        .handler(handler_fn(move |_: CrashJob, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((ctx.job_id(), ctx.redelivered()));
                Ok::<(), JobError>(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    wait_for("the redelivery", || handle.jobs_settled() == 1).await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();
    assert_eq!(*again.lock().unwrap(), vec![(id, true)]);
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    producer_backend.close().await.unwrap();
}
