//! The loop that takes deliveries from one queue and the task that runs each.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use queuey_core::{BoxError, Delivery, DeliveryStream, QueueConfig};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use super::WorkerError;
use super::handle::HandleInner;
use super::route::{ReadyRoute, Route};
use super::settle::settle;
use crate::Disposition;
use crate::metrics::SETTLE_FAILURES_TOTAL;

/// The job types handled on one queue.
pub(crate) struct QueueRoutes {
    pub(crate) config: QueueConfig,
    pub(crate) queue: Arc<str>,
    pub(crate) routes: HashMap<&'static str, Arc<dyn Route>>,
}

/// What every queue loop of one worker shares.
pub(crate) struct Shared {
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) jobs: Mutex<JoinSet<()>>,
    pub(crate) handle: Arc<HandleInner>,
    /// A stack whose readiness failed stops the worker; its error is kept here.
    pub(crate) failure: Mutex<Option<WorkerError>>,
}

impl Shared {
    fn fail(&self, error: WorkerError) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        failure.get_or_insert(error);
        drop(failure);
        self.handle.stop.send_replace(true);
    }
}

/// Resolves when shutdown was requested.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the handle is gone, which cannot happen while the
    // worker runs; treat it as a stop.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Takes deliveries from `stream` until shutdown or a consumer failure.
///
/// For each delivery: wait until the stream has one (holding nothing, so an
/// idle queue never sits on a concurrency slot another queue could use),
/// then for a free slot, then for the stack to be ready, and only then take
/// it off the stream.
pub(crate) async fn consume(
    queue: Arc<QueueRoutes>,
    stream: DeliveryStream,
    shared: Arc<Shared>,
) -> Result<(), WorkerError> {
    let mut stop = shared.handle.stop.subscribe();
    let mut stream = stream.peekable();
    // With a single job type on the queue, its stack is readied before the
    // delivery is taken, so a saturated stack (a concurrency or rate limit
    // inside it) leaves the delivery where it is.
    let only_route = (queue.routes.len() == 1)
        .then(|| queue.routes.values().next().cloned())
        .flatten();
    loop {
        let step = async {
            if std::pin::Pin::new(&mut stream).peek().await.is_none() {
                return Ok(None);
            }
            let Ok(permit) = Arc::clone(&shared.permits).acquire_owned().await else {
                return Ok(None);
            };
            let ready = match &only_route {
                Some(route) => match route.ready().await {
                    Ok(ready) => Some(ready),
                    Err(source) => {
                        return Err(WorkerError::Service {
                            job_type: route.job_type().to_owned(),
                            source,
                        });
                    }
                },
                None => None,
            };
            Ok(Some((permit, ready)))
        };
        let (permit, ready) = tokio::select! {
            biased;
            () = stopped(&mut stop) => return Ok(()),
            step = step => match step? {
                Some(taken) => taken,
                // The stream ended (or the worker is closing its slots).
                None if *stop.borrow() => return Ok(()),
                None => {
                    return Err(WorkerError::ConsumerCancelled {
                        queue: queue.queue.to_string(),
                    });
                }
            },
        };
        // Peeked above, so this returns at once.
        let delivery = match stream.next().await {
            Some(Ok(delivery)) => delivery,
            Some(Err(source)) => {
                return Err(WorkerError::ConsumerFailed {
                    queue: queue.queue.to_string(),
                    source,
                });
            }
            None => {
                return Err(WorkerError::ConsumerCancelled {
                    queue: queue.queue.to_string(),
                });
            }
        };
        shared.handle.jobs_started.fetch_add(1, Ordering::Relaxed);
        let job = run_job(
            delivery,
            ready,
            Arc::clone(&queue),
            Arc::clone(&shared),
            permit,
        );
        let mut jobs = shared.jobs.lock().unwrap_or_else(|p| p.into_inner());
        // Reap what finished, so the set only holds running jobs.
        while jobs.try_join_next().is_some() {}
        jobs.spawn(job);
    }
}

async fn run_job(
    delivery: Box<dyn Delivery>,
    ready: Option<Box<dyn ReadyRoute>>,
    queue: Arc<QueueRoutes>,
    shared: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
) {
    let job_type = delivery.envelope().job_type.as_str();
    let outcome: Result<Disposition, BoxError> = match queue.routes.get(job_type) {
        None => Ok(Disposition::DeadLetter {
            reason: format!(
                "no handler for job type `{job_type}` on queue `{}` in this worker",
                queue.queue
            ),
        }),
        Some(route) => {
            let ready = match ready {
                Some(ready) if route.job_type() == job_type => ready,
                _ => match route.ready().await {
                    Ok(ready) => ready,
                    Err(source) => {
                        // Not the job's fault: leave it to the broker.
                        shared.fail(WorkerError::Service {
                            job_type: job_type.to_owned(),
                            source,
                        });
                        return;
                    }
                },
            };
            match ready.call(delivery.envelope(), &queue.queue, delivery.redelivered()) {
                Ok(future) => future.await,
                Err(reason) => Ok(Disposition::DeadLetter { reason }),
            }
        }
    };
    let disposition = match &outcome {
        Ok(d) => d.as_str(),
        Err(_) => "dead_letter",
    };
    let job_id = delivery.envelope().job_id;
    match settle(delivery, outcome, queue.config.top_priority()).await {
        Ok(_) => {
            shared.handle.jobs_settled.fetch_add(1, Ordering::Relaxed);
        }
        Err(error) => {
            shared
                .handle
                .settle_failures
                .fetch_add(1, Ordering::Relaxed);
            metrics::counter!(SETTLE_FAILURES_TOTAL, "queue" => queue.queue.to_string())
                .increment(1);
            tracing::error!(
                queue = %queue.queue,
                %job_id,
                disposition,
                %error,
                "could not settle a job; the broker keeps it and will deliver it again"
            );
        }
    }
}
