//! Opening and closing the channels the backend uses.

use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Connection, Consumer};
use queuey_core::Error;

use crate::error::Failure;
use crate::properties::short;

/// Every confirmed publish is `mandatory`: a message no queue takes comes
/// back, and fails its publish.
pub(crate) const MANDATORY: BasicPublishOptions = BasicPublishOptions {
    mandatory: true,
    immediate: false,
};

/// Opens a channel on `connection` in confirm mode; `what` names the step
/// in an error.
pub(crate) async fn open_confirmed(connection: &Connection, what: &str) -> Result<Channel, Error> {
    let fail = |e: lapin::Error| Failure::of(&e, connection.status().connected()).into_error(what);
    let channel = connection.create_channel().await.map_err(fail)?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(fail)?;
    Ok(channel)
}

/// Consumes `queue` on `channel` as `tag` with `arguments`, acknowledging
/// by hand, at most `prefetch` deliveries unacknowledged.
pub(crate) async fn consume(
    channel: &Channel,
    queue: &str,
    tag: &str,
    prefetch: u16,
    arguments: FieldTable,
) -> lapin::Result<Consumer> {
    let qos = BasicQosOptions { global: false };
    channel.basic_qos(prefetch, qos).await?;
    let options = BasicConsumeOptions::default();
    let (queue, tag) = (short(queue), short(tag));
    channel.basic_consume(queue, tag, options, arguments).await
}

/// Closes `channel` if it is still open (best effort: it is of no further
/// use either way).
pub(crate) async fn close(channel: &Channel) {
    if channel.status().connected() {
        let _ = channel.close(200, ShortString::default()).await;
    }
}

/// Closes `channel` if it is still open, without waiting for the broker
/// (nor trying, once no runtime is left to do it).
pub(crate) fn close_later(channel: &Channel) {
    if channel.status().connected()
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        let channel = channel.clone();
        runtime.spawn(async move {
            let _ = channel.close(200, ShortString::default()).await;
        });
    }
}
