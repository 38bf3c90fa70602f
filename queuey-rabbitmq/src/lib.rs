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
//! - [`publish_concurrency`](RabbitMqOptions::publish_concurrency) channels
//!   in confirm mode (4 by default) carry every publish: enqueues, retries,
//!   deferrals and dead letters. Each is owned by one task that keeps up to
//!   [`publish_window`](RabbitMqOptions::publish_window) publishes in flight
//!   (128 by default) and matches every confirmation and every returned
//!   message to its own publish by message id, so an unroutable message is
//!   never reported as stored. Nothing is declared on them. A channel that
//!   fails is dropped and a fresh one opened; the publishes in flight on it
//!   are published again within
//!   [`publish_timeout`](RabbitMqOptions::publish_timeout).
//! - Up to eight more channels (opened only once holds are used) declare
//!   hold queues, each carrying one declaration at a time. A refused
//!   declaration closes only its channel, which is reopened on next use.
//! - Each [`consume`](queuey_core::backend::Backend::consume) opens a fresh channel
//!   and sets `basic_qos(prefetch, global = false)` before consuming; with
//!   the [poison guard](#poison-guard) on, a second fresh channel consumes
//!   the queue's suspect queue with a prefetch of 1.
//! - Each [`declare`](queuey_core::backend::Backend::declare) runs on a throwaway
//!   channel, so a refused declaration cannot take the others down.
//! - On the first [`enqueue_and_wait`](queuey_core::Producer::enqueue_and_wait),
//!   one more channel carries the jobs callers wait for: in confirm mode,
//!   consuming `amq.rabbitmq.reply-to` without acknowledgements (RabbitMQ
//!   requires the reply consumer on the channel that publishes the
//!   requests), one request at a time. A worker answers on a plain channel
//!   of its own, opened on its first answer. When the connection drops,
//!   every caller still waiting is told at once that its answer cannot
//!   come, and the next wait opens a fresh channel.
//! - On the first [`follow_control`](queuey_core::backend::ControlChannel::follow_control),
//!   one more channel follows the [control stream](#control-commands),
//!   with a prefetch of 1000; it only ever acknowledges.
//!
//! # Reconnection
//!
//! A backend outlives its connection. When the connection dies (the broker
//! closed it, restarted or went silent for two heartbeats), the backend
//! connects again — trying each address given to
//! [`connect`](RabbitMqBackend::connect) in turn, backing off with jitter
//! ([`RabbitMqOptions::reconnect_delay`]) — and declares every queue it had
//! declared before anything else happens on the new connection. Meanwhile:
//!
//! - publishes wait for the new connection up to
//!   [`publish_timeout`](RabbitMqOptions::publish_timeout), then fail with
//!   [`TimedOut`](queuey_core::BackendErrorKind::TimedOut);
//! - consumer streams carry on, consuming again with the same prefetch on the
//!   new connection; a delivery taken on the old one can no longer be
//!   settled (its settle fails with
//!   [`NotSettled`](queuey_core::BackendErrorKind::NotSettled)) and the
//!   broker delivers it again;
//! - a queue deleted while the backend was away is declared again.
//!
//! The backend gives up only on what cannot heal — credentials or a virtual
//! host the broker refuses, a declared queue it now refuses, or a
//! [`reconnect_deadline`](RabbitMqOptions::reconnect_deadline) that passed —
//! after which every call fails with that reason.
//!
//! The first connection waits the same way for a broker it cannot reach
//! yet (down, restarting, still booting), up to
//! [`connect_wait`](RabbitMqOptions::connect_wait), 2 minutes by default;
//! [`connect`](RabbitMqBackend::connect) returns once connected. Refused
//! credentials or virtual host, a TLS handshake that fails and an invalid
//! address fail at once.
//!
//! # Confirms
//!
//! Every publish goes to the default exchange, routing key = queue name,
//! `mandatory`, persistent, and waits for its confirmation. Only a bare ack
//! is success; the failures are [`Error::Backend`](queuey_core::Error::Backend)
//! errors reading
//! ``broker nacked the message published to `q` ``,
//! ``broker returned the message published to `q` as unroutable: 312 NO_ROUTE``
//! or
//! ``publisher confirms are not enabled; cannot confirm publish to `q` ``.
//!
//! `312 NO_ROUTE` means no queue `q` exists, so a publish to a work queue
//! comes back with what to do appended: the queue was never declared
//! (`Producer::new`, `WorkerBuilder::build` and
//! [`Backend::declare`](queuey_core::backend::Backend::declare) declare it,
//! `Producer::new_undeclared` does not), or, when this backend declared
//! it, it has been deleted since.
//!
//! # Topology and holds
//!
//! See [`topology`] for the queues and their arguments. A delay is rounded
//! up to the retry or deferral granularity and parked in the hold queue of
//! that rounded delay, whose only job is to dead-letter it back onto `q`
//! after its TTL: `q{deferred_suffix}.quorum.{ttl_ms}` with the default
//! [`HoldQueues::Quorum`], `q{deferred_suffix}.{ttl_ms}` with
//! [`HoldQueues::Classic`]. A hold needs the queue to have been declared
//! through the same backend in the same process
//! ([`Error::UnknownQueue`](queuey_core::Error::UnknownQueue) otherwise).
//!
//! Every hold carries the job's due time
//! ([`topology::DUE_AT_HEADER`]), and a job that comes back before it is
//! held again for the rest, never run early. So a delay longer than one hold
//! queue keeps a job ([`MAX_DEFERRAL_MS`](queuey_core::MAX_DEFERRAL_MS), about 24.8 days) is
//! held in legs until it is due, unless
//! [`RabbitMqOptions::refuse_long_delays`] asks for
//! [`Error::DelayTooLong`](queuey_core::Error::DelayTooLong) instead.
//!
//! # Pruning hold queues
//!
//! The broker never deletes a quorum hold queue by itself, so every delay
//! bucket ever used stays (about 130 KB of broker memory each) until it is
//! pruned: by the backend itself for the holds it stopped using (an hour
//! by default: [`RabbitMqOptions::prune_holds_after`]), by
//! [`RabbitMqBackend::prune_hold`], or by the `queuey holds prune` tool.
//! Until then their number stays bounded by the granularity: about 150
//! per work queue at most with the default one
//! ([`RabbitMqOptions::hold_queues`]).
//!
//! **The backend prunes only holds whose jobs it can count**, and AMQP
//! does not count the jobs a quorum hold keeps past their delay while they
//! wait to be moved back. It asks a [`HoldCensus`] for them: the one given
//! with [`RabbitMqOptions::hold_census`], else, with the `management`
//! feature, the broker's management API (the `management` module; at
//! `RabbitMqOptions::management_url`, by default derived from the first
//! AMQP address). **In the default build, without the feature and without
//! a census, the backend prunes nothing by itself** and
//! [`RabbitMqBackend::prune_hold`] keeps every hold
//! ([`HoldPruned::Unverified`]). To prune, do one of: enable the
//! `management` feature (the API's user needs a management tag such as
//! `monitoring`), give a census, or run `queuey holds prune` now and then
//! (it reads the management API itself).
//!
//! Deleting a quorum queue deletes its jobs, RabbitMQ refuses a deletion
//! conditional on the queue being empty, and it even confirms a publish
//! that was on its way into a queue being deleted. So a prune never
//! deletes a hold on a count alone; publishers and pruners keep a
//! handshake:
//!
//! - the pruner keeps a hold that has jobs waiting, a consumer, or jobs
//!   past their delay waiting to be moved back (counted by the census; a
//!   hold that cannot be counted is kept);
//! - it consumes an empty hold and watches it for ten seconds: any job
//!   that reaches it keeps the hold (the job goes back, untouched);
//! - a publisher relies only on a declaration of the hold that counted no
//!   consumer (while a prune watches one, it holds the job in the hold one
//!   millisecond longer instead) and trusts a job as held only when its
//!   confirmation came within five seconds of that declaration, else it
//!   publishes the job again;
//! - after the watch the pruner asks the census again and deletes the hold,
//!   then moves anything that still reached it to the work queue, where the
//!   consumer holds it again until its due time.
//!
//! A trusted job reaches the pruner's consumer at least five seconds
//! before the watch ends, so it can never be deleted; a job whose
//! confirmation came later is published again by its publisher. A publish
//! that meets a hold already deleted comes back `NO_ROUTE` and declares it
//! again. Every process publishing into a hold must be of this version or
//! later before any prune runs. Measured on one RabbitMQ 3.10.8 node: 60
//! jobs held in bursts while another backend pruned the hold over and over
//! (three to five deletions a run, publishes stepping over watched holds
//! and meeting deleted ones), none lost.
//!
//! # Messages
//!
//! A job's body is its JSON envelope; its properties are persistence
//! (delivery mode 2), its job id as message id and its priority when it is
//! not 0, and nothing else. Dead letters keep the body as delivered and
//! carry the headers `x-death-reason`, `x-original-queue` and `x-attempts`.
//! The repository's `docs/wire-format.md` describes the whole format, for
//! producers and dead-letter readers in other languages.
//!
//! # Poison guard
//!
//! A job that kills its worker process (a crash, an out-of-memory kill)
//! would otherwise be delivered again and again for ever: the broker only
//! sees a delivery come back unacknowledged. The guard, on by default
//! ([`RabbitMqOptions::poison_guard`], limit
//! [`DEFAULT_POISON_GUARD_LIMIT`](options::DEFAULT_POISON_GUARD_LIMIT) = 5), counts those returns in queuey's
//! own header, [`topology::UNSETTLED_DELIVERIES_HEADER`]:
//!
//! - a first delivery (`redelivered` false) goes to the worker as always,
//!   at no extra cost;
//! - a redelivered one does not: its count goes up by one and the job is
//!   published (confirmed, `mandatory`) with the new count, then the
//!   delivery is acknowledged. At its first return (count 1) the job goes
//!   back to its work queue, behind the jobs already waiting; at later
//!   ones to the work queue's **suspect queue** `q{suspect_suffix}`
//!   (`q.suspect`);
//! - once the count reaches the limit, the job goes to `q.dead` instead,
//!   with the count and the reason ``delivered N times without being
//!   settled: the worker died or lost its connection while handling it``,
//!   and a WARN log line.
//!
//! A first return is nearly always innocent: a lost connection returns
//! every job the worker held, and a broker restart returns a classic
//! queue's whole backlog marked redelivered, jobs no worker ever saw
//! included. Sent back to the work queue, they run at full speed again.
//! Every consumer of `q` also consumes `q.suspect`, on a channel of its own
//! with a prefetch of 1. A job that came back twice thus runs alone: the
//! jobs that were prefetched beside a poison job come back with it, go
//! back to the work queue once and then run normally, while the poison job
//! climbs to the limit by itself (it runs twice beside others, then alone).
//! The worker sees a job that came back as
//! [`redelivered`](queuey_core::backend::Delivery::redelivered), whichever
//! queue it came from. A job that is settled (acknowledged, retried,
//! deferred, dead-lettered) starts from 0 again. A crash between the
//! publish and the acknowledgement leaves the job twice (at-least-once,
//! never a loss).
//!
//! Hand-backs do not count. A delivery settled with
//! [`Disposition::Requeue`](queuey_core::Disposition::Requeue) (a worker
//! pausing a queue or shutting down returns the jobs it took but did not
//! start) is published again to the queue it came from as it was received
//! (its body, and queuey's own headers, so its count is unchanged) at the
//! queue's top priority, so it is served ahead of the backlog as before;
//! once the broker confirms the copy, the delivery is acknowledged. A
//! suspect goes back to the suspect queue, where it still runs alone; a
//! quorum queue has no priorities, so a job handed back there joins the
//! back of the queue. If the copy cannot be published, the delivery is
//! handed back with `basic.nack` instead, which counts. Dropping a consumer
//! stream does the same for every delivery the stream had received but not
//! handed out: the consumer is cancelled, each delivery is handed back,
//! then the channel closes (once the deliveries handed out are settled);
//! [`close`](RabbitMqBackend::close) waits for that (within the call
//! timeout). Only where no runtime is left to do it (the process is
//! exiting) does the broker requeue them, marked redelivered.
//!
//! The suspect queue has the work queue's type: for a quorum `q` it is a
//! quorum queue with the same delivery limit, dead-lettering into `q.dead`
//! at least once.
//!
//! Counted in `queuey_rabbitmq_first_returns_total` (logged at debug
//! level only, one line per job would flood the log after a restart),
//! `queuey_rabbitmq_suspects_total` and
//! `queuey_rabbitmq_poison_dead_letters_total` (label `queue`). The
//! in-memory backend of `queuey-core` has no processes to crash and no
//! guard.
//!
//! # Control commands
//!
//! Control commands, heartbeats and the leadership of periodic schedules
//! are the backend's fleet plane, built with the `fleet` feature (on by
//! default). Without it the backend carries jobs and their results only:
//! its [`capabilities`](queuey_core::backend::Backend::capabilities) list
//! replies alone, and it implements neither `ControlChannel`, `Heartbeats`
//! nor `Leadership`.
//!
//! [`send_control`](queuey_core::backend::ControlChannel::send_control) and
//! [`follow_control`](queuey_core::backend::ControlChannel::follow_control)
//! carry a fleet's commands (cancel a job, pause or resume a queue; see
//! [`queuey_core::control`]) through one RabbitMQ stream per virtual host,
//! [`topology::CONTROL_STREAM`] (`queuey.control`; another with
//! [`RabbitMqOptions::control_stream`]). The stream is both the log that a
//! process started later reads from its start and the channel that brings
//! a command to every running process within milliseconds. Streams need
//! RabbitMQ 3.9 or later.
//!
//! - It is declared durable with `x-queue-type = stream`, `x-max-age =
//!   30D` (as long as cancellations are remembered), `x-max-length-bytes =
//!   100000000` ([`topology::CONTROL_MAX_BYTES`]: what a flood of records
//!   can cost the broker's disk) and 1 MB segments, so that the broker
//!   drops old commands soon after they are forgotten. Every process
//!   declares it with exactly these arguments; a queue of that name with
//!   others is refused with an error saying what to do. A stream an
//!   earlier version created without the bound in bytes is used as it is,
//!   with a warning: `queuey topology apply` gives it a `max-length-bytes`
//!   policy, and `queuey doctor` lists every such stream.
//! - A command is published like a job (confirmed, `mandatory`,
//!   persistent), signed with the backend's RabbitMQ user (see
//!   [Who may send what](#who-may-send-what)); a record that names no
//!   sender goes out under the backend's user, connection name and host
//!   name.
//! - The first `follow_control` starts the backend's follower: a task that
//!   applies each command in stream order to the backend's
//!   [`ControlView`](queuey_core::control::ControlView), and after a lost
//!   connection reads on from the offset after the last record it read, so
//!   nothing is applied twice or missed. It does not read the whole
//!   stream: it starts 40,000 records before the stream's end (or, when it
//!   cannot read where the end is, three snapshot intervals back) and goes
//!   on from the first snapshot of the state it finds there (a message of
//!   type [`topology::SNAPSHOT_TYPE`] listing the paused queues and the
//!   live cancellations, with the offset it was taken at). Only without a
//!   snapshot that recent (a young stream, a fleet that was down for
//!   longer) does it read the stream from its first record.
//!   Once it holds the whole state, each follower writes a snapshot when
//!   none was read for an interval, at a moment of its own within the
//!   interval, so a fleet writes about one per interval
//!   ([`RabbitMqOptions::control_snapshot_interval`], ten minutes by
//!   default), and one more after every ten to twenty thousand records it
//!   refuses, so that a flood never leaves the stream's end without one. Snapshots are
//!   signed and accepted from the same users as renewed pauses (this
//!   backend's own, [`RabbitMqOptions::control_senders`] and
//!   [`RabbitMqOptions::worker_senders`]); a state too large for one
//!   (8 MiB, tens of thousands of cancellations by id) is not snapshotted,
//!   and a warning says so. Each call returns once the
//!   follower has read back a marker the call published, so the view holds
//!   every command sent before the call; past the call timeout it fails
//!   with [`TimedOut`](queuey_core::BackendErrorKind::TimedOut).
//! - The follower forgets cancellations older than 30 days. A pause lasts
//!   until it is resumed, but the stream drops what is older than 30 days,
//!   so a follower publishes a pause again once it is a week old. The
//!   renewal carries the stream offset its follower had read up to
//!   ([`topology::RENEWS_AFTER_HEADER`]), and every follower ignores it if
//!   it read a resume of the same queue after that offset: a resume sent
//!   meanwhile is never undone. What remains: a pause outlives the stream's
//!   30 days only if some process follows the commands at least once in
//!   about three weeks; a whole fleet shut down for longer comes back
//!   without it.
//! - The follower's channel only ever acknowledges: RabbitMQ closes the
//!   whole connection when a stream's consumer is sent a `basic.get`, a
//!   nack, a reject or an automatic acknowledgement, and lapin sends none
//!   of them by itself. RabbitMQ 4.3 also closes it when a consumer asks
//!   for a stream whose leader is still starting after a restart. So the
//!   follower and the heartbeat reads consume on a second connection of
//!   the backend's, opened the first time one is needed and named after
//!   the backend's connection with ` (fleet)` added: whatever happens to
//!   it, the job path's connection carries on. Commands, heartbeats and
//!   markers are still published on the job path's connection.
//!
//! Measured on one RabbitMQ 3.10 node (debug build): a command reaches
//! another backend's view 1 to 2 ms after it is sent at the median, under
//! 10 ms at the 99th percentile; a new backend that reads the stream from
//! its start catches up with 10,000 cancellations in 1.3 to 1.7 s, and
//! they cost it about 2 MB. What a snapshot saves is in `SECURITY.md`.
//!
//! Metrics: `queuey_rabbitmq_control_records_total` (commands applied),
//! `queuey_rabbitmq_control_follower_restarts_total`,
//! `queuey_rabbitmq_control_pause_renewals_total`,
//! `queuey_rabbitmq_control_snapshots_total` (snapshots this process
//! wrote), and the gauges
//! `queuey_rabbitmq_control_cancellations` and
//! `queuey_rabbitmq_control_paused_queues`.
//!
//! ## Heartbeats
//!
//! [`heartbeat`](queuey_core::backend::Heartbeats::heartbeat) publishes a
//! worker's heartbeat (confirmed) to the heartbeat stream beside the
//! control stream, its name with `.workers` added
//! ([`topology::heartbeat_stream_name`]; `x-max-age = 1h`, 1 MB segments).
//! [`workers`](queuey_core::backend::Heartbeats::workers) reads the stream's
//! last minute (an interval the broker resolves on its own clock) on a
//! channel of its own, up to a marker it publishes, keeps each worker's
//! latest heartbeat and lists the workers whose latest one is not their
//! last and is within three of their intervals of this host's clock, with
//! two seconds of slack for clocks that disagree. A worker whose interval
//! is longer than 20 seconds does not appear.
//!
//! ## Who may send what
//!
//! Everything above travels through the default exchange, where any user
//! allowed to publish one job may publish anything: RabbitMQ checks the
//! right to write on the exchange, not on the queue. So a follower obeys a
//! command, a listing counts a heartbeat, a leader believes a schedule's
//! state and a waiting caller takes a result only when it was **sent by a
//! user it trusts**, and RabbitMQ says who sent it: it refuses a message
//! whose `user_id` property is not the user of its connection (unless that
//! user has the `impersonator` tag), so `user_id` cannot be forged.
//!
//! - Everything this backend sends to the fleet carries its user as
//!   `user_id`: the URI's user, or
//!   [`authenticated_user`](RabbitMqOptions::authenticated_user) for a
//!   client certificate. Every address of one backend must log in as the
//!   same user.
//! - Commands are obeyed from the backend's own user and from the users of
//!   [`control_senders`](RabbitMqOptions::control_senders); heartbeats,
//!   schedule states and results are accepted from the backend's own user
//!   and from the users of
//!   [`worker_senders`](RabbitMqOptions::worker_senders). A message with no
//!   `user_id` counts as a stranger's.
//! - Whoever sent it, a command is checked before it is applied
//!   ([`ControlRecord::check`](queuey_core::control::ControlRecord::check)):
//!   at most 64 KiB, not stamped more than five minutes ahead of the
//!   reader's clock, and a cancel filter needs a condition and a time
//!   bound. A heartbeat over 256 KiB, a schedule state whose last tick is
//!   in the future and a result over
//!   [`max_message_size`](RabbitMqOptions::max_message_size) are skipped
//!   unread; a listing keeps at most 10,000 workers.
//! - A worker answers a job only at a direct reply-to address
//!   (`amq.rabbitmq.reply-to.…`), never at a queue a job names.
//! - Every refusal is counted in `queuey_rabbitmq_fleet_refused_total`
//!   (labels `kind` and `reason`) and logged at WARN, once a minute per
//!   kind at most.
//!
//! With no senders named, a backend trusts its own user only, so a fleet
//! whose programs all log in as one user works as it is (and is not
//! protected from its own producers). SECURITY.md gives the permissions of
//! each role when they log in as users of their own.
//!
//! ### Producers that cannot write to the fleet at all
//!
//! Ignored is not the same as kept out: a producer allowed to publish on
//! the default exchange can still fill the control stream with records
//! every follower must read past before it starts. With
//! [`job_exchange`](RabbitMqOptions::job_exchange), jobs go through an
//! exchange of the application's, bound to each work queue under the
//! queue's name, and a producer needs no right on the default exchange:
//! RabbitMQ refuses every message it sends anywhere else, so it cannot put
//! a single record in the control stream, the heartbeat stream or a
//! schedule queue.
//!
//! - Every backend of the fleet gets the same `job_exchange`. Declaring
//!   queues declares the exchange (durable, `direct`) and binds each work
//!   queue and shard; `enqueue`, `enqueue_in`, `defer` and
//!   `enqueue_and_wait` publish through it.
//! - A job for later goes straight to its work queue, stamped with its due
//!   time (`queuey-due-at`), and the first worker that receives it holds
//!   it until then: hold queues dead-letter through the default exchange,
//!   so only workers declare and publish to them. It still never runs
//!   early; what it costs is one extra trip through the work queue.
//! - Retries, deferrals by a handler, dead letters, suspect copies and
//!   hand-backs are the worker's, through the default exchange, as before.
//! - A quorum work queue dead-letters through the default exchange too, so
//!   only a user allowed to publish there may declare one: producers of
//!   quorum queues use
//!   [`Producer::new_undeclared`](queuey_core::Producer::new_undeclared)
//!   and let the workers declare.
//!
//! To move a running fleet: give the workers the exchange (they declare it
//! and bind their queues as they start, and jobs from producers still on
//! the default exchange keep arriving), then the producers, then take the
//! producers' right on `amq.default` away. A job published through an
//! exchange that no queue of that name is bound to fails with
//! [`Unroutable`](queuey_core::BackendErrorKind::Unroutable), naming the
//! exchange.
//!
//! # Logging and secrets
//!
//! The backend logs through `tracing` and never logs a password: addresses
//! appear as `amqp://user:***@host:port/vhost`, and errors are scrubbed.
//! The AMQP client underneath (lapin) is another matter: at **trace** level
//! it logs every frame it sends, the login frame included, and that frame's
//! response field is `\0user\0password`, printed as a byte list
//! (`LongString([0, 103, 117, …])`). A search for the password's text does
//! not find it, but anyone reading the log can decode it.
//!
//! So never run with lapin at trace level where logs are kept or shared.
//! Add [`SECRET_SAFE_LOG_DIRECTIVE`] to your filter: it holds lapin's own
//! targets at debug whatever the rest of the filter says, e.g.
//! `RUST_LOG=trace,lapin=debug`, or in code:
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
//! The project's leak test checks both halves: with everything at trace,
//! the password's bytes show up in lapin's lines only (never in queuey's),
//! and with the directive they show up nowhere.
//!
//! # TLS
//!
//! An `amqps://` address is encrypted with the default features: the
//! broker's certificate is verified against the platform's roots and the
//! URI's host name (RabbitMQ's TLS port is 5671; `amqps://` without a port
//! goes there). [`TlsOptions`] adds a private CA, a client certificate
//! (mutual TLS; with no password in the URI the connection authenticates
//! by certificate alone, RabbitMQ's `EXTERNAL` mechanism), or another
//! name to verify:
//!
//! ```no_run
//! # async fn run() -> Result<(), queuey_core::Error> {
//! use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions, TlsOptions};
//!
//! let backend = RabbitMqBackend::with_options(
//!     "amqps://app:secret@rabbit.internal/%2f",
//!     RabbitMqOptions::default().tls(TlsOptions::default().ca_file("/etc/ssl/private-ca.pem")),
//! )
//! .await?;
//! # Ok(()) }
//! ```
//!
//! Nothing ever falls back to plaintext. A certificate that does not
//! verify, a port that does not speak TLS or a missing client certificate
//! fail the connection before any AMQP byte is sent, with an error that
//! says what to fix; a build without a TLS backend refuses `amqps://`
//! addresses at once. Reconnection and several addresses work the same
//! over TLS, and the certificate files are read again for every new
//! connection, so renewed certificates are picked up.
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
//! # How the crate is organised
//!
//! For contributors. Each module has one role, and modules depend on each
//! other in one direction only, roughly from the top of this list down:
//!
//! | module | role |
//! |---|---|
//! | `backend` | [`RabbitMqBackend`]: puts the parts below together and implements [`Backend`](queuey_core::backend::Backend) |
//! | `consumer` | a consumer per queue across connections; each delivery decoded, routed (worker, hold again, poison guard, dead-letter queue) and settled |
//! | `fleet` | the fleet plane, with the `fleet` feature: control commands (`control`, sent to the control stream and followed there by one task per backend), the workers' heartbeats (`heartbeats`), leadership of periodic schedules (`leader`, one quorum queue with a single active consumer per schedule), and the connection their stream reads use (`link`) |
//! | `reply` | job results: requests sent with direct reply-to, and the replies to waiting callers |
//! | `management` | the management HTTP API: where it is, a client, the queues it lists, and the hold census over it |
//! | `outbox` | everything published, with its retries: the confirm-mode lanes, holds and their leases, pruning holds, dead letters, suspect copies |
//! | `link` | the connection and its supervision: dialling one address (TCP, TLS, AMQP), reconnecting, replaying the declared queues |
//! | `declare` | declaring queues on a connection it is given, and what a refusal tells the user to do |
//! | `trust` | who may send what on the fleet plane, as the broker vouches for the sending user |
//! | `options`, `topology`, `addresses`, `rehold`, `properties`, `error`, `bound`, `tls`, `connection_properties`, `census` | settings, queue names and arguments, broker addresses, due times, message properties, error mapping, bounded calls, what a pruner must be told: no broker I/O of their own |
//!
//! Inside a folder, the files lean on each other the same way, one
//! direction only. A test of the workspace (`tests/module_graph.rs` at its
//! root) reads every crate's sources and fails on any import circle
//! between sibling modules.
//!
//! [queuey]: https://docs.rs/queuey

#![cfg_attr(docsrs, feature(doc_cfg))]

mod addresses;
mod backend;
mod bound;
mod census;
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
