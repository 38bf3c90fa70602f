//! Who may steer the fleet, proven with real RabbitMQ users: a private node
//! with a producer, a worker and an operator, each with the permissions
//! SECURITY.md recommends. Whatever the producer publishes by hand to the
//! fleet's streams and queues (commands, heartbeats, schedule states) is
//! ignored by a running worker and by the operator's tool; what the
//! operator sends is obeyed; nobody can sign as another user.
//!
//! Like the fault suite, the tests start a node of their own (root and the
//! `rabbitmq-server` package); they skip without `AMQP_URL` and fail under
//! `QUEUEY_REQUIRE_BROKER=1` when they cannot run.

#[allow(unused_macros, unused_imports)]
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

mod exchange;
mod forged;
mod roles;
