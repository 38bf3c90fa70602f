//! What a lane keeps about its publishes in flight, and the sweep that
//! collects their confirmations (rules 2 to 4 of the module docs).

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

use lapin::{Confirmation, PublisherConfirm};
use queuey_core::{BackendErrorKind, Error};
use tokio::sync::oneshot;

use crate::error::backend;

/// A publish whose frames lapin is writing: it resolves to the
/// publish's confirmation once they are on the socket.
pub(super) type Write = Pin<Box<dyn Future<Output = lapin::Result<PublisherConfirm>> + Send>>;

/// Where a publish in flight is.
pub(super) enum Stage {
    /// Its frames are queued (its delivery tag is taken) and being written.
    Writing(Write),
    /// Written; waiting for the broker's confirmation.
    Confirming(PublisherConfirm),
}

/// A publish sent and not yet decided.
pub(super) struct InFlight {
    /// The lane's number for the channel it was sent on.
    pub(super) channel: u64,
    /// Order of sending on the lane.
    pub(super) sequence: u64,
    pub(super) stage: Stage,
    pub(super) queue: String,
    pub(super) message_id: String,
    pub(super) reply: oneshot::Sender<Result<(), Error>>,
}

/// What a confirmation said, before attribution.
pub(super) enum Resolved {
    Acked,
    Nacked,
    NotRequested,
    Failed(lapin::Error),
    /// Writing the frames failed: the channel or connection is not open
    /// (nothing was sent), or it failed while writing.
    Unwritten(lapin::Error),
}

/// A return harvested from some confirmation, kept by `message_id` until
/// its own publish completes.
pub(super) struct Returned {
    pub(super) reply_code: u16,
    pub(super) reply_text: String,
}

/// Polls every outstanding confirmation, repeating until a full pass finds
/// none newly complete (rule 3); resolves once at least one completed.
/// Returns found on any confirmation are recorded by `message_id` (unique,
/// so one record serves every channel in flight).
pub(super) fn sweep<'a>(
    in_flight: &'a mut Vec<InFlight>,
    returned: &'a mut HashMap<String, Returned>,
) -> impl Future<Output = Vec<(InFlight, Resolved)>> + 'a {
    poll_fn(move |cx| {
        let mut completed = Vec::new();
        loop {
            let mut found = false;
            let mut i = 0;
            while i < in_flight.len() {
                match poll_entry(&mut in_flight[i], cx, returned) {
                    Some(resolved) => {
                        completed.push((in_flight.swap_remove(i), resolved));
                        found = true;
                    }
                    None => i += 1,
                }
            }
            if !found {
                break;
            }
        }
        if completed.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(completed)
        }
    })
}

/// Polls one publish: its write first, then its confirmation. A
/// confirmation only resolves after its frames were written (lapin's io
/// thread writes, then reads the broker's answer), so a publish whose
/// confirmation may carry a return is never left behind in `Writing`.
fn poll_entry(
    entry: &mut InFlight,
    cx: &mut Context<'_>,
    returned: &mut HashMap<String, Returned>,
) -> Option<Resolved> {
    if let Stage::Writing(write) = &mut entry.stage {
        match write.as_mut().poll(cx) {
            Poll::Pending => return None,
            Poll::Ready(Err(e)) => return Some(Resolved::Unwritten(e)),
            Poll::Ready(Ok(confirm)) => entry.stage = Stage::Confirming(confirm),
        }
    }
    let Stage::Confirming(confirm) = &mut entry.stage else {
        return None;
    };
    match Pin::new(confirm).poll(cx) {
        Poll::Pending => None,
        Poll::Ready(Ok(Confirmation::Ack(r))) => {
            record(returned, r);
            Some(Resolved::Acked)
        }
        Poll::Ready(Ok(Confirmation::Nack(r))) => {
            record(returned, r);
            Some(Resolved::Nacked)
        }
        Poll::Ready(Ok(Confirmation::NotRequested)) => Some(Resolved::NotRequested),
        Poll::Ready(Err(e)) => Some(Resolved::Failed(e)),
    }
}

fn record(
    returned: &mut HashMap<String, Returned>,
    message: Option<lapin::message::BasicReturnMessage>,
) {
    let Some(message) = message else { return };
    let Some(id) = message.delivery.properties.message_id().as_ref() else {
        // Every message this crate publishes has an id; one without cannot
        // be attributed and is only logged.
        tracing::error!(
            reply_code = message.reply_code,
            "a returned message carries no message id; it cannot be attributed"
        );
        return;
    };
    returned.insert(
        id.as_str().to_owned(),
        Returned {
            reply_code: message.reply_code,
            reply_text: message.reply_text.as_str().to_owned(),
        },
    );
}

/// The error of a publish that was sent and never confirmed.
pub(super) fn uncertain(what: &str, why: &str) -> Error {
    let text = format!(
        "{what}: the channel failed after the message was sent and before the broker \
         confirmed it ({why}); the broker may or may not have it"
    );
    backend(BackendErrorKind::Uncertain, text)
}

/// The error of a publish that was never sent.
pub(super) fn lost(what: &str, e: &lapin::Error) -> Error {
    let text = format!("{what}: the publishing channel is closed ({e}); nothing was sent");
    backend(BackendErrorKind::ConnectionLost, text)
}
