//! The worker against the real broker: jobs through hold queues, into
//! `q.dead`, deferred, back to their own shard of a sharded queue, and
//! surviving a worker that dies mid-job.
//!
//! Needs `AMQP_URL`; without it every test skips with a notice (and fails
//! under `QUEUEY_REQUIRE_BROKER=1`). Each test uses queue names of its own
//! and deletes them, hold queues included.

// The broker harness of the RabbitMQ backend's own tests: the address (or
// a skip), a raw connection for assertions, cleanup, `rabbitmqctl`. Not every
// helper is used here.
#[allow(dead_code)]
#[macro_use]
#[path = "../../queuey-rabbitmq/tests/broker/support.rs"]
mod support;

#[macro_use]
mod scenario;

#[path = "../../queuey-redis/tests/support/private_redis.rs"]
mod private_redis;

mod at_time;
mod cooldown;
mod crash;
mod flows;
mod namespaces;
mod progress;
mod results;
mod shard_retries;
mod shards;
mod tenants;
#[cfg(feature = "redis")]
mod unique;
