//! The worker's running jobs: each on a runner task of its own, runners
//! kept and reused from job to job, and every job abandoned at once when
//! the shutdown timeout passes.

use std::future::{Future, poll_fn};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use tokio::sync::watch;

use crate::lock;

/// Runs the jobs of one worker, each on a task of its own, and abandons
/// them on request.
///
/// A job goes to the runner idle last, or to a new runner when none waits,
/// so no job waits behind another (a shared channel would let a busy runner
/// take it). Handing a job over is a lock and a wake-up: cheaper than
/// spawning a task per job. Idle runners end when the pool is dropped. The
/// worker's permits, not a set, count the running jobs; a pending job is
/// dropped at its next wake-up after [`abandon_all`](JobTasks::abandon_all).
pub(crate) struct JobTasks<T> {
    abandon: watch::Sender<bool>,
    idle: Arc<Mutex<Idle<T>>>,
}

/// The runners waiting for a job, the last one idle on top.
struct Idle<T> {
    waiting: Vec<Arc<Slot<T>>>,
    /// The pool is gone: runners end instead of waiting.
    closed: bool,
}

/// Where one runner waits for its next job.
struct Slot<T> {
    state: Mutex<SlotState<T>>,
}

struct SlotState<T> {
    handed: Handed<T>,
    /// The runner's, while it waits.
    waker: Option<Waker>,
}

enum Handed<T> {
    Nothing,
    Job(T),
    Closed,
}

impl<T: Send + 'static> JobTasks<T> {
    pub(crate) fn new() -> Self {
        JobTasks {
            abandon: watch::Sender::new(false),
            idle: Arc::new(Mutex::new(Idle {
                waiting: Vec::new(),
                closed: false,
            })),
        }
    }

    /// Runs `job` on an idle runner, or on a new one calling what `runner`
    /// returns with each job it takes.
    pub(crate) fn start<R, F>(&self, job: T, runner: impl FnOnce() -> R)
    where
        R: FnMut(T) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let idle = lock(&self.idle).waiting.pop();
        match idle {
            Some(slot) => slot.hand(Handed::Job(job)),
            None => {
                tokio::spawn(run(
                    job,
                    runner(),
                    Arc::clone(&self.idle),
                    self.abandon.subscribe(),
                ));
            }
        }
    }
}

impl<T> JobTasks<T> {
    /// Drops every running job at its next wake-up.
    pub(crate) fn abandon_all(&self) {
        self.abandon.send_replace(true);
    }

    #[cfg(test)]
    fn idle_runners(&self) -> usize {
        lock(&self.idle).waiting.len()
    }
}

impl<T> Drop for JobTasks<T> {
    fn drop(&mut self) {
        let waiting = {
            let mut runners = lock(&self.idle);
            runners.closed = true;
            std::mem::take(&mut runners.waiting)
        };
        for slot in waiting {
            slot.hand(Handed::Closed);
        }
    }
}

impl<T> Slot<T> {
    /// Gives the waiting runner `handed`, and wakes it.
    fn hand(&self, handed: Handed<T>) {
        let waker = {
            let mut state = lock(&self.state);
            state.handed = handed;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The next job handed to this runner; `None` once the pool is gone.
    async fn next(&self) -> Option<T> {
        poll_fn(|cx| {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut state.handed, Handed::Nothing) {
                Handed::Job(job) => Poll::Ready(Some(job)),
                Handed::Closed => Poll::Ready(None),
                Handed::Nothing => {
                    // Under `hand`'s lock: a job handed after this look wakes it.
                    match &mut state.waker {
                        Some(waker) => waker.clone_from(cx.waker()),
                        None => state.waker = Some(cx.waker().clone()),
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// A runner: runs `job`, then every job handed to it after, until the pool
/// is gone or its job is abandoned.
async fn run<T, R, F>(
    mut job: T,
    mut runner: R,
    idle: Arc<Mutex<Idle<T>>>,
    mut abandoned: watch::Receiver<bool>,
) where
    R: FnMut(T) -> F,
    F: Future<Output = ()>,
{
    let slot = Arc::new(Slot {
        state: Mutex::new(SlotState {
            handed: Handed::Nothing,
            waker: None,
        }),
    });
    loop {
        tokio::select! {
            biased;
            () = runner(job) => {}
            _ = abandoned.wait_for(|abandon| *abandon) => return,
        }
        {
            let mut runners = lock(&idle);
            if runners.closed {
                return;
            }
            runners.waiting.push(Arc::clone(&slot));
        }
        job = match slot.next().await {
            Some(next) => next,
            None => return,
        };
    }
}

#[cfg(test)]
mod tests {
    use std::future::pending;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::{Barrier, Semaphore, oneshot};

    use super::*;

    /// Counts its drops, like the permit a job holds.
    struct Held(Arc<AtomicUsize>);

    impl Drop for Held {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A job of these tests: runs `work`, holding `held` until it ends.
    struct TestJob {
        held: Held,
        work: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    }

    /// A pool, the runners it built and the jobs that ended.
    struct Pool {
        tasks: JobTasks<TestJob>,
        runners: Arc<AtomicUsize>,
        ended: Arc<AtomicUsize>,
    }

    impl Pool {
        fn new() -> Self {
            Pool {
                tasks: JobTasks::new(),
                runners: Arc::new(AtomicUsize::new(0)),
                ended: Arc::new(AtomicUsize::new(0)),
            }
        }

        /// Starts a job that runs `work`; it counts as ended once dropped.
        fn start(&self, work: impl Future<Output = ()> + Send + 'static) {
            let job = TestJob {
                held: Held(Arc::clone(&self.ended)),
                work: Box::pin(work),
            };
            self.tasks.start(job, || {
                self.runners.fetch_add(1, Ordering::SeqCst);
                |job: TestJob| async move {
                    let _held = job.held;
                    job.work.await;
                }
            });
        }

        fn runners(&self) -> usize {
            self.runners.load(Ordering::SeqCst)
        }

        async fn ended(&self, at_least: usize) {
            until(|| self.ended.load(Ordering::SeqCst) >= at_least).await;
        }

        async fn idle(&self, at_least: usize) {
            until(|| self.tasks.idle_runners() >= at_least).await;
        }
    }

    /// Waits until `done` holds, or fails the test after 5 s.
    async fn until(done: impl Fn() -> bool) {
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while !done() {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(waited.is_ok(), "not within 5 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finished_jobs_end_and_waiting_ones_are_dropped_when_abandoned() {
        let pool = Pool::new();
        let permits = Arc::new(Semaphore::new(3));
        let finished = Arc::new(AtomicUsize::new(0));
        for i in 0..3 {
            let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
            let finished = Arc::clone(&finished);
            pool.start(async move {
                let _permit = permit;
                if i > 0 {
                    pending::<()>().await;
                }
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        pool.ended(1).await;
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        assert_eq!(permits.available_permits(), 1);
        pool.tasks.abandon_all();
        let all = tokio::time::timeout(Duration::from_secs(5), permits.acquire_many(3)).await;
        assert!(all.is_ok(), "the abandoned jobs gave their permits back");
        // A job gives its permit back as it is dropped, a moment before its
        // runner counts it ended.
        pool.ended(3).await;
        assert_eq!(finished.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_runner_takes_the_next_job_and_a_busy_one_never_does() {
        let pool = Pool::new();
        // One job after another: each finds the first runner idle.
        for done in 1..=20 {
            pool.start(async {});
            pool.ended(done).await;
            // The runner counts itself idle right after its job.
            pool.idle(1).await;
        }
        assert_eq!(pool.runners(), 1, "one runner ran them all");

        // That runner is now busy with a job that waits: the next job gets
        // a runner of its own and ends while the first still waits.
        let (release, released) = oneshot::channel::<()>();
        pool.start(async move {
            let _ = released.await;
        });
        pool.start(async {});
        pool.ended(21).await;
        assert_eq!(pool.runners(), 2);
        release.send(()).unwrap();
        pool.ended(22).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn as_many_jobs_at_once_as_started_none_behind_another() {
        let pool = Pool::new();
        let all_in = Arc::new(Barrier::new(8));
        // Twice: the second round runs on the runners of the first.
        for round in 1..=2 {
            for _ in 0..8 {
                let all_in = Arc::clone(&all_in);
                // Ends only once all eight run at the same time.
                pool.start(async move {
                    all_in.wait().await;
                });
            }
            pool.ended(8 * round).await;
            pool.idle(8).await;
        }
        assert_eq!(pool.runners(), 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_pool_ends_its_idle_runners() {
        let Pool { tasks, .. } = Pool::new();
        let ended = Arc::new(AtomicUsize::new(0));
        // The runner's state is dropped with the runner: it holds `gone`.
        let gone = Arc::new(AtomicUsize::new(0));
        let held = Held(Arc::clone(&gone));
        let job = TestJob {
            held: Held(Arc::clone(&ended)),
            work: Box::pin(async {}),
        };
        tasks.start(job, move || {
            move |job: TestJob| {
                let _runner_holds = &held;
                async move {
                    let _held = job.held;
                    job.work.await;
                }
            }
        });
        until(|| tasks.idle_runners() == 1).await;
        assert_eq!(ended.load(Ordering::SeqCst), 1);
        assert_eq!(gone.load(Ordering::SeqCst), 0, "the idle runner waits");
        drop(tasks);
        until(|| gone.load(Ordering::SeqCst) == 1).await;
    }
}
