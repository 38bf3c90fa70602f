//! The worker end to end on the in-memory backend, with paused time.

#[path = "../support/mod.rs"]
mod support;

mod classify;
mod consumer_timeout;
mod control;
mod cooldown;
mod deadline;
mod faulty;
mod flows;
mod heartbeats;
mod idempotency;
mod lifecycle;
mod namespaces;
mod progress;
mod reconnect;
mod results;
mod routing;
mod shapes;
mod shards;
mod stacks;
