//! Choosing which node leads the failover run's queues: RabbitMQ puts a
//! quorum queue's leader on the node its declaration went through, so the
//! run declares every queue it will use (the work queue `q`, its
//! dead-letter queue `q.dead` and the hold queue its retries go through)
//! through one node, before any client connects, with exactly the
//! arguments queuey declares them with.
//!
//! `q` and `q.dead` are declared by a [`Producer`] on a backend connected
//! to that node alone (queuey's own declaration); the hold, which queuey
//! declares only on its first hold publish, through a raw AMQP channel with
//! [`HoldQueues::arguments`] under [`HoldQueues::name`].

use std::sync::Arc;
use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::types::{LongString, ShortString};
use lapin::{Connection, ConnectionProperties};
use queuey::backend::hold_delay_ms;
use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use super::scenario::{self, Numbered};

/// Declares `J`'s work queue, its dead-letter queue and the hold queue for
/// a retry after `hold` through the node at `url`, with `options` (the
/// clients' options: same suffixes, hold family and granularity); returns
/// the hold queue's name.
pub(crate) async fn declare_through<J: Numbered>(
    url: &str,
    options: RabbitMqOptions,
    hold: Duration,
) -> Result<String, String> {
    let name = format!(
        "queuey-cluster-declarer-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let backend = Arc::new(
        RabbitMqBackend::with_options(vec![url.to_owned()], options.clone().connection_name(&name))
            .await
            .map_err(|e| format!("connecting to declare the queues: {e}"))?,
    );
    let declared = Producer::<J::Queues, _>::new(Arc::clone(&backend))
        .await
        .map(drop)
        .map_err(|e| format!("declaring the work and dead-letter queues: {e}"));
    scenario::close(&backend).await;
    declared?;

    let queue = <J as Job>::QUEUE.name();
    let settings = options.settings();
    let family = settings.hold_queues();
    let ttl = hold_delay_ms(queue, hold, settings.retry_granularity())
        .map_err(|e| format!("the hold's delay: {e}"))?;
    let hold_name = family
        .name(queue, settings.deferred_suffix(), ttl)
        .map_err(|e| format!("the hold's name: {e}"))?;
    let properties = ConnectionProperties::default()
        .with_connection_name(LongString::from(format!("{name}-holds")));
    let connection = tokio::time::timeout(
        Duration::from_secs(10),
        Connection::connect(url, properties),
    )
    .await
    .map_err(|_| "connecting to declare the hold: timed out".to_owned())?
    .map_err(|e| format!("connecting to declare the hold: {e}"))?;
    let declared = async {
        let channel = connection.create_channel().await?;
        channel
            .queue_declare(
                ShortString::from(hold_name.as_str()),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                queuey::rabbitmq::__private::field_table(&family.arguments(queue, ttl)),
            )
            .await
            .map(drop)
    }
    .await
    .map_err(|e| format!("declaring the hold `{hold_name}`: {e}"));
    let _ = connection.close(200, "declared".into()).await;
    declared.map(|()| hold_name)
}
