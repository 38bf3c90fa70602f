//! Jobs handled once in the fault runs: a worker with the idempotency
//! layer on a Redis store (a private `redis-server` the run may kill).

use std::sync::Arc;
use std::time::Duration;

use queuey::layers::idempotency::IdempotencyLayer;
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqBackend;
use queuey_redis::RedisStore;

/// The claim's lease in the fault runs: short, so that the copies of a
/// job whose worker process was killed run again within seconds.
pub(crate) const LEASE: Duration = Duration::from_secs(3);

/// The variable that gives a worker process the store's URL.
pub(crate) const STORE_URL: &str = "QUEUEY_FAULT_STORE_URL";

/// Connects to the store at `url`.
pub(crate) async fn store(url: &str) -> RedisStore {
    RedisStore::connect(url).await.expect("the store connects")
}

/// A worker of `J` with `handler`, inside the idempotency layer when a
/// store is given.
pub(crate) async fn worker<J, H>(
    backend: Arc<RabbitMqBackend>,
    handler: H,
    store: Option<RedisStore>,
    concurrency: usize,
    shutdown_timeout: Duration,
) -> Worker<J::Queues, Arc<RabbitMqBackend>>
where
    J: Job,
    H: JobHandler<Job = J>,
{
    let builder = Worker::<J::Queues, _>::builder(backend)
        .concurrency(concurrency)
        .shutdown_timeout(shutdown_timeout);
    match store {
        Some(store) => {
            builder
                .handler_with(handler, IdempotencyLayer::new(store).lease(LEASE))
                .build()
                .await
        }
        None => builder.handler(handler).build().await,
    }
    .expect("the worker builds")
}
