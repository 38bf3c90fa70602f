//! The signals a service manager stops a process with.

/// Completes when the process is asked to stop: Ctrl-C (`SIGINT`) or, on
/// Unix, `SIGTERM`, which Kubernetes, systemd and Docker send first.
///
/// Give it to [`Worker::run_until`](crate::Worker::run_until): on either
/// signal the worker takes no further deliveries, lets started jobs finish
/// and settle (up to its
/// [`shutdown_timeout`](crate::WorkerBuilder::shutdown_timeout), 30 s by
/// default) and leaves every other job with the broker. Keep the service
/// manager's grace period (`terminationGracePeriodSeconds`,
/// `TimeoutStopSec`) above the shutdown timeout, or jobs still running at
/// the kill are delivered again. A signal it cannot listen for is logged as
/// a warning and ignored.
///
/// ```no_run
/// # async fn run(worker: queuey_tower::Worker<impl queuey_core::Queues, impl queuey_core::backend::Backend>)
/// # -> Result<(), queuey_tower::WorkerError> {
/// worker.run_until(queuey_tower::shutdown_signal()).await
/// # }
/// ```
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    () = ctrl_c() => {}
                    _ = terminate.recv() => {
                        tracing::info!("SIGTERM received: shutting down");
                    }
                }
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            }
        }
    }
    ctrl_c().await;
}

/// Drives `run` until `signal` completes, then calls `stop` and drives `run`
/// to its end: the graceful stop of a worker or a scheduler.
pub(crate) async fn run_until<R: Future, S: Future>(
    run: R,
    signal: S,
    stop: impl FnOnce(),
) -> R::Output {
    tokio::pin!(run);
    tokio::select! {
        ended = &mut run => return ended,
        _ = signal => stop(),
    }
    run.await
}

/// Resolves once `stop` turns true, or its sender is gone (a stop too).
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Ctrl-C, or never if it cannot be listened for.
async fn ctrl_c() {
    match tokio::signal::ctrl_c().await {
        Ok(()) => tracing::info!("Ctrl-C received: shutting down"),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use tokio::signal::unix::{SignalKind, signal};

    use super::*;

    #[tokio::test]
    async fn sigterm_completes_it() {
        // Installs the process's SIGTERM handler first, so a signal sent
        // before the future below listens cannot end the test process.
        let _installed = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        let waiting = tokio::spawn(shutdown_signal());
        for _ in 0..500 {
            if waiting.is_finished() {
                break;
            }
            let sent = std::process::Command::new("kill")
                .args(["-TERM", &std::process::id().to_string()])
                .status()
                .expect("the kill command runs");
            assert!(sent.success());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("completed on SIGTERM")
            .unwrap();
    }
}
