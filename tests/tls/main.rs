//! TLS against real brokers: a private RabbitMQ node with a TLS listener and
//! certificates made by the test. Encrypted round trips, certificates and
//! names that must be refused, mutual TLS with the `EXTERNAL` mechanism, a
//! broker killed under load over TLS, and a plaintext port given as
//! `amqps://` that must never see a credential.
//!
//! Like the fault suite, the tests that start a node need root and the
//! `rabbitmq-server` package; they skip without `AMQP_URL` and fail under
//! `QUEUEY_REQUIRE_BROKER=1` when they cannot run.

#[path = "../support/fault/mod.rs"]
mod fault;

#[allow(dead_code, unused_macros)]
#[macro_use]
#[path = "../../queuey-rabbitmq/tests/broker/support.rs"]
mod support;

#[allow(dead_code, unused_macros)]
#[macro_use]
#[path = "../faults/private.rs"]
mod private;

mod connect;
mod kill;
mod plaintext;
