//! The dashboard's heartbeat sampler: every [`SAMPLE_EVERY`] it reads the
//! workers' heartbeats into the [`History`] behind its charts and
//! `/metrics`.
//!
//! The sampler runs under a supervisor: should it ever end or panic, the
//! supervisor says so on standard error and starts it again after one
//! interval, so the charts go on instead of freezing without a word.
//! Stopping the supervisor (aborting its task) stops the sampler with it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::error::OpsError;
use crate::fleet::{Fleet, History};

/// How often the dashboard samples the workers' heartbeats for its charts
/// and `/metrics`.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Samples `fleet`'s heartbeats into `history` until the task is aborted,
/// starting the sampler again whenever it ends or panics.
pub(crate) async fn run(fleet: Fleet, history: Arc<History>) {
    supervise(
        move || sample(fleet.clone(), Arc::clone(&history)),
        SAMPLE_EVERY,
    )
    .await
}

/// Runs the task `start` makes; whenever it ends or panics, logs an error
/// and, after `pause`, starts a new one. Never returns; dropping it aborts
/// the task it runs.
async fn supervise<F, Fut>(mut start: F, pause: Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let mut running = Aborting(tokio::spawn(start()));
        let why = match (&mut running.0).await {
            Ok(()) => "it ended".to_owned(),
            Err(e) if e.is_panic() => format!("it panicked: {}", panic_text(e.into_panic())),
            Err(_) => "it was cancelled".to_owned(),
        };
        eprintln!(
            "error: the dashboard's heartbeat sampler stopped ({why}); starting it again in {}s",
            pause.as_secs()
        );
        tokio::time::sleep(pause).await;
    }
}

/// A task aborted when dropped.
struct Aborting(JoinHandle<()>);

impl Drop for Aborting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The message of a panic's payload, when it has one.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// Samples the heartbeats into the history, every [`SAMPLE_EVERY`].
async fn sample(fleet: Fleet, history: Arc<History>) {
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    loop {
        ticks.tick().await;
        match fleet.workers().await {
            Ok(workers) => history.record(&workers, crate::time::now_ms()),
            Err(error) => warn_sample_failed(&error),
        }
    }
}

/// The dashboard logs nothing else; a failed sample shows as a gap.
fn warn_sample_failed(error: &OpsError) {
    eprintln!("warning: could not read the workers' heartbeats: {error}");
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
