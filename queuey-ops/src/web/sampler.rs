//! The dashboard's heartbeat sampler: every [`SAMPLE_EVERY`] it reads the
//! workers' heartbeats into the [`History`] behind its charts and
//! `/metrics`.
//!
//! The sampler runs under a supervisor: should it ever end or panic, the
//! supervisor says so on standard error and starts it again after one
//! interval, so the charts go on instead of freezing without a word.
//! Stopping the supervisor (aborting its task) stops the sampler with it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use crate::fleet::{Fleet, History};
use crate::out::errln;

/// How often the dashboard samples the workers' heartbeats for its charts
/// and `/metrics`.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Samples `fleet`'s heartbeats into `history` until the task is aborted;
/// a failed sample is a warning (the dashboard logs nothing else) and a gap.
pub(crate) async fn run(fleet: Fleet, history: Arc<History>) {
    supervise(
        move || {
            let (fleet, history) = (fleet.clone(), Arc::clone(&history));
            async move {
                let mut ticks = tokio::time::interval(SAMPLE_EVERY);
                loop {
                    ticks.tick().await;
                    match fleet.workers().await {
                        Ok(workers) => history.record(&workers, crate::time::now_ms()),
                        Err(e) => errln!("warning: could not read the workers' heartbeats: {e}"),
                    }
                }
            }
        },
        SAMPLE_EVERY,
    )
    .await
}

/// Runs the future `start` makes; whenever it ends or panics, logs an error
/// and, after `pause`, starts a new one. Never returns; dropping it drops
/// the future it runs.
async fn supervise<F, Fut>(mut start: F, pause: Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        let why = match AssertUnwindSafe(start()).catch_unwind().await {
            Ok(()) => "it ended".to_owned(),
            Err(payload) => {
                let text = (payload.downcast_ref::<&str>().copied())
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("no message");
                format!("it panicked: {text}")
            }
        };
        errln!(
            "error: the dashboard's heartbeat sampler stopped ({why}); starting it again in {}s",
            pause.as_secs()
        );
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_sampler_that_panics_or_ends_is_started_again() {
        let started = Arc::new(AtomicUsize::new(0));
        let (third, ran) = tokio::sync::oneshot::channel::<()>();
        let third = Arc::new(std::sync::Mutex::new(Some(third)));
        let supervisor = tokio::spawn({
            let started = Arc::clone(&started);
            supervise(
                move || {
                    let n = started.fetch_add(1, Ordering::SeqCst);
                    let third = Arc::clone(&third);
                    async move {
                        match n {
                            0 => panic!("a heartbeat the sampler could not fold"),
                            1 => {}
                            _ => {
                                if let Some(tx) = third.lock().unwrap().take() {
                                    let _ = tx.send(());
                                }
                                std::future::pending::<()>().await;
                            }
                        }
                    }
                },
                SAMPLE_EVERY,
            )
        });
        ran.await.expect("the sampler runs a third time");
        assert_eq!(started.load(Ordering::SeqCst), 3);
        supervisor.abort();
        assert!(supervisor.await.unwrap_err().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_the_supervisor_stops_the_sampler() {
        let (dropped_tx, dropped) = tokio::sync::oneshot::channel::<()>();
        let (running_tx, running) = tokio::sync::oneshot::channel::<()>();
        let mut once = Some((dropped_tx, running_tx));
        let supervisor = tokio::spawn(supervise(
            move || {
                let (dropped_tx, running_tx) = once.take().expect("started once");
                async move {
                    /// Tells the test when the sampler's future is dropped.
                    struct Tell(Option<tokio::sync::oneshot::Sender<()>>);
                    impl Drop for Tell {
                        fn drop(&mut self) {
                            if let Some(tx) = self.0.take() {
                                let _ = tx.send(());
                            }
                        }
                    }
                    let _tell = Tell(Some(dropped_tx));
                    let _ = running_tx.send(());
                    std::future::pending::<()>().await;
                }
            },
            SAMPLE_EVERY,
        ));
        running.await.expect("the sampler starts");
        supervisor.abort();
        dropped
            .await
            .expect("the sampler is dropped with its supervisor");
    }
}
