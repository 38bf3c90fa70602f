//! The fleet plane's own connection.
//!
//! The control follower and the heartbeat reads consume streams. RabbitMQ
//! answers some mistakes and some moments of a stream's life by closing
//! the whole connection: a consumer that nacks or rejects (540
//! `NOT_IMPLEMENTED`), and on RabbitMQ 4.3 a consumer asking for a stream
//! whose leader is still starting after a restart (541 `INTERNAL_ERROR`).
//! So these reads run on a second connection, never the job path's: opened
//! when first needed, with the same addresses and options, named after the
//! backend's connection with ` (fleet)` added, and replaced by its own
//! supervisor when it dies. Publishing to the streams stays on the job
//! path's publishing lanes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use queuey_core::Error;
use tokio::sync::OnceCell;

use crate::RabbitMqOptions;
use crate::link::{Link, Purpose};

/// The suffix of the fleet connection's name.
const NAME_SUFFIX: &str = " (fleet)";

/// A backend's fleet connection, opened on first use.
pub(crate) struct FleetLink {
    uris: Vec<String>,
    options: Arc<RabbitMqOptions>,
    link: OnceCell<Arc<Link>>,
    closed: AtomicBool,
}

impl FleetLink {
    /// The fleet connection of a backend connecting to `uris` with
    /// `options`; nothing is opened yet.
    pub(crate) fn new(uris: &[String], options: &RabbitMqOptions) -> Self {
        let mut options = options.clone();
        options.connection_name = options
            .connection_name
            .map(|name| format!("{name}{NAME_SUFFIX}"));
        FleetLink {
            uris: uris.to_vec(),
            options: Arc::new(options),
            link: OnceCell::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// The link, connecting it the first time (up to the connect wait).
    pub(crate) async fn get(&self) -> Result<Arc<Link>, Error> {
        if self.is_closed() {
            return Err(Error::ShutDown);
        }
        let link = self
            .link
            .get_or_try_init(|| {
                Link::connect(&self.uris, Arc::clone(&self.options), Purpose::Fleet)
            })
            .await?;
        if self.is_closed() {
            // Closed while connecting: this link is not closed by anyone
            // else.
            let _ = link.close().await;
            return Err(Error::ShutDown);
        }
        Ok(Arc::clone(link))
    }

    /// Whether the backend was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the connection, if it was opened; later calls of
    /// [`get`](Self::get) fail with [`Error::ShutDown`].
    pub(crate) async fn close(&self) -> Result<(), Error> {
        self.closed.store(true, Ordering::Release);
        match self.link.get() {
            Some(link) => link.close().await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_connection_is_named_after_the_backends() {
        let named = RabbitMqOptions::default().connection_name("emails-worker");
        let fleet = FleetLink::new(&["amqp://localhost".to_owned()], &named);
        assert_eq!(
            fleet.options.connection_name.as_deref(),
            Some("emails-worker (fleet)")
        );
        let fleet = FleetLink::new(&[], &RabbitMqOptions::default());
        assert_eq!(fleet.options.connection_name, None);
    }

    #[tokio::test]
    async fn a_closed_fleet_link_opens_nothing() {
        let fleet = FleetLink::new(
            &["amqp://localhost".to_owned()],
            &RabbitMqOptions::default(),
        );
        fleet.close().await.unwrap();
        assert!(matches!(fleet.get().await, Err(Error::ShutDown)));
    }
}
