//! The `queuey` binary and the ops library against a real RabbitMQ.
//!
//! Every test skips with a notice unless `AMQP_URL` is set
//! (`QUEUEY_REQUIRE_BROKER=1` turns the skip into a failure). Queue names
//! carry a fresh UUID and are deleted at the end, even when a test fails.

#[path = "ops/support.rs"]
mod support;

#[path = "ops/letters.rs"]
mod letters;

#[path = "ops/dead.rs"]
mod dead;

#[path = "ops/dead_output.rs"]
mod dead_output;

#[path = "ops/dead_reads.rs"]
mod dead_reads;

#[path = "ops/dead_safety.rs"]
mod dead_safety;

#[path = "ops/holds.rs"]
mod holds;

#[path = "ops/shards.rs"]
mod shards;

#[path = "ops/fleet.rs"]
mod fleet;

#[path = "ops/schedules.rs"]
mod schedules;

#[path = "ops/doctor.rs"]
mod doctor;

#[path = "ops/delivery_limit.rs"]
mod delivery_limit;

#[path = "ops/web.rs"]
mod web;

#[path = "ops/web_exposure.rs"]
mod web_exposure;

#[path = "ops/web_scope.rs"]
mod web_scope;

#[path = "ops/web_unheard.rs"]
mod web_unheard;

#[path = "ops/help.rs"]
mod help;

#[path = "ops/private.rs"]
mod private;

#[path = "ops/tls.rs"]
mod tls;

#[path = "ops/secrets.rs"]
mod secrets;
