//! The rows over TLS: both sides encrypted, against a private RabbitMQ node
//! with a TLS listener that this benchmark starts (and stops) itself, with
//! certificates it makes; the shared broker has no TLS listener. Needs root
//! and the `rabbitmq-server` package, like the test suites' private nodes.

#[allow(dead_code)]
#[path = "../../../tests/support/fault/certs.rs"]
mod certs;
#[allow(dead_code)]
#[path = "../../../tests/support/fault/node.rs"]
mod node;

use crate::broker::Broker;
use crate::report::RowResult;
use crate::{BenchResult, Row, Settings};

/// Starts the node, measures `rows` against it, stops it.
pub(crate) async fn measure(settings: &Settings, rows: Vec<Row>) -> BenchResult<Vec<RowResult>> {
    node::available().map_err(|why| {
        format!("the TLS rows need a private RabbitMQ node, which cannot start here: {why}")
    })?;
    let node = node::PrivateNode::start_tls("bench-tls", false).await;
    let ca = std::fs::read_to_string(&node.tls().certs.ca)?;
    let url = node.amqps_url("localhost");
    println!(
        "\n- TLS rows: a private RabbitMQ node at {}",
        url.replace(":guest@", ":***@")
    );
    crate::measure_broker_process(node.os_pid());
    let broker = Broker::connect_tls(&url, Some(ca)).await?;
    let mut results = Vec::new();
    let mut outcome = Ok(());
    for row in rows {
        match crate::measure_row(&broker, settings, row).await {
            Ok(result) => results.push(result),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    let cleaned = broker.delete_created().await;
    broker.close().await;
    crate::measure_broker_process(None);
    drop(node);
    outcome?;
    cleaned?;
    Ok(results)
}
