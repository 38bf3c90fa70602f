//! A fleet of worker processes on one RabbitMQ, controlled while it runs:
//! a queue paused and resumed across every process, jobs cancelled
//! wherever they wait, and the workers' heartbeats.
//!
//! The processes are this test binary run again with `QUEUEY_CONTROL_CHILD`
//! set (the `child_process` test is their entry point, and does nothing
//! otherwise). Needs `AMQP_URL`; every queue the test creates is deleted
//! when it ends, and every process it started is killed.

#[allow(dead_code, unused_macros)]
#[macro_use]
#[path = "../../queuey-rabbitmq/tests/broker/support.rs"]
mod support;

mod cancel;
mod child;
mod fleet;
mod pause;
mod workers;
