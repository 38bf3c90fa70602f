//! One pass over a dead-letter queue, letter by letter.

use std::ops::ControlFlow;

use serde::Serialize;

use crate::amqp::Amqp;
use crate::browse::Cursor;
use crate::dead::{DeadLetter, DeadQueues};
use crate::error::Result;

/// How a pass went: dead letters when it began (exact), read, and whether
/// it reached the end (its counts are exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Pass {
    pub(crate) total: usize,
    pub(crate) read: usize,
    pub(crate) complete: bool,
}

/// Hands `visit` each of at most `max` letters from the head of
/// `dead_queue` until it breaks, then hands them all back.
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
    /// [`scan`] over every dead-letter queue that exists, in order, at most
    /// `max` letters in all, each letter with its shard.
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
