//! Constructors and shortcuts only the tests use, with every default the
//! command line would give.

use std::path::PathBuf;

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
