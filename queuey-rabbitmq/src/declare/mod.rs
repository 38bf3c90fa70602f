//! Queue declarations: the work, dead-letter and suspect queues on a
//! throwaway channel per `declare` (here), hold queues on channels of their
//! own (`holds`), the fleet's streams (`stream`), the job
//! exchange (`exchange`), the checks made first (`check`), and what a
//! refusal tells the user to do (`explain`).
//!
//! A refused declaration (`PRECONDITION_FAILED`) closes the channel it ran
//! on, so declarations never share a channel with publishes or consumers.
//! Everything here runs on the connection it is given: waiting for one,
//! and bounding the call, is the caller's part.

mod check;
mod exchange;
mod explain;
mod holds;
#[cfg(feature = "fleet")]
mod stream;

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection};
use queuey_core::{Error, QueueConfig};

use crate::error::{Failure, connection_lost};
use crate::properties::short;
use crate::topology::{self, ArgumentValue, QueueArguments};
use crate::{RabbitMqOptions, channel};
pub(crate) use check::check;
use explain::explain;
pub(crate) use holds::{HOLD_DECLARATION_CHANNELS, HoldDeclarer};
#[cfg(feature = "fleet")]
pub(crate) use stream::{Stream, declare_stream};

/// Declares each work queue and, when enabled, its dead-letter queue and
/// its suspect queue, on one fresh channel that is closed afterwards. Stops
/// at the first refusal. With a job exchange, declares it first and binds
/// each work queue to it.
pub(crate) async fn declare_queues(
    connection: &Connection,
    options: &RabbitMqOptions,
    configs: &[QueueConfig],
    mut declared: impl FnMut(&QueueConfig),
) -> Result<(), Error> {
    let mut channel = new_channel(connection, "opening a channel to declare queues").await?;
    let exchange = options.settings().job_exchange();
    let result = async {
        if let Some(exchange) = exchange {
            exchange::declare_exchange(connection, &channel, exchange).await?;
        }
        for config in configs {
            let queue = config.name();
            let dead = dead_letter_queue(options, queue);
            let args = topology::work_queue_arguments(config, dead.as_deref());
            declare_for(connection, &channel, queue, config, &args).await?;
            if let Some(exchange) = exchange {
                exchange::bind(connection, &channel, queue, exchange).await?;
            }
            if let Some(dead) = &dead {
                declare_dead(connection, &mut channel, dead, config).await?;
            }
            if let Some(suffix) = options.suspect_suffix_in_use() {
                let suspect = topology::suspect_queue_name(queue, suffix);
                let args = topology::suspect_queue_arguments(config, dead.as_deref());
                declare_for(connection, &channel, &suspect, config, &args).await?;
            }
            declared(config);
        }
        Ok(())
    }
    .await;
    channel::close(&channel).await;
    result
}

/// The name of `queue`'s dead-letter queue when `options` declare one.
fn dead_letter_queue(options: &RabbitMqOptions, queue: &str) -> Option<String> {
    options
        .dead_suffix_in_use()
        .map(|suffix| topology::dead_letter_queue_name(queue, suffix))
}

/// Declares one dead-letter queue again (it was found missing at publish
/// time), on a fresh channel that is closed afterwards.
pub(crate) async fn declare_dead_letter_queue(
    connection: &Connection,
    dead: &str,
    config: &QueueConfig,
) -> Result<(), Error> {
    let mut channel = new_channel(connection, "opening a channel to declare a queue").await?;
    let result = declare_dead(connection, &mut channel, dead, config).await;
    channel::close(&channel).await;
    result
}

/// Declares the dead-letter queue `dead` of `config` on `channel`. A quorum
/// one created before they had a delivery limit is refused (which closes
/// the channel): it is declared again as it was, on a new channel that
/// replaces `channel`, with a warning.
async fn declare_dead(
    connection: &Connection,
    channel: &mut Channel,
    dead: &str,
    config: &QueueConfig,
) -> Result<(), Error> {
    let durable = config.settings().durable();
    let args = topology::dead_letter_queue_arguments(config);
    let failure = match declare(connection, channel, dead, durable, &args).await {
        Ok(_) => return Ok(()),
        Err(failure) => failure,
    };
    if !created_without(&failure, "x-delivery-limit") {
        return Err(explain(failure, dead, config));
    }
    tracing::warn!(
        queue = dead,
        "the dead-letter queue was created without a delivery limit and runs on the broker's \
         default (20 on RabbitMQ 4, after which a dead letter read again is dropped); `queuey \
         topology apply` sets a `delivery-limit` policy on it"
    );
    *channel = new_channel(connection, "opening a channel to declare queues").await?;
    let mut older = args;
    older.remove("x-delivery-limit");
    declare_for(connection, channel, dead, config, &older).await
}

/// Whether a refused declaration says the queue exists without
/// `argument`, which it was declared with: a queue an earlier version
/// created, which RabbitMQ cannot change in place.
pub(crate) fn created_without(failure: &Failure, argument: &str) -> bool {
    failure.reply_code == Some(crate::error::code::PRECONDITION_FAILED)
        && !failure.connection_lost
        && failure.text.contains(&format!("'{argument}'"))
        && failure.text.contains("current is none")
}

/// Declares the suspect queue `suspect` of `config`'s queue, on a fresh
/// channel that is closed afterwards: before consuming it, and when a
/// publish found it gone. A quorum suspect queue dead-letters into the
/// work queue's dead-letter queue when `options` declare one.
pub(crate) async fn declare_suspect_queue(
    connection: &Connection,
    suspect: &str,
    options: &RabbitMqOptions,
    config: &QueueConfig,
) -> Result<(), Error> {
    let dead = dead_letter_queue(options, config.name());
    let args = topology::suspect_queue_arguments(config, dead.as_deref());
    let channel = new_channel(connection, "opening a channel to declare a queue").await?;
    let result = declare_for(connection, &channel, suspect, config, &args).await;
    channel::close(&channel).await;
    result
}

/// Declares one queue on a fresh channel that is closed afterwards; the
/// inner `Err` is the broker's refusal, for the caller to explain.
#[cfg(feature = "fleet")]
async fn declare_on_fresh_channel(
    connection: &Connection,
    queue: &str,
    durable: bool,
    args: &QueueArguments,
) -> Result<Result<u32, Failure>, Error> {
    let channel = new_channel(connection, "opening a channel to declare a queue").await?;
    let result = declare(connection, &channel, queue, durable, args).await;
    channel::close(&channel).await;
    Ok(result)
}

async fn new_channel(connection: &Connection, what: &str) -> Result<Channel, Error> {
    if !connection.status().connected() {
        return Err(connection_lost(what));
    }
    connection
        .create_channel()
        .await
        .map_err(|e| Failure::of(&e, connection.status().connected()).into_error(what))
}

/// Declares `queue`, a queue of `config`'s, on `channel`, waiting for the
/// broker's answer; a refusal says what to do about it.
async fn declare_for(
    connection: &Connection,
    channel: &Channel,
    queue: &str,
    config: &QueueConfig,
    args: &QueueArguments,
) -> Result<(), Error> {
    let durable = config.settings().durable();
    match declare(connection, channel, queue, durable, args).await {
        Ok(_) => Ok(()),
        Err(failure) => Err(explain(failure, queue, config)),
    }
}

/// Declares one queue on `channel`, waiting for the broker's answer, and
/// returns how many consumers the broker counts on it.
async fn declare(
    connection: &Connection,
    channel: &Channel,
    queue: &str,
    durable: bool,
    args: &QueueArguments,
) -> Result<u32, Failure> {
    let name = ShortString::try_new(queue).map_err(|_| Failure {
        reply_code: None,
        connection_lost: false,
        text: format!(
            "the name is {} bytes, over the 255-byte AMQP limit",
            queue.len()
        ),
    })?;
    let options = QueueDeclareOptions {
        durable,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(name, options, field_table(args))
        .await
        .map(|queue| queue.consumer_count())
        .map_err(|e| Failure::of(&e, connection.status().connected()))
}

/// A passive declaration of `queue` on `channel`: its counts, or an error
/// when it does not exist (which closes the channel).
pub(crate) fn passive<'a>(
    channel: &'a Channel,
    queue: &str,
) -> impl Future<Output = lapin::Result<lapin::Queue>> + 'a {
    let options = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    channel.queue_declare(short(queue), options, FieldTable::default())
}

/// The arguments as AMQP values: integers as 32-bit when they fit, else
/// 64-bit; strings always as long strings (a short string in a table makes
/// RabbitMQ drop the whole connection). The one conversion: the tool, the
/// benchmarks and the tests declare through it too.
pub fn field_table(args: &QueueArguments) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in args {
        let value = match value {
            ArgumentValue::Integer(n) => match i32::try_from(*n) {
                Ok(small) => AMQPValue::LongInt(small),
                Err(_) => AMQPValue::LongLongInt(*n),
            },
            ArgumentValue::Text(s) => AMQPValue::LongString(LongString::from(s.as_str())),
        };
        table.insert(crate::properties::short(key), value);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_tables_use_only_long_strings_and_fitting_integers() {
        let table = field_table(&topology::hold_queue_arguments(
            "q",
            queuey_core::MAX_DEFERRAL_MS,
        ));
        let get = |k: &str| table.inner().get(k).cloned();
        assert_eq!(
            get("x-message-ttl"),
            Some(AMQPValue::LongInt(2_147_483_647))
        );
        assert_eq!(
            get("x-expires"),
            Some(AMQPValue::LongLongInt(4_294_967_294))
        );
        assert_eq!(
            get("x-dead-letter-exchange"),
            Some(AMQPValue::LongString("".into()))
        );
        assert_eq!(
            get("x-dead-letter-routing-key"),
            Some(AMQPValue::LongString("q".into()))
        );
        assert_eq!(
            get("x-queue-type"),
            Some(AMQPValue::LongString("classic".into()))
        );
        assert!(
            table
                .inner()
                .values()
                .all(|v| !matches!(v, AMQPValue::ShortString(_)))
        );
    }
}
