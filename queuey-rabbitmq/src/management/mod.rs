//! A client of RabbitMQ's management HTTP API (the `rabbitmq_management`
//! plugin), with the `management` feature.
//!
//! AMQP cannot list queues, read their policies, or count the jobs a
//! quorum hold queue keeps past their delay; the management API can. The
//! backend asks it how many jobs a hold keeps before it prunes the hold
//! (see [Pruning hold queues](crate#pruning-hold-queues)), and the `queuey`
//! tool reads it through the same client.
//!
//! - [`Endpoint`]: where the API is and who reads it, derived from an AMQP
//!   address (`amqp://HOST` → `http://HOST:15672`, `amqps://HOST` →
//!   `https://HOST:15671`, the AMQP user, password and virtual host) or
//!   given as a URL; a plain `http://` URL to another host beside an
//!   `amqps://` address is refused.
//! - [`Client`]: `GET`, `PUT` and `DELETE` under `/api/`, the virtual
//!   host's queues as [`QueueInfo`], over https with the `rustls` feature
//!   (the platform's roots, and a [`TlsOptions`](crate::TlsOptions)'s CA
//!   and client certificate).
//! - [`Error`]: what went wrong, saying what to check.
//!
//! The password never appears in an error, a log line or `Debug` output:
//! it travels in a header, never in a URL. The user needs a management tag
//! (`monitoring` reads every queue of the virtual host).

mod census;
mod client;
mod endpoint;
mod error;
mod queue;

use std::sync::Arc;

pub use client::{Client, REQUEST_TIMEOUT};
pub use endpoint::{Endpoint, EndpointError, HTTP_PORT, HTTPS_PORT};
pub use error::Error;
pub use queue::QueueInfo;

use crate::RabbitMqOptions;

/// The management API of `amqp` (the first broker address), or at
/// [`RabbitMqOptions::management_url`], as the pruner's hold census;
/// `None` (said at INFO) when no endpoint follows from them.
pub(crate) fn census(
    amqp: Option<&str>,
    options: &RabbitMqOptions,
) -> Option<Arc<dyn crate::census::HoldCensus>> {
    let endpoint = Endpoint::new(amqp?, options.settings().management_url())
        .inspect_err(|why| {
            tracing::info!("quorum holds are kept, not pruned: their jobs cannot be counted: {why}")
        })
        .ok()?;
    let tls = options.settings().tls().clone();
    Some(Arc::new(census::ApiCensus::new(endpoint, tls)))
}
