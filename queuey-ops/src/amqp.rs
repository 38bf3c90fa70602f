//! The AMQP side: one named connection, throwaway channels, passive checks.

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, PublisherConfirm};
use queuey_rabbitmq::RabbitMqOptions;

use crate::error::{OpsError, Result};
use crate::tls::TlsFiles;

/// A RabbitMQ backend on `url`, its connection named `name`, not retried.
pub(crate) async fn backend(
    url: &str,
    tls: &TlsFiles,
    name: &str,
    options: RabbitMqOptions,
) -> Result<queuey_rabbitmq::RabbitMqBackend> {
    let options = options
        .connection_name(name)
        .connect_wait(std::time::Duration::ZERO)
        .tls(tls.amqp()?);
    queuey_rabbitmq::RabbitMqBackend::with_options(url, options)
        .await
        .map_err(OpsError::Connect)
}

/// A queue's ready messages and consumers, as a passive declare reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueCounts {
    pub(crate) messages: u32,
    pub(crate) consumers: u32,
}

/// One named AMQP connection of an operator tool.
#[derive(Debug)]
pub(crate) struct Amqp {
    connection: Connection,
    url: String,
}

impl Amqp {
    /// Connects to `url` as `name`, as the library's backend does.
    pub(crate) async fn connect_tls(url: &str, name: &str, tls: &TlsFiles) -> Result<Self> {
        let options = RabbitMqOptions::default()
            .connection_name(name)
            .tls(tls.amqp()?);
        let connection = queuey_rabbitmq::__private::connect_plain_lapin(url, &options)
            .await
            .map_err(OpsError::Connect)?;
        Ok(Amqp {
            connection,
            url: redact_url(url),
        })
    }

    /// The URL connected to, password masked.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn connection(&self) -> &Connection {
        &self.connection
    }

    pub(crate) async fn channel(&self) -> Result<Channel> {
        self.connection
            .create_channel()
            .await
            .map_err(|e| OpsError::amqp("opening a channel", e))
    }

    /// A new channel in publisher-confirm mode.
    pub(crate) async fn confirm_channel(&self) -> Result<Channel> {
        let channel = self.channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| OpsError::amqp("turning on publisher confirms", e))?;
        Ok(channel)
    }

    /// The counts of `queue`, or `None` when it does not exist (a passive
    /// declare on a throwaway channel; renews a hold's lease).
    pub(crate) async fn counts(&self, queue: &str) -> Result<Option<QueueCounts>> {
        let channel = self.channel().await?;
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = channel
            .queue_declare(short(queue)?, options, FieldTable::default())
            .await;
        match declared {
            Ok(ok) => {
                let _ = channel.close(200, ShortString::default()).await;
                Ok(Some(QueueCounts {
                    messages: ok.message_count(),
                    consumers: ok.consumer_count(),
                }))
            }
            Err(e) if e.to_string().contains("NOT_FOUND") => Ok(None),
            Err(e) => Err(OpsError::amqp(format!("checking queue `{queue}`"), e)),
        }
    }

    /// Declares `queue` exclusive to this connection.
    pub(crate) async fn declare_exclusive(&self, queue: &str) -> Result<()> {
        let channel = self.channel().await?;
        let options = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(short(queue)?, options, FieldTable::default())
            .await
            .map_err(|e| OpsError::amqp(format!("declaring queue `{queue}`"), e))?;
        let _ = channel.close(200, ShortString::default()).await;
        Ok(())
    }

    /// Like [`counts`](Amqp::counts), but a missing queue is
    /// [`OpsError::UnknownQueue`].
    pub(crate) async fn require(&self, queue: &str) -> Result<QueueCounts> {
        self.counts(queue)
            .await?
            .ok_or_else(|| OpsError::UnknownQueue(queue.to_owned()))
    }

    pub(crate) async fn close(self) {
        let _ = self.connection.close(200, ShortString::default()).await;
    }
}

/// Publishes `body` to `queue`, mandatory; a failure is said to have
/// happened while doing `what`.
pub(crate) async fn publish(
    channel: &Channel,
    queue: &str,
    body: &[u8],
    properties: BasicProperties,
    what: impl Fn() -> String,
) -> Result<PublisherConfirm> {
    let options = BasicPublishOptions {
        mandatory: true,
        immediate: false,
    };
    let routing = short(queue)?;
    (channel
        .basic_publish(ShortString::default(), routing, options, body, properties)
        .await)
        .map_err(|e| OpsError::amqp(what(), e))
}

/// Publishes `body` to `queue`, mandatory, and waits for the confirmation;
/// a return or a nack is [`OpsError::Refused`].
pub(crate) async fn publish_confirmed(
    channel: &Channel,
    queue: &str,
    body: &[u8],
    properties: BasicProperties,
) -> Result<()> {
    let what = || format!("publishing to `{queue}`");
    let confirm = publish(channel, queue, body, properties, what)
        .await?
        .await
        .map_err(|e| OpsError::amqp(what(), e))?;
    if confirm.is_nack() {
        return Err(OpsError::Refused(format!(
            "the broker refused a message for `{queue}` (nack)"
        )));
    }
    if confirm.take_message().is_some() {
        return Err(OpsError::Refused(format!(
            "the broker returned a message for `{queue}`: no such queue"
        )));
    }
    Ok(())
}

/// A queue name as an AMQP short string.
pub(crate) fn short(name: &str) -> Result<ShortString> {
    ShortString::try_new(name).map_err(|_| {
        OpsError::Invalid(format!(
            "queue name `{name}` is {} bytes, over the 255-byte AMQP limit",
            name.len()
        ))
    })
}

pub(crate) use queuey_core::uri::redact as redact_url;
pub(crate) use queuey_core::uri::scrub;

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_masked_and_nothing_else_changes() {
        assert_eq!(
            redact_url("amqp://guest:s3cr3t@host:5672/%2f"),
            "amqp://guest:***@host:5672/%2f"
        );
        assert_eq!(redact_url("amqp://host/%2f"), "amqp://host/%2f");
        assert_eq!(redact_url("amqp://user@host"), "amqp://user@host");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("amqp:guest:s3cr3t@host:5672"), "***");
    }
}
