//! Constructors and shortcuts only the tests use, with every default the
//! command line would give.

use std::path::PathBuf;

use crate::dead::DeadLetter;
use crate::fleet::{Fleet, Trust};
use crate::holds::Census;
use crate::mgmt::Management;
use crate::shards::Shards;
use crate::web::{Auth, WebConfig};
use crate::{Amqp, Result, TlsFiles};

impl Amqp {
    /// Connects to `url`, naming the connection `name`, with the platform's
    /// TLS roots for an `amqps://` URL.
    pub(crate) async fn connect(url: &str, name: &str) -> Result<Self> {
        Amqp::connect_tls(url, name, &TlsFiles::default()).await
    }
}

impl Management {
    /// A client for the broker that `amqp_url` names, with the platform's
    /// TLS roots. See [`for_amqp_url_tls`](Self::for_amqp_url_tls).
    pub(crate) fn for_amqp_url(amqp_url: &str, base: Option<&str>) -> Result<Self> {
        Management::for_amqp_url_tls(amqp_url, base, &TlsFiles::default())
    }
}

impl WebConfig {
    /// A dashboard for the broker at `amqp_url` with every default.
    pub(crate) fn new(amqp_url: impl Into<String>) -> Self {
        WebConfig {
            amqp_url: amqp_url.into(),
            mgmt_base: None,
            tls: TlsFiles::default(),
            queues: Vec::new(),
            topology: None,
            dead_suffix: crate::DEFAULT_DEAD_SUFFIX.to_owned(),
            deferred_suffix: crate::DEFAULT_DEFERRED_SUFFIX.to_owned(),
            auth: Auth::None,
            public_hosts: Vec::new(),
            export_dir: PathBuf::from("."),
            control_stream: queuey_rabbitmq::topology::CONTROL_STREAM.to_owned(),
            trust: Trust::default(),
        }
    }
}

impl Shards {
    /// `queue` alone, without shards.
    pub(crate) fn unsharded(queue: impl Into<String>) -> Self {
        Shards {
            queue: queue.into(),
            count: 0,
        }
    }
}

impl Fleet {
    /// Like [`connect_with`](Fleet::connect_with), trusting no other user.
    pub(crate) async fn connect_to(
        url: &str,
        tls: &TlsFiles,
        name: &str,
        control_stream: &str,
    ) -> Result<Fleet> {
        Fleet::connect_with(url, tls, name, control_stream, &Trust::default()).await
    }
}

impl Census {
    /// The census as Prometheus text exposition.
    pub(crate) fn prometheus(&self) -> String {
        crate::holds::prometheus(std::slice::from_ref(self))
    }
}

/// Reads up to `max` dead letters of `dead_queue`, oldest first, leaving
/// the queue as it was. Everything read is kept: for counting or searching
/// a queue of any length, [`scan`](crate::dead::scan) it.
pub(crate) async fn read_dead(
    amqp: &Amqp,
    dead_queue: &str,
    max: usize,
) -> Result<Vec<DeadLetter>> {
    let mut letters = Vec::new();
    crate::dead::scan(amqp, dead_queue, Some(max), |letter| {
        letters.push(letter);
        std::ops::ControlFlow::Continue(())
    })
    .await?;
    Ok(letters)
}

/// Reads up to `max` messages from the head of `queue` and puts them all
/// back, in order.
pub(crate) async fn browse(
    amqp: &Amqp,
    queue: &str,
    max: Option<usize>,
) -> Result<Vec<crate::browse::Held>> {
    crate::browse::browse_counted(amqp, queue, max)
        .await
        .map(|(held, _)| held)
}
