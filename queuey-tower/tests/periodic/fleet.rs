//! Several schedulers on one backend, as several processes on one broker.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::Producer;
use queuey_core::memory::MemoryBackend;
use queuey_tower::periodic::{Clock, Missed};

use crate::support::{PQueues, drain, ms, spawn, start};

#[tokio::test(start_paused = true)]
async fn three_processes_fire_each_tick_once() {
    let backend = Arc::new(MemoryBackend::new());
    Producer::<PQueues, _>::new(backend.clone()).await.unwrap();
    let clock = Clock::tokio_from(start() + Duration::from_millis(500));
    let fleet: Vec<_> = (0..3)
        .map(|_| spawn(&backend, &clock, Missed::FireOnce))
        .collect();
    tokio::time::sleep(Duration::from_secs(30)).await;
    for (handle, _) in &fleet {
        handle.shutdown();
    }
    for (_, running) in fleet {
        running.await.unwrap().unwrap();
    }
    let ticks: Vec<u64> = drain(&backend).await.into_iter().map(|(_, t)| t).collect();
    let first = ms(start()) + 1_000;
    assert_eq!(
        ticks,
        (0..30).map(|i| first + i * 1_000).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn a_rolling_restart_neither_doubles_nor_drops_a_tick() {
    let backend = Arc::new(MemoryBackend::new());
    Producer::<PQueues, _>::new(backend.clone()).await.unwrap();
    let clock = Clock::tokio_from(start() + Duration::from_millis(500));
    let mut fleet: Vec<_> = (0..3)
        .map(|_| spawn(&backend, &clock, Missed::Skip))
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Replace each process in turn, the leader first.
    for _ in 0..3 {
        let (handle, running) = fleet.remove(0);
        handle.shutdown();
        running.await.unwrap().unwrap();
        fleet.push(spawn(&backend, &clock, Missed::Skip));
        tokio::time::sleep(Duration::from_millis(2_300)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (handle, _) in &fleet {
        handle.shutdown();
    }
    for (_, running) in fleet {
        running.await.unwrap().unwrap();
    }
    let ticks: Vec<u64> = drain(&backend).await.into_iter().map(|(_, t)| t).collect();
    let first = ms(start()) + 1_000;
    let n = ticks.len() as u64;
    assert_eq!(ticks, (0..n).map(|i| first + i * 1_000).collect::<Vec<_>>());
    assert_eq!(n, 15, "{ticks:?}");
}
