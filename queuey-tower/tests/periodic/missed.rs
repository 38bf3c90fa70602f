//! The whole fleet down for a while: what the next leader fires.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::Producer;
use queuey_core::memory::MemoryBackend;
use queuey_tower::periodic::{Clock, Missed};

use crate::support::{PQueues, drain, ms, spawn, start};

/// Runs a scheduler for `secs` seconds.
async fn run_for(backend: &Arc<MemoryBackend>, clock: &Clock, missed: Missed, secs: u64) {
    let (handle, running) = spawn(backend, clock, missed);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    handle.shutdown();
    running.await.unwrap().unwrap();
}

/// Up 3 s, down 5 s, up 3 s: the ticks fired, relative to the first.
async fn outage(missed: Missed) -> Vec<u64> {
    let backend = Arc::new(MemoryBackend::new());
    Producer::<PQueues, _>::new(backend.clone()).await.unwrap();
    let clock = Clock::tokio_from(start() + Duration::from_millis(500));
    run_for(&backend, &clock, missed, 3).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    run_for(&backend, &clock, missed, 3).await;
    let base = ms(start()) + 1_000;
    drain(&backend)
        .await
        .into_iter()
        .map(|(_, t)| (t - base) / 1_000)
        .collect()
}

// Up at 0.5 s: ticks 1, 2, 3 (as 0, 1, 2); down from 3.5 s to 8.5 s, so
// ticks 4 to 8 pass; tick 8 is within the 1 s grace at 8.5 s.

#[tokio::test(start_paused = true)]
async fn skip_fires_none_of_the_missed() {
    assert_eq!(outage(Missed::Skip).await, vec![0, 1, 2, 7, 8, 9, 10]);
}

#[tokio::test(start_paused = true)]
async fn fire_once_fires_the_latest_missed() {
    assert_eq!(
        outage(Missed::FireOnce).await,
        vec![0, 1, 2, 6, 7, 8, 9, 10]
    );
}

#[tokio::test(start_paused = true)]
async fn fire_each_fires_up_to_its_max() {
    assert_eq!(
        outage(Missed::FireEach { max: 2 }).await,
        vec![0, 1, 2, 5, 6, 7, 8, 9, 10]
    );
    assert_eq!(
        outage(Missed::FireEach { max: 100 }).await,
        (0..=10).collect::<Vec<_>>()
    );
}
