//! Dead letters: list, group, show, redrive, purge with an export, import.
//!
//! Every read goes through [`Cursor`](crate::browse::Cursor): the queue is
//! read from its head, held, and handed back in order.

mod fingerprint;
mod letter;
mod redrive;
mod show;
mod stats;
mod transfer;

pub use fingerprint::fingerprint;
pub use letter::{DeadLetter, Filter, MALFORMED_REASON, Summary};
pub use redrive::{
    DEFAULT_BATCH, Moved, RedriveOptions, RedrivePlan, RedriveReport, plan_redrive, redrive,
};
pub use show::{Detail, amqp_value_to_json, show};
pub use stats::{Group, Stats, TypeCount, stats};
pub use transfer::{
    ExportRecord, ImportPlan, PurgeReport, import, plan_import, purge_with_export, read_export,
};

use crate::amqp::Amqp;
use crate::browse::browse;
use crate::error::Result;

/// Which end of the queue a listing starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// The head first: the oldest dead letter.
    #[default]
    OldestFirst,
    /// The tail first: the newest dead letter.
    NewestFirst,
}

/// Reads up to `max` dead letters of `dead_queue` (all when `None`), oldest
/// first, leaving the queue as it was.
pub async fn read(amqp: &Amqp, dead_queue: &str, max: Option<usize>) -> Result<Vec<DeadLetter>> {
    let held = browse(amqp, dead_queue, max).await?;
    Ok(held
        .into_iter()
        .map(|h| DeadLetter::new(h.position, h.body, h.properties))
        .collect())
}

/// One page of the dead letters that pass `filter`, in `order`.
pub fn page(
    letters: &[DeadLetter],
    filter: &Filter,
    order: Order,
    offset: usize,
    limit: usize,
) -> Vec<Summary> {
    let matching = letters.iter().filter(|l| filter.matches(l));
    let summaries: Vec<Summary> = match order {
        Order::OldestFirst => matching
            .skip(offset)
            .take(limit)
            .map(|l| l.summary())
            .collect(),
        Order::NewestFirst => matching
            .rev()
            .skip(offset)
            .take(limit)
            .map(|l| l.summary())
            .collect(),
    };
    summaries
}

/// The dead letter that answers to `id`, or [`OpsError::NotFound`](crate::OpsError::NotFound).
pub fn find<'a>(letters: &'a [DeadLetter], dead_queue: &str, id: &str) -> Result<&'a DeadLetter> {
    letters
        .iter()
        .find(|l| l.answers_to(id))
        .ok_or_else(|| crate::OpsError::NotFound {
            queue: dead_queue.to_owned(),
            id: id.to_owned(),
        })
}
