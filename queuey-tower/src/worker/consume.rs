//! The loop that takes deliveries from one queue, and consumes again when
//! its consumer is lost.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;

use futures::{FutureExt, StreamExt};
use queuey_core::backend::{Backend, ConnectionState, Delivery};
use queuey_core::control::ControlView;
use queuey_core::{Disposition, QueueConfig};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::WorkerError;
use super::gate::QueueGate;
use super::handle::stopped;
use super::job::{JobEnv, Started, run_job};
use super::reconnect::{
    Lost, Reconnect, Reconnecting, Stream, gave_up, note_lost, open, set_reconnecting,
};
use super::route::Delivered;
use super::routes::Routes;
use super::tasks::JobTasks;
use super::turns::Intake;
use super::wing::{Extras, Starting, Wing};
use crate::metrics::CONSUMER_RESTARTS_TOTAL;

/// The job types handled on one queue, each with its own stack.
pub(crate) struct QueueRoutes {
    pub(crate) config: QueueConfig,
    /// The broker queues consumed for it: the queue itself, or a sharded
    /// queue's lane and shards.
    pub(crate) physical: Intake,
    pub(crate) queue: Arc<str>,
    pub(crate) routes: Routes,
    /// The key of the queue's settling gauge.
    pub(crate) settling: Arc<metrics::Key>,
}

/// What every queue loop of one worker shares.
pub(crate) struct WorkerShared {
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) jobs: JobTasks<Started>,
    /// The fleet's control commands, when the backend carries them.
    pub(crate) control: Option<ControlView>,
    /// What a running job needs of its worker.
    pub(crate) env: Arc<JobEnv>,
}

/// What the stream has next.
enum Next {
    Delivery,
    Failed,
    Ended,
}

impl Next {
    fn of<T, E>(peeked: Option<&Result<T, E>>) -> Next {
        match peeked {
            Some(Ok(_)) => Next::Delivery,
            Some(Err(_)) => Next::Failed,
            None => Next::Ended,
        }
    }
}

/// Polls `future` once in the calling task's context (a `Pending` registers
/// its waker). The loop's waits are usually over at once while deliveries
/// flow; trying them first spares them the shutdown and connection watches.
async fn first_poll<F: Future>(future: F) -> Poll<F::Output> {
    let mut future = std::pin::pin!(future);
    poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// What the loop does after a wait for the peeked delivery.
enum Step<T> {
    /// Go on with it.
    Go(T),
    /// Shutdown: the delivery was handed back.
    Stop,
    /// Look at the stream again: the connection was lost (the stale delivery
    /// was dropped) or the queue's gate closed (it was handed back).
    Again,
}

/// Takes deliveries from one queue until shutdown, or until its consumer
/// fails for good. For each: wait for the stream to have one (holding no
/// slot meanwhile), find its stack, wait for a slot and a ready stack, then
/// take it and call the stack. While waiting, a lost connection
/// ([`Backend::connection_changed`]) or a shutdown hands the delivery back.
pub(crate) async fn consume<B: Backend>(
    mut queue: QueueRoutes,
    backend: Arc<B>,
    shared: Arc<WorkerShared>,
    reconnect: Reconnect,
) -> Result<(), WorkerError> {
    let mut stop = shared.env.handle.stop.subscribe();
    let mut gate = QueueGate::new(shared.control.as_ref(), &queue.queue);
    let mut lost: Option<Lost> = None;
    let mut reconnecting: Option<Reconnecting<'_>> = None;
    let mut current: Option<Stream> = None;
    loop {
        if gate.is_closed() {
            // Dropping the stream gives back what it had taken from the
            // broker; nothing of this queue is held while its gate is
            // closed.
            current = None;
            if !gate.wait_open(&mut stop, &shared.env.handle).await {
                return Ok(());
            }
        }
        let stream = match &mut current {
            Some(stream) => stream,
            None => {
                let opened = open(
                    &queue.physical,
                    &queue.queue,
                    &*backend,
                    &mut stop,
                    &mut lost,
                    &reconnect,
                )
                .await?;
                match opened {
                    Some(stream) => {
                        if lost.is_some() {
                            shared
                                .env
                                .handle
                                .consumer_restarts
                                .fetch_add(1, Ordering::Relaxed);
                            metrics::counter!(CONSUMER_RESTARTS_TOTAL, "queue" => queue.queue.to_string())
                                .increment(1);
                            tracing::info!(queue = %queue.queue, "consuming again");
                        }
                        set_reconnecting(&mut reconnecting, None);
                        current.insert(stream)
                    }
                    None => return Ok(()),
                }
            }
        };
        if *stop.borrow() {
            return Ok(());
        }
        let peeked = match first_poll(Pin::new(&mut *stream).peek()).await {
            Poll::Ready(next) => Some(Next::of(next)),
            Poll::Pending => None,
        };
        let next = match peeked {
            Some(next) => next,
            None => tokio::select! {
                biased;
                () = stopped(&mut stop) => return Ok(()),
                () = gate.closed() => continue,
                next = Pin::new(&mut *stream).peek() => Next::of(next),
            },
        };
        let lost_because = match next {
            Next::Delivery => None,
            Next::Failed => match stream.next().await {
                Some(Err(error)) if error.is_transient() => Some(error.to_string()),
                Some(Err(source)) => {
                    return Err(WorkerError::ConsumerFailed {
                        queue: queue.queue.to_string(),
                        source,
                    });
                }
                _ => continue,
            },
            Next::Ended => {
                if *stop.borrow() {
                    return Ok(());
                }
                match backend.connection_state() {
                    ConnectionState::Closed => {
                        return Err(WorkerError::BackendClosed {
                            queue: queue.queue.to_string(),
                        });
                    }
                    ConnectionState::Failed => {
                        return gave_up::<_, ()>(&queue.config, &queue.queue, &*backend, &mut stop)
                            .await
                            .map(|_| ());
                    }
                    _ => Some("the consumer ended unexpectedly".to_owned()),
                }
            }
        };
        if let Some(reason) = lost_because {
            current = None;
            tracing::warn!(queue = %queue.queue, error = %reason, "lost the consumer; consuming again");
            note_lost(&mut lost);
            set_reconnecting(&mut reconnecting, Some(&shared.env.handle));
            continue;
        }
        // A delivery came: the consumer works.
        lost = None;
        set_reconnecting(&mut reconnecting, None);
        let key = match stream_peek_job_type(stream) {
            Some(job_type) => queue.routes.find(job_type),
            None => continue,
        };
        let slot = Arc::clone(&shared.permits).acquire_owned();
        let slot = watch(&mut stop, &*backend, &mut gate, stream, &queue.queue, slot).await;
        let permit = match slot {
            Step::Go(Ok(permit)) => permit,
            // The semaphore is never closed while the loops run.
            Step::Go(Err(_)) | Step::Stop => return Ok(()),
            Step::Again => continue,
        };
        if let Some(route) = key.and_then(|key| queue.routes.get_mut(key)) {
            let ready = poll_fn(|cx| route.poll_ready(cx));
            match watch(&mut stop, &*backend, &mut gate, stream, &queue.queue, ready).await {
                Step::Go(Ok(())) => {}
                Step::Go(Err(source)) => {
                    hand_back(stream, &queue.queue).await;
                    return Err(WorkerError::Service {
                        job_type: route.job_type().to_owned(),
                        source,
                    });
                }
                Step::Stop => return Ok(()),
                Step::Again => continue,
            }
        }
        // Peeked above, so this returns at once.
        let Some(Some(Ok(delivery))) = stream.next().now_or_never() else {
            continue;
        };
        start(&mut queue, key, delivery, &shared, permit);
    }
}

/// The job type of the delivery the stream has peeked.
fn stream_peek_job_type(stream: &mut Stream) -> Option<&str> {
    match Pin::new(stream).peek().now_or_never() {
        Some(Some(Ok(delivery))) => Some(delivery.envelope().job_type.as_str()),
        _ => None,
    }
}

/// Calls the job type's stack (ready) with the delivery and spawns the job.
fn start(
    queue: &mut QueueRoutes,
    key: Option<usize>,
    delivery: Box<dyn Delivery>,
    shared: &Arc<WorkerShared>,
    permit: OwnedSemaphorePermit,
) {
    let handle = &shared.env.handle;
    handle.jobs_started.fetch_add(1, Ordering::Relaxed);
    let route = key.and_then(|key| queue.routes.get_mut(key));
    let wings = &shared.env.wings;
    let mut starting = Starting {
        envelope: delivery.envelope(),
        queue: &queue.queue,
        job_type: route.as_ref().map(|route| route.job_type()),
        refused: false,
    };
    let refused = wings.refuses(&starting);
    starting.refused = refused.is_some();
    let mut extras = Extras::default();
    let state = wings.start(&starting, &mut extras);
    let started = match (refused, route) {
        (Some(reason), _) => Err(reason),
        (None, Some(route)) => route.call(Delivered {
            envelope: delivery.envelope(),
            queue: &queue.queue,
            redelivered: delivery.redelivered(),
            classifier: &shared.env.classifier,
            extras,
        }),
        (None, None) => Err(format!(
            "no handler for job type `{}` on queue `{}` in this worker (a job type's name is \
             its `#[job(name = ..)]`, else its Rust type's name: renaming a type without \
             `name` changes it)",
            delivery.envelope().job_type,
            queue.queue
        )),
    };
    let job = Started {
        delivery,
        job: started,
        queue: Arc::clone(&queue.queue),
        wings: state,
        settling: Arc::clone(&queue.settling),
        permit,
    };
    shared.jobs.start(job, || {
        // A runner does not keep the worker alive: it holds what a job
        // needs of the worker only while it runs one. (A job handed over
        // after the worker is gone is dropped unsettled: the broker keeps
        // it.)
        let env = Arc::downgrade(&shared.env);
        move |job| {
            let env = env.upgrade();
            async move {
                if let Some(env) = env {
                    run_job(job, env).await;
                }
            }
        }
    });
}

/// Waits for `future`, unless shutdown is requested, the queue's gate
/// closes, or the backend reports its connection is not up; then the
/// delivery `stream` has peeked is handed back, or dropped with the lost
/// connection.
async fn watch<B: Backend + ?Sized, F: Future>(
    stop: &mut watch::Receiver<bool>,
    backend: &B,
    gate: &mut QueueGate,
    stream: &mut Stream,
    queue: &str,
    future: F,
) -> Step<F::Output> {
    tokio::pin!(future);
    let mut stopping = *stop.borrow();
    if !stopping && !gate.is_closed() {
        if let Poll::Ready(output) = first_poll(future.as_mut()).await {
            return Step::Go(output);
        }
        stopping = tokio::select! {
            biased;
            () = stopped(stop) => true,
            () = gate.closed() => false,
            output = &mut future => return Step::Go(output),
            _ = backend.connection_changed(ConnectionState::Connected) => {
                drop_stale(stream, queue).await;
                return Step::Again;
            }
        };
    }
    hand_back(stream, queue).await;
    if stopping { Step::Stop } else { Step::Again }
}

/// Hands the delivery the stream has peeked back to the broker, at once,
/// on shutdown or when the queue's gate closes: it was taken but not
/// started.
async fn hand_back(stream: &mut Stream, queue: &str) {
    if let Some(Some(Ok(delivery))) = stream.next().now_or_never() {
        let job_id = delivery.envelope().job_id;
        if let Err(error) = delivery.settle(Disposition::Requeue).await {
            tracing::debug!(%queue, %job_id, %error, "could not hand a delivery back; the broker will deliver it again");
        }
    }
}

/// Drops the delivery the stream has peeked: it came on a connection that
/// is gone, so it cannot be settled and the broker delivers it again.
async fn drop_stale(stream: &mut Stream, queue: &str) {
    if let Some(Some(Ok(delivery))) = stream.next().now_or_never() {
        tracing::debug!(%queue, job_id = %delivery.envelope().job_id, "dropping a delivery taken on a lost connection; the broker delivers it again");
    }
}
