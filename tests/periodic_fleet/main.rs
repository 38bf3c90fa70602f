//! A fleet of processes on one RabbitMQ firing a 1 s schedule: each tick is
//! enqueued exactly once while processes are killed, restarted one by one,
//! or all stopped for a while (then the missed-tick policy applies).
//!
//! The processes are this test binary run again with
//! `QUEUEY_PERIODIC_CHILD` set (the `child_process` test is their entry
//! point, and does nothing otherwise). Needs `AMQP_URL`; every queue the
//! test creates is deleted when it ends, and every process it started is
//! killed.

#[allow(dead_code)]
#[macro_use]
#[path = "../../queuey-rabbitmq/tests/broker/support.rs"]
mod support;

mod child;
mod fleet;
