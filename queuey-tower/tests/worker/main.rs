//! The worker end to end on the in-memory backend, with paused time.

#[path = "../support/mod.rs"]
mod support;

mod cooldown;
mod deadline;
mod faulty;
mod flows;
mod lifecycle;
mod namespaces;
mod reconnect;
mod routing;
mod stacks;
