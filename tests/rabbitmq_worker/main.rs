//! The worker against the real broker: jobs through hold queues, into
//! `q.dead`, deferred, and surviving a worker that dies mid-job.
//!
//! Needs `AMQP_URL`; without it every test skips with a notice (and fails
//! under `QUEUEY_REQUIRE_BROKER=1`). Each test uses queue names of its own
//! and deletes them, hold queues included.

#[macro_use]
mod support;

mod crash;
mod flows;
