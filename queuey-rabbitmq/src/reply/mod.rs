//! Job results over RabbitMQ's direct reply-to (`amq.rabbitmq.reply-to`).
//!
//! A caller that waits for a job publishes it on the backend's **request
//! channel** (`request`): a channel of its own, opened on the first wait,
//! in confirm mode (the job is confirmed as any enqueue is) and with a
//! no-ack consumer of `amq.rabbitmq.reply-to`, which the broker requires on
//! the very channel that publishes with that `reply_to`. The broker
//! rewrites each request's `reply_to` into the channel's own address; the
//! job carries it, with its correlation id, in its properties through every
//! hold, retry and deferral (see `properties::job_properties`). Requests go
//! one at a time on that channel, each waiting for its confirm, so a
//! returned request is always the one just published; they never pass
//! through the publishing lanes.
//!
//! A worker answers on the backend's **reply channel** (`respond`): a plain
//! channel publishing to the default exchange with the request's address as
//! routing key, without `mandatory` (the broker returns every reply as
//! `NO_ROUTE`, delivered or not) and without confirms (a reply to a gone
//! requester is dropped all the same): the caller's timeout is the only
//! bound.
//!
//! The waiting callers (`waiting`) are found by correlation id. When the
//! request channel closes (its connection dropped, or the backend closed),
//! every caller waiting on it is told at once that its reply cannot come;
//! the next wait opens a fresh request channel.

mod request;
mod respond;
mod waiting;

pub(crate) use request::Requests;
pub(crate) use respond::Responder;

/// The pseudo-queue a requester consumes its replies from, and the
/// `reply_to` its requests carry until the broker rewrites it.
const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";
