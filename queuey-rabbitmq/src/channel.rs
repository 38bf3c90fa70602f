//! Opening and closing the channels the backend uses.

use lapin::options::ConfirmSelectOptions;
use lapin::types::ShortString;
use lapin::{Channel, Connection};
use queuey_core::Error;

use crate::error::Failure;

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

/// Closes `channel` if it is still open (best effort: it is of no further
/// use either way).
pub(crate) async fn close(channel: &Channel) {
    if channel.status().connected() {
        let _ = channel.close(200, ShortString::default()).await;
    }
}

/// Closes `channel` if it is still open, without waiting for the broker.
pub(crate) fn close_later(channel: &Channel) {
    if channel.status().connected() {
        let channel = channel.clone();
        tokio::spawn(async move {
            let _ = channel.close(200, ShortString::default()).await;
        });
    }
}
