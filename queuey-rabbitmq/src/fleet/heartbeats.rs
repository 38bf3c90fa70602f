//! The workers' heartbeats over RabbitMQ: each is published to the
//! heartbeat stream beside the control stream, and the list of workers is
//! read back from its last minute.
//!
//! A list is one short read: a consumer on a channel of its own starts at
//! the stream's records of the last [`LOOK_BACK`] (an interval the broker
//! resolves on its own clock), a sync marker is published, and the read
//! ends when the marker comes back, so the list holds every heartbeat sent
//! before it was asked for. The channel only ever acknowledges, as a
//! stream requires.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::__private::now_ms;

use lapin::BasicProperties;
use lapin::types::AMQPValue;
use queuey_core::control::{Heartbeat, MAX_HEARTBEAT_BYTES, MAX_WORKERS_LISTED};
use queuey_core::{BackendError, BackendErrorKind, Error, Uuid};
use tokio::sync::OnceCell;

use crate::RabbitMqOptions;
use crate::declare::Stream;
use crate::error::Failure;
use crate::fleet::control::{live, message};
use crate::fleet::link::FleetLink;
use crate::link::Link;
use crate::outbox::Outbox;
use crate::properties;
use crate::topology::{self, HEARTBEAT_TYPE};
use crate::trust::{self, Kind, Refusal, Role, Senders};

/// How far back a list of workers reads: longer than three intervals of
/// any worker whose heartbeat interval is at most 20 seconds.
pub(crate) const LOOK_BACK: &str = "60s";

/// How many heartbeats the broker sends ahead of the reader's
/// acknowledgements.
const PREFETCH: u16 = 1_000;

/// How much later than its lifetime a heartbeat still counts, for clocks
/// of two hosts that disagree a little.
const CLOCK_SLACK: Duration = Duration::from_secs(2);

/// A backend's side of the heartbeats.
pub(crate) struct HeartbeatStream {
    link: Arc<Link>,
    /// Where the heartbeat stream is read.
    fleet: Arc<FleetLink>,
    outbox: Arc<Outbox>,
    stream: Arc<str>,
    declared: OnceCell<()>,
    /// Who signs the heartbeats sent, and whose are listed.
    senders: Arc<Senders>,
    /// The connection's name, which names the workers of this backend.
    name: Option<Arc<str>>,
}

impl HeartbeatStream {
    pub(crate) fn new(
        link: &Arc<Link>,
        fleet: &Arc<FleetLink>,
        outbox: &Arc<Outbox>,
        options: &RabbitMqOptions,
        senders: &Arc<Senders>,
    ) -> Self {
        HeartbeatStream {
            link: Arc::clone(link),
            fleet: Arc::clone(fleet),
            outbox: Arc::clone(outbox),
            stream: Arc::from(topology::heartbeat_stream_name(
                options.settings().control_stream(),
            )),
            declared: OnceCell::new(),
            senders: Arc::clone(senders),
            name: options.settings().connection_name().map(Arc::from),
        }
    }

    /// Publishes `beat`, signed with this backend's user and named after
    /// its connection unless it names itself (declaring the stream first,
    /// once per backend), and waits for the broker's confirm.
    pub(crate) async fn send(&self, beat: &Heartbeat) -> Result<(), Error> {
        self.link.ensure_open()?;
        let body = match (&self.name, &beat.name) {
            (Some(name), None) => Heartbeat {
                name: Some(name.to_string()),
                ..beat.clone()
            }
            .encode(),
            _ => beat.encode(),
        };
        crate::error::check_size(&self.stream, body.len(), MAX_HEARTBEAT_BYTES)?;
        let message_id = format!("{}.{}", beat.worker_id.simple(), beat.at_ms);
        let mut out = message::persistent(&self.stream, body, message_id);
        let typed = out.properties.with_type(properties::short(HEARTBEAT_TYPE));
        out.properties = self.senders.sign(typed, "sending a heartbeat")?;
        self.declare().await?;
        self.outbox.stream(out, Stream::Heartbeats).await
    }

    /// The workers whose latest heartbeat is recent and not their last,
    /// oldest worker first. Only heartbeats signed by a trusted worker
    /// user are read, at most [`MAX_WORKERS_LISTED`] workers are kept, and
    /// a heartbeat over [`MAX_HEARTBEAT_BYTES`] is skipped unread.
    pub(crate) async fn workers(&self) -> Result<Vec<Heartbeat>, Error> {
        self.link.ensure_open()?;
        self.declare().await?;
        let stream = &*self.stream;
        let what = format!("reading the workers' heartbeats from `{stream}`");
        let failing = what.as_str();
        let fleet = self.fleet.get().await?;
        let latest = fleet
            .call(&what, |current| async move {
                let connection = &current.connection;
                let fail = |e: lapin::Error| {
                    Failure::of(&e, connection.status().connected()).into_error(failing)
                };
                let channel = connection.create_channel().await.map_err(fail)?;
                let read = async {
                    let tag = format!("queuey.workers.{}", Uuid::new_v4().simple());
                    let back = live::stream_offset(AMQPValue::LongString(LOOK_BACK.into()));
                    let mut consumer =
                        crate::channel::consume(&channel, stream, &tag, PREFETCH, back)
                            .await
                            .map_err(fail)?;
                    let nonce = Uuid::new_v4();
                    let mut marker = message::sync_marker(stream, nonce);
                    marker.properties = self.senders.sign_if_known(marker.properties);
                    self.outbox.stream(marker, Stream::Heartbeats).await?;
                    let mut latest: HashMap<Uuid, Heartbeat> = HashMap::new();
                    let marker = live::read_to_marker(&mut consumer, nonce, fail, |delivery| {
                        match read(&self.senders, &delivery.properties, &delivery.data) {
                            Ok(Read::Beat(beat)) => {
                                if let Err(refusal) = keep_latest(&mut latest, beat) {
                                    trust::refused(Kind::Heartbeat, &refusal);
                                }
                            }
                            Ok(Read::Marker(_)) => {}
                            Err(refusal) => trust::refused(Kind::Heartbeat, &refusal),
                        }
                    })
                    .await?;
                    marker.map(|_| latest).ok_or_else(|| {
                        Error::Backend(BackendError::new(
                            BackendErrorKind::ConnectionLost,
                            format!("{failing}: the consumer ended before the read did"),
                        ))
                    })
                };
                let result = read.await;
                crate::channel::close(&channel).await;
                result
            })
            .await?;
        Ok(alive(latest.into_values(), now_ms()))
    }

    async fn declare(&self) -> Result<(), Error> {
        super::declare_once(&self.declared, &self.link, &self.stream, Stream::Heartbeats).await
    }
}

/// What a delivery of the heartbeat stream is.
// Read once per delivery and moved straight on: boxing the heartbeat would
// cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
enum Read {
    Marker(Uuid),
    Beat(Heartbeat),
}

/// Reads a delivery: a sync marker (anyone's: only its nonce matters), or
/// a heartbeat from a trusted worker user, checked for size before it is
/// decoded.
fn read(senders: &Senders, properties: &BasicProperties, body: &[u8]) -> Result<Read, Refusal> {
    if message::is_sync_marker(properties) {
        return message::sync_nonce(body)
            .map(Read::Marker)
            .ok_or(Refusal::Malformed);
    }
    senders.admit(Role::Worker, properties)?;
    if body.len() > MAX_HEARTBEAT_BYTES {
        return Err(Refusal::TooLarge(body.len()));
    }
    Heartbeat::decode(body)
        .map(Read::Beat)
        .ok_or(Refusal::Malformed)
}

/// Keeps the later of two heartbeats of one worker; refuses a worker past
/// [`MAX_WORKERS_LISTED`].
fn keep_latest(latest: &mut HashMap<Uuid, Heartbeat>, beat: Heartbeat) -> Result<(), Refusal> {
    match latest.get(&beat.worker_id) {
        Some(kept) if kept.at_ms > beat.at_ms => {}
        None if latest.len() >= MAX_WORKERS_LISTED => {
            return Err(Refusal::Invalid(format!(
                "more than {MAX_WORKERS_LISTED} workers sent heartbeats in the last {LOOK_BACK}"
            )));
        }
        _ => {
            latest.insert(beat.worker_id, beat);
        }
    }
    Ok(())
}

/// The workers whose latest heartbeat is not their last and came within
/// its lifetime of `now_ms`, oldest worker first.
fn alive(latest: impl Iterator<Item = Heartbeat>, now_ms: u64) -> Vec<Heartbeat> {
    let slack = u64::try_from(CLOCK_SLACK.as_millis()).unwrap_or(u64::MAX);
    let mut workers: Vec<Heartbeat> = latest
        .filter(|beat| !beat.stopping)
        .filter(|beat| {
            let lifetime = u64::try_from(beat.lifetime().as_millis()).unwrap_or(u64::MAX);
            now_ms.saturating_sub(beat.at_ms) <= lifetime.saturating_add(slack)
        })
        .collect();
    workers.sort_by_key(|beat| (beat.started_at_ms, beat.worker_id));
    workers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(id: Uuid, at_ms: u64, stopping: bool) -> Heartbeat {
        Heartbeat {
            worker_id: id,
            host: "h".into(),
            name: None,
            pid: 1,
            version: "0".into(),
            queues: vec![],
            paused: vec![],
            concurrency: 1,
            connection: "connected".into(),
            started_at_ms: 0,
            at_ms,
            interval_ms: 5_000,
            stopping,
            running: vec![],
            totals: vec![],
            limits: vec![],
        }
    }

    #[test]
    fn the_latest_heartbeat_of_each_worker_decides() {
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut latest = HashMap::new();
        for beat in [
            beat(a, 100_000, false),
            beat(a, 90_000, false),
            beat(b, 95_000, false),
            beat(b, 99_000, true),
            beat(c, 70_000, false),
        ] {
            keep_latest(&mut latest, beat).unwrap();
        }
        let alive: Vec<Uuid> = alive(latest.into_values(), 101_000)
            .iter()
            .map(|w| w.worker_id)
            .collect();
        // b said it stops; c is older than three intervals and the slack.
        assert_eq!(alive, [a]);
    }

    fn senders() -> Senders {
        Senders::of(
            &["amqp://worker:pw@localhost/%2f".to_owned()],
            &RabbitMqOptions::default(),
        )
        .unwrap()
    }

    fn from(user: &str) -> BasicProperties {
        BasicProperties::default().with_user_id(user.into())
    }

    #[test]
    fn markers_and_heartbeats_read_back_as_sent() {
        let s = senders();
        let nonce = Uuid::new_v4();
        let m = message::sync_marker("s", nonce);
        assert_eq!(read(&s, &m.properties, &m.body), Ok(Read::Marker(nonce)));
        let b = beat(Uuid::new_v4(), 1, false);
        assert_eq!(
            read(&s, &from("worker"), &b.encode()),
            Ok(Read::Beat(b.clone()))
        );
        assert_eq!(
            read(&s, &from("worker"), b"garbage"),
            Err(Refusal::Malformed)
        );
        assert_eq!(
            read(&s, &BasicProperties::default(), &b.encode()),
            Err(Refusal::Unsigned)
        );
        assert_eq!(
            read(&s, &from("producer"), &b.encode()),
            Err(Refusal::Stranger("producer".into()))
        );
        let huge = vec![b' '; MAX_HEARTBEAT_BYTES + 1];
        assert_eq!(
            read(&s, &from("worker"), &huge),
            Err(Refusal::TooLarge(huge.len()))
        );
    }

    #[test]
    fn a_listing_keeps_at_most_its_cap_of_workers() {
        let mut latest = HashMap::new();
        for _ in 0..MAX_WORKERS_LISTED {
            keep_latest(&mut latest, beat(Uuid::new_v4(), 1, false)).unwrap();
        }
        let known = *latest.keys().next().unwrap();
        assert!(keep_latest(&mut latest, beat(Uuid::new_v4(), 1, false)).is_err());
        // A worker already listed still gets its later heartbeat kept.
        keep_latest(&mut latest, beat(known, 2, false)).unwrap();
        assert_eq!(latest[&known].at_ms, 2);
    }
}
