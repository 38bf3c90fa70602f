//! Control commands over RabbitMQ: one stream per virtual host is both the
//! log of every command and the channel that carries it to every process.
//!
//! - **Sending** ([`Control::send`]): the stream is declared once per
//!   backend (durable, `x-queue-type = stream`, the arguments of
//!   [`control_stream_arguments`](crate::topology::control_stream_arguments)),
//!   then the command's JSON is published through the publishing lanes like
//!   any job (default exchange, the stream as routing key, persistent,
//!   `mandatory`) and `Ok` comes only with a bare ack.
//! - **Following** ([`Control::follow`]): the first call starts the
//!   backend's one follower (`follower`), a task consuming the stream on a
//!   channel of its own (`live`) of the backend's fleet connection
//!   ([`FleetLink`]), which applies every
//!   command to the backend's [`ControlView`] in stream order. Each call
//!   returns once the follower has read everything sent before it: it
//!   publishes a sync marker (`message`) and waits, within the call bound,
//!   until the follower reads it back (`syncs`).
//! - **Across connections**: every delivery carries its offset
//!   (`x-stream-offset`); after a lost connection the follower consumes
//!   again from the offset after the last record it read, so no command is
//!   applied twice or missed.
//! - **Retention**: the stream drops whole segments once everything in
//!   them is older than 30 days, the time cancellations are remembered
//!   ([`CANCELLATION_MEMORY`](queuey_core::control::CANCELLATION_MEMORY)),
//!   and the follower forgets older cancellations itself every hour. A
//!   pause lasts until it is resumed, so a follower publishes a pause again
//!   once it is a week old (`renew`).
//!
//! The follower consumes on a connection of its own ([`FleetLink`]; see
//! there why). Its channel only ever acknowledges, since RabbitMQ closes
//! the whole connection when a stream's consumer gets a `basic.get`, a
//! nack, a reject or an automatic acknowledgement; lapin sends none of
//! those on its own (deliveries for a consumer it no longer knows, or
//! buffered when a consumer is reset, are dropped without a frame).

mod follower;
pub(crate) mod live;
pub(crate) mod message;
mod renew;
mod seek;
mod syncs;

use std::sync::Arc;

use queuey_core::control::{ControlRecord, ControlView};
use queuey_core::{BackendErrorKind, Error};
use tokio::sync::{Mutex, OnceCell};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::RabbitMqOptions;
use crate::declare::Stream;
use crate::error::backend;
use crate::fleet::link::FleetLink;
use crate::link::Link;
use crate::outbox::Outbox;
use crate::trust::Senders;
use follower::Follower;
use live::StartAt;
use seek::Seek;
use syncs::Syncs;

/// The pause between tries of a first follow while the stream's node is
/// still starting.
const NOT_READY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Metric names the control plane reports (through the `metrics` crate).
pub(crate) mod metric {
    /// Counter: commands read from the control stream and applied.
    pub(crate) const RECORDS: &str = "queuey_rabbitmq_control_records_total";
    /// Counter: times the follower consumed the stream again after losing
    /// its consumer.
    pub(crate) const FOLLOWER_RESTARTS: &str = "queuey_rabbitmq_control_follower_restarts_total";
    /// Gauge: cancellations remembered (by job id and by filter).
    pub(crate) const CANCELLATIONS: &str = "queuey_rabbitmq_control_cancellations";
    /// Gauge: queues paused.
    pub(crate) const PAUSED_QUEUES: &str = "queuey_rabbitmq_control_paused_queues";
    /// Counter: pauses published again to keep them in the stream.
    pub(crate) const PAUSE_RENEWALS: &str = "queuey_rabbitmq_control_pause_renewals_total";
    /// Counter: snapshots of the control state this process wrote.
    pub(crate) const SNAPSHOTS: &str = "queuey_rabbitmq_control_snapshots_total";
    /// Gauge: 1 once the follower has read every command sent before it
    /// started, 0 while a process runs without them.
    pub(crate) const CAUGHT_UP: &str = "queuey_rabbitmq_control_caught_up";
}

/// A backend's side of the control plane: sending commands to its stream
/// and following them.
pub(crate) struct Control {
    link: Arc<Link>,
    /// Where the follower consumes the stream.
    fleet: Arc<FleetLink>,
    outbox: Arc<Outbox>,
    options: Arc<RabbitMqOptions>,
    stream: Arc<str>,
    /// Who this process says it is, for records sent without a sender.
    by: Option<Arc<str>>,
    /// Who signs what this backend sends, and whose commands it obeys.
    senders: Arc<Senders>,
    /// The stream was declared through this backend.
    declared: OnceCell<()>,
    following: Mutex<Option<Following>>,
}

/// The follower, once started.
struct Following {
    view: ControlView,
    syncs: Arc<Syncs>,
    task: JoinHandle<()>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Control {
    /// The control plane of a backend; nothing is declared or consumed
    /// until the first command or the first follow.
    pub(crate) fn new(
        link: &Arc<Link>,
        fleet: &Arc<FleetLink>,
        outbox: &Arc<Outbox>,
        options: &Arc<RabbitMqOptions>,
        senders: &Arc<Senders>,
    ) -> Self {
        let stream = Arc::from(options.settings().control_stream());
        let by = sender(
            senders.own(),
            options.settings().connection_name(),
            host_name().as_deref(),
        );
        Control {
            link: Arc::clone(link),
            fleet: Arc::clone(fleet),
            outbox: Arc::clone(outbox),
            options: Arc::clone(options),
            stream,
            by: by.map(Arc::from),
            senders: Arc::clone(senders),
            declared: OnceCell::new(),
            following: Mutex::new(None),
        }
    }

    /// Checks `record` as every follower will and publishes it, signed, to
    /// the stream (declared once per backend), confirmed. A record without
    /// a sender is sent as this backend's.
    pub(crate) async fn send(&self, record: &ControlRecord) -> Result<(), Error> {
        self.link.ensure_open()?;
        record.check_content(queuey_core::__private::now_ms())?;
        let mut out = match (&record.by, &self.by) {
            (None, Some(by)) => message::command(&self.stream, &record.clone().by(by.as_ref())),
            _ => message::command(&self.stream, record),
        };
        queuey_core::control::check_size(out.body.len())?;
        let what = format!("sending the `{}` command", record.command.as_str());
        out.properties = self.senders.sign(out.properties, &what)?;
        let limit = self.options.settings().max_message_size();
        crate::error::check_size(&self.stream, out.body.len(), limit)?;
        self.declare().await?;
        self.outbox.control(out).await
    }

    /// The backend's view of the control state, caught up with every
    /// command sent before the call; the first call starts the follower.
    /// When the first call cannot catch up within the call bound, the view
    /// is returned marked as not caught up ([`ControlView::is_caught_up`],
    /// a warning, the gauge at 0) until the follower has; later calls that
    /// cannot catch up in time fail.
    pub(crate) async fn follow(&self) -> Result<ControlView, Error> {
        self.link.ensure_open()?;
        let (view, syncs, first) = {
            let mut following = self.following.lock().await;
            let first = following.is_none();
            if first {
                *following = Some(self.start().await?);
            }
            let started = following.as_ref().expect("started just now");
            (started.view.clone(), Arc::clone(&started.syncs), first)
        };
        match self.sync(&syncs, first).await? {
            Synced::Yes => {
                if first {
                    metrics::gauge!(metric::CAUGHT_UP).set(1.0);
                }
            }
            Synced::Later(reached) => {
                view.set_caught_up(false);
                metrics::gauge!(metric::CAUGHT_UP).set(0.0);
                tracing::warn!(
                    stream = %self.stream,
                    bound = ?self.options.call_timeout,
                    "the control stream's follower has not read every command sent so far \
                     within the bound; going on without them for now (a paused queue may be \
                     consumed and a cancelled job run until it has) and following on"
                );
                let caught_up = view.clone();
                let stream = Arc::clone(&self.stream);
                tokio::spawn(async move {
                    if reached.await.is_ok() {
                        caught_up.set_caught_up(true);
                        metrics::gauge!(metric::CAUGHT_UP).set(1.0);
                        tracing::info!(%stream, "the control stream's follower has caught up");
                    }
                });
            }
        }
        Ok(view)
    }

    /// Declares the stream and starts the follower, seeking a snapshot
    /// near the stream's end (see `seek`); a refusal is the caller's error.
    async fn start(&self) -> Result<Following, Error> {
        let deadline = Instant::now() + self.options.call_timeout;
        let interval = self.options.settings().control_snapshot_interval();
        let link = self.fleet.get().await?;
        // Where to look for a snapshot: near the stream's end once the
        // stream is there (a declaration that fails now is tried again
        // below), else by time.
        let seek = match self.declare().await {
            Ok(()) => self.seek(&link, interval).await,
            Err(_) => Seek::start(None, queuey_core::__private::now_ms(), interval),
        };
        let from = seek.map_or(StartAt::First, Seek::from);
        let first = loop {
            let started = match self.declare().await {
                Ok(()) => live::start(&link, &self.stream, from).await,
                Err(error) => Err(error),
            };
            match started {
                // A broker that just restarted: the stream comes up soon,
                // and the link reconnects after a connection it closed.
                Err(error) if live::try_again(&error) && Instant::now() < deadline => {
                    tracing::debug!(stream = %self.stream, %error, "the control stream is not up yet");
                    tokio::time::sleep(NOT_READY_PAUSE).await;
                }
                started => break started?,
            }
        };
        let view = ControlView::new();
        let syncs = Arc::new(Syncs::default());
        let follower = Follower::new(self, link, view.clone(), Arc::clone(&syncs), seek, interval);
        let task = tokio::spawn(follower.run(first));
        Ok(Following { view, syncs, task })
    }

    /// Where the follower starts looking for a snapshot: near the stream's
    /// end when its offset can be read (a marker published and read back),
    /// else within the last snapshot intervals; `None` for a stream short
    /// enough to read from its start.
    async fn seek(&self, link: &Link, interval: std::time::Duration) -> Option<Seek> {
        let tail = live::tail(link, &self.outbox, &self.senders, &self.stream).await;
        if let Err(error) = &tail {
            tracing::debug!(stream = %self.stream, %error, "cannot read where the control stream ends; looking for a snapshot by time");
        }
        let now = queuey_core::__private::now_ms();
        Seek::start(tail.ok().flatten(), now, interval)
    }

    /// Publishes a sync marker and waits until the follower reads it back,
    /// within the call bound. Past the bound, `first` (the follower just
    /// started) gets the wait to finish later; any other call fails.
    async fn sync(&self, syncs: &Syncs, first: bool) -> Result<Synced, Error> {
        let bound = self.options.call_timeout;
        let deadline = Instant::now() + bound;
        let what = format!("following control commands on `{}`", self.stream);
        let nonce = Uuid::new_v4();
        let mut reached = syncs.wait(nonce).map_err(|reason| ended(&what, &reason))?;
        let mut marker = message::sync_marker(&self.stream, nonce);
        marker.properties = self.senders.sign_if_known(marker.properties);
        let published = tokio::time::timeout_at(deadline, self.outbox.control(marker)).await;
        let waited = match published {
            Ok(Ok(())) => tokio::time::timeout_at(deadline, &mut reached).await,
            Ok(Err(error)) => {
                syncs.forget(nonce);
                return Err(error);
            }
            Err(elapsed) => Err(elapsed),
        };
        match waited {
            Ok(Ok(())) => Ok(Synced::Yes),
            Ok(Err(_)) => {
                let reason = syncs.ended().unwrap_or_else(|| Arc::from("it stopped"));
                Err(ended(&what, &reason))
            }
            Err(_) if first => Ok(Synced::Later(reached)),
            Err(_) => {
                syncs.forget(nonce);
                let text = format!(
                    "{what}: the follower did not read back its sync marker within {bound:?}, \
                     so it has not caught up with the commands sent so far (RabbitMQ is slow \
                     or unreachable, or the stream holds a great many commands); try again"
                );
                Err(backend(BackendErrorKind::TimedOut, text))
            }
        }
    }

    /// Declares the stream once per backend.
    async fn declare(&self) -> Result<(), Error> {
        super::declare_once(&self.declared, &self.link, &self.stream, Stream::Control).await
    }
}

/// How a sync ended within its bound.
enum Synced {
    /// The follower read the marker back.
    Yes,
    /// Not yet: the receiver answers once it has.
    Later(tokio::sync::oneshot::Receiver<()>),
}

/// The error of a wait whose follower ended.
fn ended(what: &str, reason: &str) -> Error {
    let text = format!("{what}: the backend no longer follows its control commands: {reason}");
    backend(BackendErrorKind::Refused, text)
}

/// How a backend names itself in the commands it sends: its RabbitMQ
/// user, its connection name and its host, as far as each is known.
fn sender(user: Option<&str>, connection_name: Option<&str>, host: Option<&str>) -> Option<String> {
    let place = match (connection_name, host) {
        (Some(name), Some(host)) => Some(format!("{name} on {host}")),
        (Some(name), None) => Some(name.to_owned()),
        (None, Some(host)) => Some(host.to_owned()),
        (None, None) => None,
    };
    match (user, place) {
        (Some(user), Some(place)) => Some(format!("{user} ({place})")),
        (Some(user), None) => Some(user.to_owned()),
        (None, place) => place,
    }
}

/// This machine's host name, as the workers' heartbeats give it.
fn host_name() -> Option<String> {
    let name = gethostname::gethostname()
        .to_string_lossy()
        .trim()
        .to_owned();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_is_its_user_connection_name_and_host() {
        assert_eq!(
            sender(Some("ops"), Some("emails-worker"), Some("box-1")).as_deref(),
            Some("ops (emails-worker on box-1)")
        );
        assert_eq!(
            sender(None, Some("emails-worker"), Some("box-1")).as_deref(),
            Some("emails-worker on box-1")
        );
        assert_eq!(sender(None, None, Some("box-1")).as_deref(), Some("box-1"));
        assert_eq!(sender(Some("ops"), None, None).as_deref(), Some("ops"));
        assert_eq!(sender(None, Some("w"), None).as_deref(), Some("w"));
        assert_eq!(sender(None, None, None), None);
    }
}
