//! The worker's running jobs: a task each, abandoned all at once when the
//! shutdown timeout passes.

use std::future::Future;

use tokio::sync::watch;

/// Spawns the jobs of one worker and abandons them on request.
///
/// Each job runs on a task of its own, so jobs spread over the runtime's
/// threads. The tasks are not collected in a set: a job holds its
/// concurrency permit until it ends, so the worker's permits count the jobs
/// still running and tell when all have ended. A job that went pending
/// listens for [`abandon_all`](JobTasks::abandon_all), which drops it at
/// its next wake-up as aborting its task would; a job that finishes without
/// ever waiting costs nothing more.
pub(crate) struct JobTasks {
    abandon: watch::Sender<bool>,
}

impl JobTasks {
    pub(crate) fn new() -> Self {
        JobTasks {
            abandon: watch::Sender::new(false),
        }
    }

    /// Runs `job` on a task of its own until it ends or is abandoned.
    pub(crate) fn spawn<F>(&self, job: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut abandoned = self.abandon.subscribe();
        // A job's future is large (nearly 1 KB: every await of its settle
        // inline): boxed once here, it is not copied again into the task,
        // nor over when the task ends.
        let job = Box::pin(job);
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = job => {}
                _ = abandoned.wait_for(|abandon| *abandon) => {}
            }
        });
    }

    /// Drops every running job at its next wake-up.
    pub(crate) fn abandon_all(&self) {
        self.abandon.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    /// Counts its drops, like the permit a job holds.
    struct Held(Arc<AtomicUsize>);

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn finished_jobs_end_and_waiting_ones_are_dropped_when_abandoned() {
        let tasks = JobTasks::new();
        let permits = Arc::new(Semaphore::new(3));
        let dropped = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        for i in 0..3 {
            let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
            let held = Held(Arc::clone(&dropped));
            let finished = Arc::clone(&finished);
            tasks.spawn(async move {
                let _permit = permit;
                let _held = held;
                if i > 0 {
                    std::future::pending::<()>().await;
                }
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        assert_eq!(permits.available_permits(), 1);
        tasks.abandon_all();
        let all = tokio::time::timeout(Duration::from_secs(5), permits.acquire_many(3)).await;
        assert!(all.is_ok(), "the abandoned jobs gave their permits back");
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
        assert_eq!(finished.load(Ordering::SeqCst), 1);
    }
}
