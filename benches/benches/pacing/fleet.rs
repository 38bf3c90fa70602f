//! The workers of a mode, in this process but sharing nothing except the
//! broker, Redis and the simulated partner: each has its own RabbitMQ
//! connection and its own Redis store connection, as separate processes
//! would.

use std::sync::Arc;
use std::time::Duration;

use queuey::handler::JobRequest;
use queuey::layers::cooldown::CooldownLayer;
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqBackend;
use queuey::store::RedisStore;
use queuey::worker::{WorkerError, WorkerHandle};
use tokio::task::JoinHandle;

use crate::BenchResult;
use crate::partner::{Answer, CALL_TIME, Partner};
use crate::queue::{PacingQueues, PartnerCall};
use crate::tally::{CountDeliveries, Tally};

/// How long a worker may take to stop once asked.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a mode's workers share: the broker's address and options, the
/// limit store's, the partner and the counts.
pub(crate) struct Shared<'a> {
    pub(crate) url: &'a str,
    pub(crate) redis_url: &'a str,
    /// The Redis keys' prefix: the same for the workers and a booking
    /// producer.
    pub(crate) prefix: &'a str,
    pub(crate) options: &'a dyn Fn(String) -> queuey::rabbitmq::RabbitMqOptions,
    pub(crate) slots: usize,
    pub(crate) partner: Arc<Partner>,
    pub(crate) tally: Arc<Tally>,
}

/// One running worker.
struct Running {
    handle: WorkerHandle,
    task: Option<JoinHandle<Result<(), WorkerError>>>,
    /// Its connection, until closed.
    backend: Option<Arc<RabbitMqBackend>>,
}

/// The running workers of a mode.
#[derive(Default)]
pub(crate) struct Fleet {
    workers: Vec<Running>,
}

impl Fleet {
    /// Builds and starts worker number `index`.
    pub(crate) async fn start_one(&mut self, shared: &Shared<'_>, index: usize) -> BenchResult<()> {
        let name = format!("{}-worker-{index}", PacingQueues::Work.name());
        let backend = Arc::new(
            RabbitMqBackend::with_options(shared.url, (shared.options)(name))
                .await
                .map_err(|e| format!("worker {index}: connecting to the broker: {e}"))?,
        );
        let built = build(shared, Arc::clone(&backend)).await;
        let worker = match built {
            Ok(worker) => worker,
            Err(e) => {
                let _ = backend.close().await;
                return Err(format!("worker {index}: {e}").into());
            }
        };
        let handle = worker.handle();
        let task = tokio::spawn(worker.run());
        self.workers.push(Running {
            handle,
            task: Some(task),
            backend: Some(backend),
        });
        Ok(())
    }

    /// Deliveries the workers took so far, by their own count.
    pub(crate) fn jobs_started(&self) -> u64 {
        self.workers.iter().map(|w| w.handle.jobs_started()).sum()
    }

    /// Stops every worker and closes its connection; what went wrong, if
    /// anything. Safe to call again.
    pub(crate) async fn stop(&mut self) -> Vec<String> {
        for worker in &self.workers {
            worker.handle.shutdown();
        }
        let mut problems = Vec::new();
        for (index, worker) in self.workers.iter_mut().enumerate() {
            if let Some(task) = worker.task.take() {
                match tokio::time::timeout(STOP_TIMEOUT, task).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => problems.push(format!("worker {index} ended with: {e}")),
                    Ok(Err(e)) => problems.push(format!("worker {index} panicked: {e}")),
                    Err(_) => problems.push(format!(
                        "worker {index} did not stop within {STOP_TIMEOUT:?}"
                    )),
                }
            }
            if let Some(backend) = worker.backend.take()
                && let Err(e) = backend.close().await
            {
                problems.push(format!("worker {index}: closing its connection: {e}"));
            }
        }
        problems
    }
}

/// A worker on `backend`: its own limit store connection, the handler
/// inside the delivery count and a cool-down by host.
async fn build(
    shared: &Shared<'_>,
    backend: Arc<RabbitMqBackend>,
) -> BenchResult<Worker<PacingQueues, Arc<RabbitMqBackend>>> {
    let store = RedisStore::builder(shared.redis_url)
        .prefix(shared.prefix)
        .connect()
        .await
        .map_err(|e| format!("connecting to Redis: {e}"))?;
    let partner = Arc::clone(&shared.partner);
    let tally = Arc::clone(&shared.tally);
    let handler = handler_fn(move |call: PartnerCall, _ctx: JobContext| {
        let partner = Arc::clone(&partner);
        let tally = Arc::clone(&tally);
        async move {
            tally.start(call.host_no, call.sent_us);
            match partner.call(call.host_no) {
                Answer::Admitted => {
                    tokio::time::sleep(CALL_TIME).await;
                    tally.finished();
                    Ok(())
                }
                Answer::TooMany(retry_after) => {
                    tally.refused();
                    Err(JobError::deferred(retry_after))
                }
            }
        }
    });
    let layers = ServiceBuilder::new()
        .layer(CountDeliveries(Arc::clone(&shared.tally)))
        .layer(CooldownLayer::new(|request: &JobRequest<PartnerCall>| {
            Some(request.job().host.clone())
        }));
    let worker = Worker::<PacingQueues, _>::builder(backend)
        .concurrency(shared.slots)
        .limit_store(store)
        .shutdown_timeout(Duration::from_secs(5))
        .handler_with(handler, layers)
        .build()
        .await?;
    Ok(worker)
}
