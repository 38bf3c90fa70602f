use std::sync::Arc;
use std::time::Duration;

use queuey_core::Producer;
use queuey_core::memory::MemoryBackend;
use queuey_core::periodic::{Schedule, tick_job_id};
use queuey_tower::periodic::{Clock, Periodic, Scheduler};

use crate::support::{PQueues, Tick, drain, ms, start};

#[tokio::test(start_paused = true)]
async fn each_tick_once_never_early_with_its_id() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<PQueues, _>::new(backend.clone()).await.unwrap();
    let clock = Clock::tokio_from(start() + Duration::from_millis(300));
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let watch = clock.clone();
    let scheduler = Scheduler::new(producer).periodic(
        Periodic::for_tick("beat", every, move |tick| {
            // Never early: the job is made at or after its tick.
            assert!(watch.now() >= tick);
            Tick { at_ms: ms(tick) }
        })
        .clock(clock.clone()),
    );
    let handle = scheduler.handle();
    let running = tokio::spawn(scheduler.run());
    tokio::time::sleep(Duration::from_millis(10_000)).await;
    handle.shutdown();
    running.await.unwrap().unwrap();

    let jobs = drain(&backend).await;
    let ticks: Vec<u64> = jobs.iter().map(|(_, t)| *t).collect();
    let first = ms(start()) + 1_000;
    assert_eq!(
        ticks,
        (0..10).map(|i| first + i * 1_000).collect::<Vec<_>>()
    );
    for (id, tick) in jobs {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(tick);
        assert_eq!(id, tick_job_id("beat", at));
    }
}

#[tokio::test(start_paused = true)]
async fn correlation_id_and_priority_ride_on_the_job() {
    use futures::StreamExt;
    use queuey_core::Queues;
    use queuey_core::backend::Backend;

    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<PQueues, _>::new(backend.clone()).await.unwrap();
    let clock = Clock::tokio_from(start());
    let scheduler = Scheduler::new(producer).periodic(
        Periodic::new(
            "beat",
            Schedule::every(Duration::from_secs(1)).unwrap(),
            || Tick { at_ms: 0 },
        )
        .priority(4)
        .clock(clock),
    );
    let handle = scheduler.handle();
    let running = tokio::spawn(scheduler.run());
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    handle.shutdown();
    running.await.unwrap().unwrap();
    let mut stream = backend.consume(&PQueues::Work.config()).await.unwrap();
    let d = stream.next().await.unwrap().unwrap();
    assert_eq!(d.envelope().priority, 4);
    assert_eq!(
        d.envelope().correlation_id.as_deref(),
        Some(format!("periodic:beat@{}", ms(start()) + 1_000).as_str())
    );
}

#[cfg(test)]
mod daylight_saving {
    use super::*;

    /// 2026-10-25 00:00 UTC is 02:00 CEST in Amsterdam; at 01:00 UTC the
    /// clock falls back to 02:00 CET.
    fn fall_back_eve() -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_secs(1_792_886_400 - 3_600)
    }

    #[tokio::test(start_paused = true)]
    async fn hourly_fires_every_real_hour_and_a_fixed_time_once_through_fall_back() {
        let backend = Arc::new(MemoryBackend::new());
        let producer = Producer::<PQueues, _>::new(backend.clone()).await.unwrap();
        // 23:00 UTC on the 24th (01:00 CEST), for five hours.
        let clock = Clock::tokio_from(fall_back_eve());
        let hourly = Schedule::cron("0 0 * * * *", "Europe/Amsterdam").unwrap();
        let nightly = Schedule::cron("0 30 2 * * *", "Europe/Amsterdam").unwrap();
        let scheduler = Scheduler::new(producer)
            .periodic(
                Periodic::for_tick("hourly", hourly, |t| Tick { at_ms: ms(t) })
                    .clock(clock.clone()),
            )
            .periodic(
                Periodic::for_tick("nightly", nightly, |t| Tick { at_ms: ms(t) + 1 })
                    .clock(clock.clone()),
            );
        let handle = scheduler.handle();
        let running = tokio::spawn(scheduler.run());
        tokio::time::sleep(Duration::from_secs(5 * 3_600 - 60)).await;
        handle.shutdown();
        running.await.unwrap().unwrap();

        let mut jobs: Vec<u64> = drain(&backend).await.into_iter().map(|(_, t)| t).collect();
        jobs.sort();
        let eve = ms(fall_back_eve());
        let h = 3_600_000;
        assert_eq!(
            jobs,
            vec![
                eve + h,             // 02:00 CEST
                eve + h + h / 2 + 1, // 02:30 CEST, once
                eve + 2 * h,         // 02:00 CET
                eve + 3 * h,         // 03:00 CET
                eve + 4 * h,         // 04:00 CET
            ]
        );
    }
}

/// A periodic job of a unique type: while its last tick's job waits, the
/// next ticks are duplicates, passed over, and the scheduler goes on; once
/// a worker with the store has run the job and given its key back, the
/// next tick enqueues again.
#[tokio::test(start_paused = true)]
async fn ticks_of_a_unique_job_still_waiting_are_passed_over() {
    use std::sync::atomic::{AtomicU32, Ordering};

    use queuey_core::store::MemoryStore;
    use queuey_core::{JobContext, JobError, handler_fn};
    use queuey_tower::Worker;
    use serde::{Deserialize, Serialize};

    #[derive(queuey_core::Job, Serialize, Deserialize, Debug, Clone, PartialEq)]
    #[job(queue = PQueues::Work, name = "sweep", unique(window = "1h"))]
    struct Sweep;

    let backend = Arc::new(MemoryBackend::new());
    let store = MemoryStore::new();
    let producer = Producer::<PQueues, _>::builder(backend.clone())
        .store(store.clone())
        .build()
        .await
        .unwrap();
    let clock = Clock::tokio_from(start() + Duration::from_millis(300));
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let scheduler = Scheduler::new(producer)
        .periodic(Periodic::new("sweep", every, || Sweep).clock(clock.clone()));
    let handle = scheduler.handle();
    let running = tokio::spawn(scheduler.run());
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    assert_eq!(backend.ready_count(crate::support::QUEUE), 1);
    assert!(
        !running.is_finished(),
        "the scheduler stopped on a duplicate"
    );

    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let worker = Worker::<PQueues, _>::builder(backend.clone())
        .store(store.clone())
        .handler(handler_fn(move |_: Sweep, _: JobContext| {
            let runs = Arc::clone(&counted);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        }))
        .build()
        .await
        .unwrap();
    let work = worker.handle();
    let working = tokio::spawn(worker.run());
    tokio::time::sleep(Duration::from_millis(5_000)).await;
    // The waiting job, then one job for each of the five ticks since.
    assert_eq!(runs.load(Ordering::SeqCst), 6);
    handle.shutdown();
    running.await.unwrap().unwrap();
    work.shutdown();
    working.await.unwrap().unwrap();
}
