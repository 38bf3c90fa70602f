//! The defaults and limits of [`RabbitMqOptions`]'s
//! settings, and the pace of a requeue.
//!
//! Each builder method of [`RabbitMqOptions`] names
//! the default it starts from; these are the same values, to compare with
//! or build on.

pub(crate) mod builder;
mod defaults;
#[cfg(feature = "fleet")]
mod fleet;
#[cfg(feature = "management")]
mod management;
#[cfg(feature = "management")]
mod management_settings;
pub(crate) mod settings;
mod validate;

#[cfg(test)]
mod tests;

pub(crate) use builder::RabbitMqOptions;
pub use defaults::*;
