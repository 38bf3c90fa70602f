//! The worker's side: publishing a job's result to the address its
//! request carried.

use std::sync::Arc;

use lapin::options::BasicPublishOptions;
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel};
use queuey_core::backend::{Reply, ReplyTo};
use queuey_core::{Error, Uuid};
use tokio::sync::Mutex;

use super::DIRECT_REPLY_TO;
use crate::RabbitMqOptions;
use crate::error::Failure;
use crate::link::Link;
use crate::properties;
use crate::trust::Senders;

/// The reply channel of a backend, opened on the first reply.
pub(crate) struct Responder {
    link: Arc<Link>,
    options: Arc<RabbitMqOptions>,
    /// The channel and the generation of its connection. Held across each
    /// publish, so the frames of two replies never interleave.
    channel: Mutex<Option<(Channel, u64)>>,
    /// Who signs the replies.
    senders: Arc<Senders>,
}

impl Responder {
    /// Replies on `link`; nothing is opened until the first one.
    pub(crate) fn new(
        link: &Arc<Link>,
        options: &Arc<RabbitMqOptions>,
        senders: &Arc<Senders>,
    ) -> Self {
        Responder {
            link: Arc::clone(link),
            options: Arc::clone(options),
            channel: Mutex::new(None),
            senders: Arc::clone(senders),
        }
    }

    /// Publishes `reply`, signed, to the default exchange with `to`'s
    /// address as routing key and its correlation id, within the call
    /// bound. `Ok` means it was written: whether a caller still waits is
    /// unknown, and RabbitMQ drops a reply nobody waits for.
    ///
    /// Only a direct reply-to address (`amq.rabbitmq.reply-to.…`, which
    /// RabbitMQ gives a waiting caller) is answered: a job naming any other
    /// queue as its reply address gets no reply, so nobody can make workers
    /// publish into a queue of their choosing.
    pub(crate) async fn reply(&self, to: &ReplyTo, reply: &Reply) -> Result<(), Error> {
        let what = "sending a job's result to the caller waiting for it";
        if !is_reply_address(to.address()) {
            return Err(Error::invalid_config(format!(
                "{what}: the job's reply address `{}` is not a direct reply-to address \
                 (`{DIRECT_REPLY_TO}.…`), so no reply is sent; only a caller waiting through \
                 `enqueue_and_wait` can be answered",
                queuey_core::escape::Untrusted(to.address())
            )));
        }
        let body = reply.encode().map_err(|source| Error::Encode {
            queue: to.address().to_owned(),
            source,
        })?;
        let limit = self.options.settings().max_message_size();
        crate::error::check_size(to.address(), body.len(), limit)?;
        let mut id = Uuid::encode_buffer();
        let message_id = Uuid::new_v4();
        let properties = self.senders.sign(
            BasicProperties::default()
                .with_correlation_id(properties::short(to.correlation_id()))
                .with_message_id(properties::short(
                    message_id.hyphenated().encode_lower(&mut id),
                )),
            what,
        )?;
        crate::bound::within(self.options.call_timeout, what, async {
            let mut slot = self.channel.lock().await;
            let (channel, generation) = self.channel(&mut slot, what).await?;
            let published = channel
                .basic_publish(
                    ShortString::default(),
                    properties::short(to.address()),
                    // `mandatory` would return every reply as NO_ROUTE.
                    BasicPublishOptions::default(),
                    &body,
                    properties,
                )
                .await;
            match published {
                Ok(_) => Ok(()),
                Err(e) => {
                    *slot = None;
                    let error = Failure::of(&e, channel.status().connected()).into_error(what);
                    self.link.saw(generation, &error);
                    Err(error)
                }
            }
        })
        .await
    }

    /// The reply channel, opened if there is none or its connection is
    /// gone.
    async fn channel(
        &self,
        slot: &mut Option<(Channel, u64)>,
        what: &str,
    ) -> Result<(Channel, u64), Error> {
        if let Some((channel, generation)) = slot.as_ref() {
            let current = self.link.current().map(|c| c.generation);
            if channel.status().connected() && current == Some(*generation) {
                return Ok((channel.clone(), *generation));
            }
        }
        let current = self.link.connection(what).await?;
        let channel = current.connection.create_channel().await.map_err(|e| {
            let error = Failure::of(&e, current.connection.status().connected())
                .into_error("opening the channel for job results");
            self.link.saw(current.generation, &error);
            error
        })?;
        *slot = Some((channel.clone(), current.generation));
        Ok((channel, current.generation))
    }
}

/// Whether `address` is one RabbitMQ's direct reply-to gave a waiting
/// caller: the pseudo-queue's name, a dot, and the channel's own part.
fn is_reply_address(address: &str) -> bool {
    address
        .strip_prefix(DIRECT_REPLY_TO)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|rest| !rest.is_empty())
}

#[cfg(test)]
mod tests {
    use super::is_reply_address;

    #[test]
    fn only_direct_reply_to_addresses_are_answered() {
        assert!(is_reply_address(
            "amq.rabbitmq.reply-to.g1h2AA5yZXBseUAxMjM0NTY3OAAAAAAA"
        ));
        assert!(!is_reply_address("amq.rabbitmq.reply-to"));
        assert!(!is_reply_address("amq.rabbitmq.reply-to."));
        assert!(!is_reply_address("app.emails"));
        assert!(!is_reply_address("queuey.control"));
        assert!(!is_reply_address("amq.rabbitmq.reply-tox.abc"));
    }
}
