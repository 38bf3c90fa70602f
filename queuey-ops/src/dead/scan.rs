//! One pass over a dead-letter queue, letter by letter.

use std::ops::ControlFlow;

use serde::Serialize;

use crate::amqp::Amqp;
use crate::browse::Cursor;
use crate::dead::{DeadLetter, DeadQueues};
use crate::error::Result;

/// How a pass over a dead-letter queue went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Pass {
    /// Dead letters in the queue when the pass began (exact, from the
    /// broker).
    pub(crate) total: usize,
    /// Dead letters read.
    pub(crate) read: usize,
    /// Whether the pass went to the end of the queue, so that what was
    /// counted over it is exact; `false` when it stopped early.
    pub(crate) complete: bool,
}

/// Reads `dead_queue` from its head, at most `max` letters, and hands each
/// to `visit` until it answers [`ControlFlow::Break`]; then hands every
/// letter back in place.
///
/// Only the letter being visited is in memory (and the [`WINDOW`] read
/// ahead): what `visit` keeps is what the pass costs.
///
/// [`WINDOW`]: crate::browse::WINDOW
pub(crate) async fn scan(
    amqp: &Amqp,
    dead_queue: &str,
    max: Option<usize>,
    mut visit: impl FnMut(DeadLetter) -> ControlFlow<()>,
) -> Result<Pass> {
    let mut cursor = Cursor::open(amqp, dead_queue, max).await?;
    let walked = walk(&mut cursor, &mut visit).await;
    let total = cursor.counts().messages as usize;
    let read = cursor.read();
    cursor.release().await;
    let stopped = walked?;
    let complete = if stopped {
        read >= total
    } else {
        max.is_none_or(|m| m >= total)
    };
    Ok(Pass {
        total,
        read,
        complete,
    })
}

impl DeadQueues {
    /// [`scan`] over every dead-letter queue that exists, one after the
    /// other in order, at most `max` letters in all; each letter handed to
    /// `visit` carries its [`shard`](DeadLetter::shard). The pass stops at
    /// the first [`ControlFlow::Break`].
    ///
    /// The [`Pass`] counts over all of them; [`Pass::complete`] when every
    /// one was read to its end.
    pub(crate) async fn scan(
        &self,
        amqp: &Amqp,
        max: Option<usize>,
        mut visit: impl FnMut(DeadLetter) -> ControlFlow<()>,
    ) -> Result<Pass> {
        let present = self.present(amqp).await?;
        let mut all = Pass {
            total: present.iter().map(|(_, c)| c.messages as usize).sum(),
            read: 0,
            complete: true,
        };
        let mut stopped = false;
        for (queue, counts) in present {
            let left = max.map(|m| m.saturating_sub(all.read));
            if stopped || left == Some(0) {
                all.complete &= counts.messages == 0;
                continue;
            }
            let pass = scan(amqp, &queue.dead_queue, left, |mut letter| {
                letter.shard = queue.shard;
                let flow = visit(letter);
                stopped |= flow.is_break();
                flow
            })
            .await?;
            all.read += pass.read;
            all.complete &= pass.complete;
        }
        Ok(all)
    }
}

/// Whether `visit` stopped the pass.
async fn walk(
    cursor: &mut Cursor,
    visit: &mut impl FnMut(DeadLetter) -> ControlFlow<()>,
) -> Result<bool> {
    while let Some(held) = cursor.next().await? {
        let letter = DeadLetter::new(held.position, held.body, held.properties);
        if visit(letter).is_break() {
            return Ok(true);
        }
    }
    Ok(false)
}
