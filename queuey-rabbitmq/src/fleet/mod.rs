//! The fleet plane, with the `fleet` feature: what operators use to see and
//! steer a running fleet, beside the job path.
//!
//! - **Commands** (`control`): cancel a job, pause or resume a queue. They
//!   are sent to the control stream, and one follower per backend applies
//!   them to the backend's view in stream order.
//! - **Heartbeats** (`heartbeats`): the workers say what they do in the
//!   heartbeat stream beside the control stream, and the list of workers
//!   is read back from it.
//! - **Leadership** (`leader`): one quorum queue with a single active
//!   consumer per periodic schedule elects the process that ticks it.
//!
//! The streams are read on a connection of their own (`link`); commands,
//! heartbeats and markers are published on the job path's lanes, and
//! leadership campaigns on the job path's connection. Everything the fleet
//! reads is checked against who sent it (`trust`).
//!
//! The backend holds one [`Fleet`] and its implementations of the fleet's
//! capability traits call its parts; nothing here knows the backend.

mod control;
mod heartbeats;
mod leader;
mod link;

use std::sync::Arc;

use queuey_core::Error;
use queuey_core::periodic::Lease;
use tokio::sync::OnceCell;

use crate::RabbitMqOptions;
use crate::declare::{self, Stream};
use crate::link::Link;
use crate::outbox::Outbox;
use crate::trust::Senders;
use control::Control;
use heartbeats::HeartbeatStream;
use link::FleetLink;

/// A backend's fleet plane: its commands, its heartbeats, its leadership
/// campaigns and the connection its stream reads use.
pub(crate) struct Fleet {
    /// The job path's connection, where leadership campaigns.
    link: Arc<Link>,
    /// The fleet's own connection, where the streams are read.
    reads: Arc<FleetLink>,
    /// Control commands: sent to the control stream, and followed there.
    pub(crate) control: Control,
    /// The workers' heartbeats.
    pub(crate) heartbeats: HeartbeatStream,
    /// Who this backend signs as, and whom it trusts.
    senders: Arc<Senders>,
}

impl Fleet {
    /// The fleet plane of a backend connecting to `addresses`; nothing is
    /// declared, consumed or connected until it is first used.
    pub(crate) fn new(
        addresses: &[String],
        link: &Arc<Link>,
        outbox: &Arc<Outbox>,
        options: &Arc<RabbitMqOptions>,
        senders: &Arc<Senders>,
    ) -> Self {
        let reads = Arc::new(FleetLink::new(addresses, options));
        let control = Control::new(link, &reads, outbox, options, senders);
        let heartbeats = HeartbeatStream::new(link, &reads, outbox, options, senders);
        Fleet {
            link: Arc::clone(link),
            reads,
            control,
            heartbeats,
            senders: Arc::clone(senders),
        }
    }

    /// Campaigns for the schedule `key`: returns once this process leads it.
    pub(crate) async fn lead(&self, key: &str) -> Result<Box<dyn Lease>, Error> {
        leader::lead(&self.link, Arc::clone(&self.senders), key).await
    }

    /// Closes the fleet's own connection, if it was opened; the job path's
    /// is the backend's to close.
    pub(crate) async fn close(&self) -> Result<(), Error> {
        self.reads.close().await
    }
}

/// Declares `stream`, a stream of `kind`, through `link`, once per `declared`.
async fn declare_once(
    declared: &OnceCell<()>,
    link: &Link,
    stream: &str,
    kind: Stream,
) -> Result<(), Error> {
    declared
        .get_or_try_init(|| async {
            let what = format!("declaring the {} `{stream}`", kind.name());
            link.call(&what, |current| async move {
                declare::declare_stream(&current.connection, stream, kind).await
            })
            .await
        })
        .await
        .map(|_| ())
}
