//! `topology apply`: declaring the queues of a set that are missing.

use std::collections::BTreeMap;

use lapin::options::QueueDeclareOptions;
use lapin::types::ShortString;
use queuey_rabbitmq::topology::QueueArguments;
use serde::Serialize;

use super::TopologySpec;
use super::expected::expected;
use crate::amqp::{Amqp, short};
use crate::argument::show;
use crate::error::{OpsError, Result};
use crate::mgmt::Management;

/// A queue `apply` would declare.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Declaration {
    pub(crate) name: String,
    pub(crate) durable: bool,
    /// Its arguments, as text.
    pub(crate) arguments: BTreeMap<String, String>,
    #[serde(skip)]
    raw: QueueArguments,
}

/// The queues of `spec` missing on the broker. Existing queues are never
/// changed (RabbitMQ cannot change a queue's arguments anyway).
pub(crate) async fn plan_apply(mgmt: &Management, spec: &TopologySpec) -> Result<Vec<Declaration>> {
    let mut out = Vec::new();
    for want in expected(spec) {
        if mgmt.queue(&want.name).await?.is_none() {
            out.push(Declaration {
                name: want.name.clone(),
                durable: want.durable,
                arguments: want
                    .arguments
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), show(v)))
                    .collect(),
                raw: want.arguments,
            });
        }
    }
    Ok(out)
}

/// Declares `declarations`, each on its own channel.
pub(crate) async fn apply(amqp: &Amqp, declarations: &[Declaration]) -> Result<()> {
    for d in declarations {
        let channel = amqp.channel().await?;
        let options = QueueDeclareOptions {
            durable: d.durable,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(
                short(&d.name)?,
                options,
                queuey_rabbitmq::__private::field_table(&d.raw),
            )
            .await
            .map_err(|e| OpsError::amqp(format!("declaring `{}`", d.name), e))?;
        let _ = channel.close(200, ShortString::default()).await;
    }
    Ok(())
}
