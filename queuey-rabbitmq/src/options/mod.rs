//! The defaults and limits of [`RabbitMqOptions`]'s
//! settings, and the pace of a requeue.
//!
//! Each builder method of [`RabbitMqOptions`] names
//! the default it starts from; these are the same values, to compare with
//! or build on.

pub(crate) mod builder;
mod defaults;
pub(crate) mod settings;
mod validate;
mod watch;
mod watch_settings;

#[cfg(test)]
mod tests;

pub(crate) use builder::RabbitMqOptions;
pub use defaults::*;
pub use watch_settings::{DEFAULT_HOLD_STALL_AFTER, DEFAULT_HOLD_WATCH_INTERVAL};
