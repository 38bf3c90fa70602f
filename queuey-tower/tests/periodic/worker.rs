//! Periodic jobs declared on the worker.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::periodic::Schedule;
use queuey_core::{Error, JobContext, JobError, handler_fn};
use queuey_tower::Worker;
use queuey_tower::periodic::{Clock, Periodic};

use crate::support::{PQueues, Tick, start};

fn every_second() -> Schedule {
    Schedule::every(Duration::from_secs(1)).unwrap()
}

fn handler() -> impl queuey_core::JobHandler<Job = Tick> {
    handler_fn(|_: Tick, _: JobContext| async { Ok::<_, JobError>(()) })
}

#[tokio::test(start_paused = true)]
async fn a_worker_fires_and_runs_its_periodic_jobs() {
    let backend = Arc::new(MemoryBackend::new());
    let worker = Worker::<PQueues, _>::builder(backend.clone())
        .handler(handler())
        .periodic(
            Periodic::new("beat", every_second(), || Tick { at_ms: 0 })
                .clock(Clock::tokio_from(start())),
        )
        .build()
        .await
        .unwrap();
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    assert_eq!(handle.jobs_finished(), 5);
    handle.shutdown();
    running.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn two_workers_share_the_ticks() {
    let backend = Arc::new(MemoryBackend::new());
    let clock = Clock::tokio_from(start());
    let mut handles = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let worker = Worker::<PQueues, _>::builder(backend.clone())
            .handler(handler())
            .periodic(
                Periodic::new("beat", every_second(), || Tick { at_ms: 0 }).clock(clock.clone()),
            )
            .build()
            .await
            .unwrap();
        handles.push(worker.handle());
        runs.push(tokio::spawn(worker.run()));
    }
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    let finished: u64 = handles.iter().map(|h| h.jobs_finished()).sum();
    assert_eq!(finished, 10);
    for h in &handles {
        h.shutdown();
    }
    for r in runs {
        r.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn unusable_and_repeated_names_are_refused_at_build() {
    let backend = Arc::new(MemoryBackend::new());
    let err = Worker::<PQueues, _>::builder(backend.clone())
        .handler(handler())
        .periodic(Periodic::new("no spaces", every_second(), || Tick {
            at_ms: 0,
        }))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidConfig(m) if m.contains("`no spaces`")),
        "{err}"
    );
    let err = Worker::<PQueues, _>::builder(backend)
        .handler(handler())
        .periodic(Periodic::new("beat", every_second(), || Tick { at_ms: 0 }))
        .periodic(Periodic::new("beat", every_second(), || Tick { at_ms: 1 }))
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("two periodic jobs are named `beat`"),
        "{err}"
    );
}
