//! Job results over RabbitMQ's direct reply-to (`amq.rabbitmq.reply-to`).
//!
//! A caller that waits for a job publishes it on the backend's **request
//! channel** (`request`), opened on the first wait, in confirm mode, with
//! a no-ack consumer of `amq.rabbitmq.reply-to` (the broker requires it on
//! the channel that publishes with that `reply_to`). The broker rewrites
//! each request's `reply_to` into the channel's own address; the job
//! carries it and its correlation id through every hold, retry and
//! deferral. Requests go one at a time, each waiting for its confirm, so a
//! returned request is always the one just published; they never pass
//! through the publishing lanes.
//!
//! A worker answers on the backend's **reply channel** (`respond`): the
//! default exchange, the request's address as routing key, no `mandatory`
//! (the broker returns every reply as `NO_ROUTE`, delivered or not) and no
//! confirms; the caller's timeout is the only bound.
//!
//! The waiting callers (`waiting`) are found by correlation id. When the
//! request channel closes, every caller waiting on it is told at once that
//! its reply cannot come; the next wait opens a fresh request channel.

mod request;
mod respond;
mod waiting;

pub(crate) use request::Requests;
pub(crate) use respond::Responder;

/// The pseudo-queue a requester consumes its replies from, and the
/// `reply_to` its requests carry until the broker rewrites it.
const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";
