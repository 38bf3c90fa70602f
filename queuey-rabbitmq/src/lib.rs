//! The RabbitMQ backend of [queuey], on lapin 4.
//!
//! [`RabbitMqBackend`] implements [`queuey_core::backend::Backend`]: it declares
//! queues, publishes jobs with publisher confirms, parks every wait in a
//! per-delay hold queue on the broker, and consumes queues as streams of
//! deliveries that are settled by publishing first and acknowledging last.
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), queuey_core::Error> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use futures::StreamExt;
//! use queuey_core::backend::Backend;
//! use queuey_core::{Disposition, Envelope, QueueConfig};
//! use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};
//!
//! let url = std::env::var("AMQP_URL")
//!     .unwrap_or_else(|_| "amqp://guest:guest@localhost:5672/%2f".to_owned());
//! let backend = Arc::new(
//!     RabbitMqBackend::with_options(
//!         &url,
//!         RabbitMqOptions::default()
//!             .connection_name("emails-worker")
//!             .retry_granularity(Duration::from_secs(5)),
//!     )
//!     .await?,
//! );
//!
//! let emails = QueueConfig::new("app.emails").prefetch(16);
//! backend.declare(std::slice::from_ref(&emails)).await?;
//!
//! let payload = serde_json::value::to_raw_value(&serde_json::json!({"to": "a@example.com"}))
//!     .map_err(|source| queuey_core::Error::Encode { queue: "app.emails".into(), source })?;
//! backend.publish(&Envelope::new("send_email", "app.emails", payload)).await?;
//!
//! let mut deliveries = backend.consume(&emails).await?;
//! while let Some(delivery) = deliveries.next().await {
//!     let delivery = delivery?;
//!     // The backend builds the next attempt's envelope itself.
//!     let disposition = if delivery.envelope().attempt < 3 {
//!         Disposition::Retry { delay: Duration::from_secs(30) }
//!     } else {
//!         Disposition::DeadLetter { reason: "gave up after 3 attempts".into() }
//!     };
//!     delivery.settle(disposition).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Channels
//!
//! One backend is one AMQP connection; share it (behind an `Arc`) between
//! the producer and every worker of a process. On it:
//!
//! - [`publish_concurrency`](RabbitMqOptions::publish_concurrency) confirm
//!   channels, each with up to
//!   [`publish_window`](RabbitMqOptions::publish_window) publishes in
//!   flight, carry every publish; what was in flight on a channel that
//!   fails is published again within
//!   [`publish_timeout`](RabbitMqOptions::publish_timeout).
//! - Up to eight more channels declare hold queues, once holds are used.
//! - Each [`consume`](queuey_core::backend::Backend::consume) opens a
//!   channel with `basic_qos(prefetch, global = false)`, and with the
//!   [poison guard](#poison-guard) on a second one for the queue's suspect
//!   queue, at a prefetch of 1.
//! - Each [`declare`](queuey_core::backend::Backend::declare) runs on a
//!   throwaway channel, so a refused declaration cannot take the others down.
//! - Callers waiting for a result
//!   ([`enqueue_and_wait`](queuey_core::Producer::enqueue_and_wait)) share
//!   one more channel, and are told at once when the connection drops; a
//!   worker answers on one of its own.
//! - The [control and heartbeat streams](#control-commands) are read on a
//!   second connection.
//!
//! # Reconnection
//!
//! A backend outlives its connection. When it dies (the broker closed it,
//! restarted or went silent for two heartbeats), the backend connects
//! again, trying each address given to [`connect`](RabbitMqBackend::connect)
//! in turn with jittered backoff ([`RabbitMqOptions::reconnect_delay`]),
//! and declares every queue it had declared before anything else happens on
//! the new connection. Meanwhile publishes wait up to
//! [`publish_timeout`](RabbitMqOptions::publish_timeout), then fail with
//! [`TimedOut`](queuey_core::BackendErrorKind::TimedOut); consumer streams
//! consume again with the same prefetch once the connection is back (a
//! delivery taken on the old one can no longer be settled: its settle fails
//! with [`NotSettled`](queuey_core::BackendErrorKind::NotSettled) and the
//! broker delivers it again); a queue deleted meanwhile is declared again.
//!
//! The backend gives up only on what cannot heal (credentials or a virtual
//! host the broker refuses, a declared queue it now refuses, a
//! [`reconnect_deadline`](RabbitMqOptions::reconnect_deadline) passed), and
//! every call then fails with that reason. The first connection waits the
//! same way for a broker it cannot reach yet, up to
//! [`connect_wait`](RabbitMqOptions::connect_wait).
//!
//! # Confirms
//!
//! Every publish goes to the default exchange, routing key = queue name,
//! `mandatory`, persistent, and waits for its confirmation. Only a bare ack
//! is success; the failures are [`Error::Backend`](queuey_core::Error::Backend)
//! errors reading ``broker nacked the message published to `q` ``,
//! ``broker returned the message published to `q` as unroutable: 312 NO_ROUTE``
//! (no queue `q` exists: the error says what to do) or
//! ``publisher confirms are not enabled; cannot confirm publish to `q` ``.
//!
//! # Topology and holds
//!
//! See [`topology`] for the queues and their arguments. A delay is rounded
//! up to the retry or deferral granularity and parked in the hold queue of
//! that rounded delay, which dead-letters it back onto `q` after its TTL:
//! `q{deferred_suffix}.quorum.{ttl_ms}` ([`HoldQueues::Quorum`], the
//! default) or `q{deferred_suffix}.{ttl_ms}` ([`HoldQueues::Classic`]). A
//! hold needs the queue declared through the same backend
//! ([`Error::UnknownQueue`](queuey_core::Error::UnknownQueue) otherwise).
//!
//! Every hold carries the job's due time ([`topology::DUE_AT_HEADER`]), and
//! a job that comes back before it is held again for the rest, never run
//! early: a delay longer than one hold queue keeps a job (about 24.8 days)
//! is held in legs, unless [`RabbitMqOptions::refuse_long_delays`] asks for
//! [`Error::DelayTooLong`](queuey_core::Error::DelayTooLong) instead.
//!
//! # Pruning hold queues
//!
//! The broker never deletes a quorum hold queue by itself: every delay
//! bucket ever used stays (about 130 KB of broker memory each, about 150
//! per work queue at most with the default granularity) until pruned, by
//! the backend for the holds it stopped using
//! ([`RabbitMqOptions::prune_holds_after`]), by
//! [`RabbitMqBackend::prune_hold`], or by `queuey holds prune`.
//!
//! **The backend prunes only holds whose jobs it can count**, which AMQP
//! cannot for the jobs a quorum hold keeps past their delay. It asks a
//! [`HoldCensus`]: the one given with [`RabbitMqOptions::hold_census`],
//! else, with the `management` feature, the management API (at
//! `RabbitMqOptions::management_url`, by default derived from the first
//! AMQP address; its user needs a tag such as `monitoring`). **Without
//! either it prunes nothing by itself**, and [`RabbitMqBackend::prune_hold`]
//! keeps every hold ([`HoldPruned::Unverified`]); `queuey holds prune`
//! reads the management API itself.
//!
//! Deleting a quorum queue deletes its jobs, so a prune watches an empty
//! hold for ten seconds and keeps it if any job reaches it, and a publisher
//! whose job could have met a prune publishes it again (a duplicate at
//! worst). Every process publishing into a hold must be of this version or
//! later before any prune runs.
//!
//! # Messages
//!
//! A job's body is its JSON envelope; its properties are persistence, its
//! job id as message id and its priority when not 0. Dead letters keep the
//! body as delivered and carry the headers `x-death-reason`,
//! `x-original-queue`, `x-attempts` and `x-died-at` (and `x-parse-error`
//! for a body that is not an envelope). The repository's
//! `docs/wire-format.md` describes the whole format.
//!
//! # Poison guard
//!
//! A job that kills its worker process (a crash, an out-of-memory kill)
//! would otherwise be delivered again for ever. The guard, on by default
//! ([`RabbitMqOptions::poison_guard`], limit
//! [`DEFAULT_POISON_GUARD_LIMIT`](options::DEFAULT_POISON_GUARD_LIMIT) = 5),
//! counts those returns in [`topology::UNSETTLED_DELIVERIES_HEADER`]:
//!
//! - a first delivery goes to the worker as always, at no extra cost;
//! - a redelivered one is published again (confirmed) with its count one
//!   higher, then acknowledged: at its first return to its work queue (a
//!   lost connection returns many innocent jobs at once), at later ones to
//!   the **suspect queue** `q{suspect_suffix}`, which every consumer of `q`
//!   also consumes with a prefetch of 1, so the job runs alone there;
//! - at the limit, the job goes to `q.dead` instead, with the count, the
//!   reason ``delivered N times without being settled: the worker died or
//!   lost its connection while handling it`` and a WARN log line.
//!
//! The worker sees a job that came back as
//! [`redelivered`](queuey_core::backend::Delivery::redelivered), whichever
//! queue it came from. A settled job starts from 0 again. A crash between
//! the publish and the acknowledgement leaves the job twice (at-least-once).
//!
//! Hand-backs do not count: a delivery settled with
//! [`Disposition::Requeue`](queuey_core::Disposition::Requeue) is published
//! again as received to the queue it came from, at the queue's top
//! priority, then acknowledged (if the copy cannot be published, it is
//! handed back with `basic.nack`, which counts). Dropping a consumer stream
//! hands back every delivery it had received but not handed out, which
//! [`close`](RabbitMqBackend::close) waits for (within the call timeout).
//!
//! Counted in `queuey_rabbitmq_first_returns_total` (logged at debug
//! level only), `queuey_rabbitmq_suspects_total` and
//! `queuey_rabbitmq_poison_dead_letters_total` (label `queue`). The
//! in-memory backend of `queuey-core` has no guard.
//!
//! # Control commands
//!
//! Control commands, heartbeats and the leadership of periodic schedules
//! are the backend's fleet plane, built with the `fleet` feature (on by
//! default); without it the backend implements neither `ControlChannel`,
//! `Heartbeats` nor `Leadership`.
//!
//! [`send_control`](queuey_core::backend::ControlChannel::send_control) and
//! [`follow_control`](queuey_core::backend::ControlChannel::follow_control)
//! carry a fleet's commands (cancel a job, pause or resume a queue; see
//! [`queuey_core::control`]) through one RabbitMQ stream per virtual host,
//! `queuey.control` (another with `RabbitMqOptions::control_stream`), so a
//! process started later reads them too. Streams need RabbitMQ 3.9 or later.
//!
//! - The stream keeps 30 days of commands and at most 100 MB. A queue of
//!   that name with other arguments is refused with an error saying what
//!   to do; a stream an earlier version created without the bound in bytes
//!   is used with a warning (`queuey topology apply` gives it a policy).
//! - A command is published like a job, signed with the backend's RabbitMQ
//!   user (see [Who may send what](#who-may-send-what)); a record that
//!   names no sender goes out under the backend's user, connection name and
//!   host name.
//! - Each `follow_control` returns once the backend's
//!   [`ControlView`](queuey_core::control::ControlView) holds every command
//!   sent before the call; past the call timeout it fails with
//!   [`TimedOut`](queuey_core::BackendErrorKind::TimedOut). A backend
//!   starts from the last snapshot within the stream's last 40,000 records,
//!   else from the stream's start; a fleet writes about one snapshot per
//!   `control_snapshot_interval` (a state over 8 MiB is not snapshotted).
//! - A pause lasts until it is resumed: a follower publishes it again once
//!   it is a week old, so a fleet that no process follows for about three
//!   weeks comes back without its pauses.
//! - The streams are read on a second connection, opened when first needed
//!   and named after the backend's with ` (fleet)` added: RabbitMQ closes a
//!   stream reader's whole connection on some errors.
//!
//! Metrics: `queuey_rabbitmq_control_records_total`,
//! `queuey_rabbitmq_control_follower_restarts_total`,
//! `queuey_rabbitmq_control_pause_renewals_total`,
//! `queuey_rabbitmq_control_snapshots_total`, and the gauges
//! `queuey_rabbitmq_control_cancellations` and
//! `queuey_rabbitmq_control_paused_queues`.
//!
//! ## Heartbeats
//!
//! [`heartbeat`](queuey_core::backend::Heartbeats::heartbeat) publishes a
//! worker's heartbeat to the control stream's name with `.workers` added
//! (kept for an hour). [`workers`](queuey_core::backend::Heartbeats::workers)
//! reads its last minute and lists the workers whose latest heartbeat is
//! not their last and is within three of their intervals (plus two seconds
//! of slack): a worker whose interval is over 20 seconds does not appear.
//!
//! ## Who may send what
//!
//! Everything above travels through the default exchange, where any user
//! allowed to publish one job may publish anything. So commands,
//! heartbeats, schedule states and results count only when **sent by a
//! user the reader trusts**, as RabbitMQ vouches in the `user_id` property
//! (which only a user with the `impersonator` tag can forge).
//!
//! - Everything this backend sends to the fleet carries its user as
//!   `user_id` (the URI's user, or
//!   [`authenticated_user`](RabbitMqOptions::authenticated_user)); every
//!   address of one backend must log in as the same user.
//! - Commands are obeyed from the backend's own user and the users of
//!   `control_senders`; heartbeats, schedule states and results are
//!   accepted from the backend's own user and the users of
//!   [`worker_senders`](RabbitMqOptions::worker_senders). A message with no
//!   `user_id` counts as a stranger's.
//! - Whoever sent it, a command is checked
//!   ([`ControlRecord::check`](queuey_core::control::ControlRecord::check));
//!   a heartbeat over 256 KiB, a schedule state from the future and a
//!   result over [`max_message_size`](RabbitMqOptions::max_message_size)
//!   are skipped unread; a listing keeps at most 10,000 workers.
//! - A worker answers a job only at a direct reply-to address
//!   (`amq.rabbitmq.reply-to.…`), never at a queue a job names.
//! - Every refusal is counted in `queuey_rabbitmq_fleet_refused_total`
//!   (labels `kind` and `reason`) and logged at WARN, once a minute per
//!   kind at most.
//!
//! With no senders named, a backend trusts its own user only: a fleet
//! whose programs share one user works as it is. SECURITY.md gives the
//! permissions of each role.
//!
//! ### Producers that cannot write to the fleet at all
//!
//! Ignored is not kept out: a producer allowed to publish on the default
//! exchange can still fill the control stream with records every follower
//! must read past. With [`job_exchange`](RabbitMqOptions::job_exchange),
//! given alike to every backend of the fleet, jobs go through an exchange
//! of the application's, and a producer needs no right on the default
//! exchange:
//!
//! - a job for later goes straight to its work queue, stamped with its due
//!   time (`queuey-due-at`), and the first worker that receives it holds
//!   it until then (hold queues are the workers' alone);
//! - retries, deferrals by a handler, dead letters, suspect copies and
//!   hand-backs are the worker's, through the default exchange;
//! - a quorum work queue dead-letters through the default exchange too, so
//!   producers of quorum queues use
//!   [`Producer::new_undeclared`](queuey_core::Producer::new_undeclared)
//!   and let the workers declare.
//!
//! To move a running fleet, give the workers the exchange (jobs from
//! producers still on the default exchange keep arriving), then the
//! producers, then take the producers' right on `amq.default` away. A job
//! published through an exchange that no queue of that name is bound to
//! fails with [`Unroutable`](queuey_core::BackendErrorKind::Unroutable).
//!
//! # Logging and secrets
//!
//! The backend logs through `tracing` and never logs a password: addresses
//! appear as `amqp://user:***@host:port/vhost`, and errors are scrubbed.
//! But lapin, at **trace** level, logs every frame it sends, the login
//! frame included, whose response field `\0user\0password` is printed as
//! a byte list anyone can decode. So never run with lapin at trace level
//! where logs are kept or shared: add [`SECRET_SAFE_LOG_DIRECTIVE`] to your
//! filter, which holds lapin's own targets at debug whatever the rest of the
//! filter says (`RUST_LOG=trace,lapin=debug`, or in code):
//!
//! ```
//! use tracing_subscriber::EnvFilter;
//!
//! let filter = EnvFilter::new(format!(
//!     "trace,{}",
//!     queuey_rabbitmq::SECRET_SAFE_LOG_DIRECTIVE
//! ));
//! # drop(filter);
//! ```
//!
//! # TLS
//!
//! An `amqps://` address is encrypted with the default features: the
//! broker's certificate is verified against the platform's roots and the
//! URI's host name (`amqps://` without a port goes to 5671). [`TlsOptions`]
//! adds a private CA, a client certificate (with no password in the URI,
//! RabbitMQ's `EXTERNAL` mechanism), or another name to verify. Nothing
//! ever falls back to plaintext: a certificate that does not verify, a port
//! that does not speak TLS or a missing client certificate fail the
//! connection before any AMQP byte is sent, with an error that says what to
//! fix. The certificate files are read again for every new connection, so
//! renewed certificates are picked up.
//!
//! # Feature flags
//!
//! | feature | effect |
//! |---|---|
//! | `rustls` (default) | `amqps://` through rustls with the ring provider, trusting the platform's roots |
//! | `rustls-aws-lc` | the same with the aws-lc-rs provider |
//! | `native-tls` | `amqps://` through the platform's TLS library (OpenSSL on Linux) |
//! | `fleet` (default) | the [fleet plane](#control-commands): control commands, the workers' heartbeats and leadership of periodic schedules, with their options and broker names |
//! | `management` | the `management` module, a client of the management HTTP API (reqwest; over https with `rustls`), and through it the pruning of idle quorum holds |
//!
//! With `default-features = false` and no TLS feature, plain `amqp://` works
//! and `amqps://` is refused with an error naming the feature to enable.
//!
//! [queuey]: https://docs.rs/queuey

#![cfg_attr(docsrs, feature(doc_cfg))]

mod addresses;
mod backend;
mod bound;
mod census;
mod channel;
mod connection_properties;
mod consumer;
mod declare;
mod error;
#[cfg(feature = "fleet")]
mod fleet;
mod link;
#[cfg(feature = "management")]
#[cfg_attr(docsrs, doc(cfg(feature = "management")))]
pub mod management;
pub mod options;
mod outbox;
mod properties;
mod rehold;
mod reply;
mod tls;
pub mod topology;
mod trust;

pub use addresses::Addresses;
pub use backend::RabbitMqBackend;
pub use census::HoldCensus;
pub use connection_properties::ConnectionProperties;
pub use options::builder::RabbitMqOptions;
pub use options::settings::RabbitMqSettings;
pub use outbox::HoldPruned;
pub use tls::TlsOptions;
/// A `tracing_subscriber::EnvFilter` directive that keeps the AMQP
/// client's frame-level trace logs, which print the login frame and so the
/// password, out of a subscriber: `lapin=debug`. Append it to any filter
/// (`RUST_LOG=trace,lapin=debug`). See [Logging and
/// secrets](crate#logging-and-secrets).
pub const SECRET_SAFE_LOG_DIRECTIVE: &str = "lapin=debug";

pub use topology::holds::HoldQueues;

/// Support for the `queuey` operator tool of the same release. Not part of
/// the public API: it names lapin types and may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::declare::field_table;
    pub use crate::link::dial::connect_plain_lapin;
}
