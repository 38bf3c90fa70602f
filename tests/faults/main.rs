//! Fault scenarios against real brokers: the RabbitMQ backend and the
//! worker survive closed, reset and black-holed connections, a broker
//! restarted or killed, and a worker process killed mid-job, without losing
//! a confirmed job; plus the bounded broker calls those rely on, processes
//! started before their broker, and long jobs against the broker's consumer
//! timeout. A sharded quorum queue loses no job when the node leading one
//! of its shards dies.
//!
//! Shared-broker tests need `AMQP_URL` (they skip without it, and fail
//! under `QUEUEY_REQUIRE_BROKER=1`); they only ever close their own,
//! named connections. Tests that stop or kill a broker start a private
//! node of their own (root and the `rabbitmq-server` package needed).

#[path = "../support/fault/mod.rs"]
mod fault;

// The broker harness of the RabbitMQ backend's own tests (address or skip,
// `within`, log capture). Not every helper is used here.
#[allow(dead_code, unused_macros)]
#[macro_use]
#[path = "../../queuey-rabbitmq/tests/broker/support.rs"]
mod support;

// Shared with the TLS suite, which uses the TLS node too.
#[allow(dead_code, unused_macros)]
#[macro_use]
mod private;

mod calls;
mod cluster;
mod cluster_kit;
mod consumer_timeout;
#[cfg(feature = "fleet")]
mod control;
mod kit;
mod limits;
mod poison;
mod restart;
mod scenarios;
mod shards;
mod startup;
mod worker;
