//! Queue declarations: the work and dead-letter queues on a throwaway
//! channel per `declare`, and hold queues on channels of their own.
//!
//! A refused declaration (`PRECONDITION_FAILED`) closes the channel it ran
//! on, so declarations never share a channel with publishes or consumers.

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection};
use queuey_core::{Error, QueueConfig};

use crate::RabbitMqOptions;
use crate::error::{Failure, code, connection_lost};
use crate::pool::ChannelPool;
use crate::topology::{self, ArgumentValue, HoldQueues, QueueArguments};

/// Declares each work queue and, when enabled, its dead-letter queue, on one
/// fresh channel that is closed afterwards. Stops at the first refusal.
pub(crate) async fn declare_queues(
    connection: &Connection,
    options: &RabbitMqOptions,
    configs: &[QueueConfig],
    mut declared: impl FnMut(&QueueConfig),
) -> Result<(), Error> {
    let channel = new_channel(connection, "opening a channel to declare queues").await?;
    let result = async {
        for config in configs {
            let queue = config.name();
            let dead = options
                .dead_suffix_in_use()
                .map(|suffix| topology::dead_letter_queue_name(queue, suffix));
            let args = topology::work_queue_arguments(config, dead.as_deref());
            declare(
                connection,
                &channel,
                queue,
                config.settings().durable(),
                &args,
            )
            .await
            .map_err(|f| explain(f, queue, config))?;
            if let Some(dead) = dead {
                let args = topology::dead_letter_queue_arguments(config);
                declare(
                    connection,
                    &channel,
                    &dead,
                    config.settings().durable(),
                    &args,
                )
                .await
                .map_err(|f| explain(f, &dead, config))?;
            }
            declared(config);
        }
        Ok(())
    }
    .await;
    if channel.status().connected() {
        // Best effort: the channel is of no further use either way.
        let _ = channel.close(200, ShortString::default()).await;
    }
    result
}

/// Declares one dead-letter queue again (it was found missing at publish
/// time), on a fresh channel that is closed afterwards.
pub(crate) async fn declare_dead_letter_queue(
    connection: &Connection,
    dead: &str,
    config: &QueueConfig,
) -> Result<(), Error> {
    let channel = new_channel(
        connection,
        "opening a channel to declare a dead-letter queue",
    )
    .await?;
    let args = topology::dead_letter_queue_arguments(config);
    let result = declare(
        connection,
        &channel,
        dead,
        config.settings().durable(),
        &args,
    )
    .await
    .map_err(|f| explain(f, dead, config));
    if channel.status().connected() {
        let _ = channel.close(200, ShortString::default()).await;
    }
    result
}

/// How many channels hold queues are declared on.
pub(crate) const HOLD_DECLARATION_CHANNELS: usize = 8;

/// The channels hold queues are declared on: [`HOLD_DECLARATION_CHANNELS`]
/// of them, each used by one declaration at a time, opened on first use
/// (the lowest free one first) and reopened after a refusal closed one.
///
/// A hold publish may need a declaration that waits for the broker's
/// answer, so with a single channel the declarations of all concurrent
/// retries and deferrals of a backend would queue up behind each other,
/// one broker round trip apiece.
#[derive(Debug)]
pub(crate) struct HoldDeclarer {
    pool: ChannelPool,
}

impl HoldDeclarer {
    pub(crate) fn new(channels: usize) -> Self {
        HoldDeclarer {
            pool: ChannelPool::new(channels),
        }
    }

    /// Declares the hold queue `hold` of the family `holds` for `config`'s
    /// queue, waiting for the broker's answer (for a classic hold, only a
    /// waited-for declaration renews the queue's `x-expires` lease).
    pub(crate) async fn declare(
        &self,
        connection: &Connection,
        hold: &str,
        holds: HoldQueues,
        config: &QueueConfig,
        ttl_ms: u64,
    ) -> Result<(), Error> {
        let args = holds.arguments(config.name(), ttl_ms);
        // A quorum queue is always durable; a classic hold lives as long as
        // its work queue would.
        let durable = holds == HoldQueues::Quorum || config.settings().durable();
        let (_permit, mut slot) = self.pool.take().await?;
        let channel = match slot.as_ref() {
            Some(channel) if channel.status().connected() => channel.clone(),
            _ => {
                *slot = None;
                slot.insert(new_channel(connection, "opening a hold-queue channel").await?)
                    .clone()
            }
        };
        let result = declare(connection, &channel, hold, durable, &args).await;
        if !channel.status().connected() {
            *slot = None;
        }
        result.map_err(|f| explain(f, hold, config))
    }

    /// Closes the declarer: later declarations fail with [`Error::ShutDown`].
    pub(crate) fn close(&self) {
        self.pool.close();
    }
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

async fn declare(
    connection: &Connection,
    channel: &Channel,
    queue: &str,
    durable: bool,
    args: &QueueArguments,
) -> Result<(), Failure> {
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
        .map(drop)
        .map_err(|e| Failure::of(&e, connection.status().connected()))
}

/// The arguments as AMQP values: integers as 32-bit when they fit, else
/// 64-bit; strings always as long strings (a short string in a table makes
/// RabbitMQ drop the whole connection).
pub(crate) fn field_table(args: &QueueArguments) -> FieldTable {
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

/// The error for a refused declaration of `queue`, with what to do about it.
fn explain(failure: Failure, queue: &str, config: &QueueConfig) -> Error {
    let what = format!("declaring queue `{queue}`");
    let transient_refused = !config.settings().durable()
        && (failure.reply_code == Some(code::INTERNAL_ERROR) || failure.connection_lost);
    let hint = if transient_refused {
        Some(
            "the queue is transient (durable = false), which RabbitMQ 4.3 and later refuse; \
             declare it durable",
        )
    } else if failure.reply_code == Some(code::PRECONDITION_FAILED) {
        if failure.text.contains("x-queue-type") {
            Some(
                "the queue exists as another queue type, and RabbitMQ cannot change a queue's \
                 type in place; keep its type in the config, or move its jobs to a queue of \
                 the new type (the README's upgrade notes say how)",
            )
        } else if failure.text.contains("x-max-priority") {
            Some(
                "the queue exists with other priority settings (a queue created before priorities \
                 has no x-max-priority); drain and delete it so it can be declared again, or set \
                 max_priority(0) to declare it as before",
            )
        } else if config.is_quorum() {
            Some(
                "a queue of this name exists with other arguments; if it is a classic queue, \
                 RabbitMQ cannot turn it into a quorum queue in place: keep it classic, or move \
                 its jobs to a new quorum queue (the README's upgrade notes say how)",
            )
        } else {
            Some(
                "a queue of this name exists with other arguments, and RabbitMQ never changes \
                 an existing queue's arguments; delete it or use another name",
            )
        }
    } else {
        None
    };
    match hint {
        Some(hint) => Failure {
            text: format!("{}; {hint}", failure.text),
            ..failure
        }
        .into_error(&what),
        None => failure.into_error(&what),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::BackendErrorKind;

    #[test]
    fn field_tables_use_only_long_strings_and_fitting_integers() {
        let table = field_table(&topology::hold_queue_arguments(
            "q",
            topology::MAX_DEFERRAL_MS,
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

    #[test]
    fn refusals_say_what_to_do() {
        let failure = |code, lost, text: &str| Failure {
            reply_code: code,
            connection_lost: lost,
            text: text.to_owned(),
        };
        let config = QueueConfig::new("q");
        let e = explain(
            failure(
                Some(406),
                false,
                "PRECONDITION_FAILED - inequivalent arg 'x-max-priority'",
            ),
            "q",
            &config,
        );
        assert!(matches!(&e, Error::Backend(b) if b.kind() == BackendErrorKind::Refused));
        let text = e.to_string();
        assert!(
            text.starts_with("declaring queue `q`: PRECONDITION_FAILED"),
            "{text}"
        );
        assert!(text.contains("max_priority(0)"), "{text}");

        let e = explain(
            failure(Some(406), false, "inequivalent arg 'x-message-ttl'"),
            "q",
            &config,
        );
        assert!(e.to_string().contains("other arguments"), "{e}");

        let e = explain(
            failure(
                Some(406),
                false,
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': \
                 received the value 'quorum' of type 'longstr' but current is none",
            ),
            "q",
            &config,
        );
        assert!(e.to_string().contains("upgrade notes"), "{e}");

        let transient = QueueConfig::new("q").durable(false);
        let e = explain(failure(Some(541), true, "INTERNAL_ERROR"), "q", &transient);
        assert!(e.to_string().contains("declare it durable"), "{e}");
        assert!(e.is_connection_lost());
    }
}
