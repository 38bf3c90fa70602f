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

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable};
    use queuey_core::Envelope;

    use super::*;

    fn letter(position: usize, job_type: &str, reason: &str, attempt: u32) -> DeadLetter {
        let payload =
            serde_json::value::to_raw_value(&serde_json::json!({ "p": position })).unwrap();
        let mut env = Envelope::new(job_type, "q", payload);
        env.attempt = attempt;
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death-reason".into(),
            AMQPValue::LongString(reason.into()),
        );
        headers.insert("x-original-queue".into(), AMQPValue::LongString("q".into()));
        headers.insert(
            "x-attempts".into(),
            AMQPValue::LongLongInt(i64::from(attempt)),
        );
        DeadLetter::new(
            position,
            env.encode().unwrap(),
            BasicProperties::default().with_headers(headers),
        )
    }

    fn letters() -> Vec<DeadLetter> {
        vec![
            letter(1, "email", "order 1 not found", 3),
            letter(2, "invoice", "HTTP 503", 1),
            letter(3, "email", "order 22 not found", 2),
            DeadLetter::new(4, b"garbage".to_vec(), BasicProperties::default()),
        ]
    }

    #[test]
    fn pages_run_either_way_and_filters_combine() {
        let all = letters();
        let ids = |page: Vec<Summary>| page.into_iter().map(|s| s.position).collect::<Vec<_>>();
        assert_eq!(
            ids(page(&all, &Filter::all(), Order::OldestFirst, 1, 2)),
            vec![2, 3]
        );
        assert_eq!(
            ids(page(&all, &Filter::all(), Order::NewestFirst, 0, 2)),
            vec![4, 3]
        );
        let emails = Filter {
            job_type: Some("email".into()),
            ..Filter::all()
        };
        assert_eq!(
            ids(page(&all, &emails, Order::OldestFirst, 0, 10)),
            vec![1, 3]
        );
        let narrower = Filter {
            reason: Some("ORDER 22".into()),
            ..emails
        };
        assert_eq!(
            ids(page(&all, &narrower, Order::OldestFirst, 0, 10)),
            vec![3]
        );
        let by_fp = Filter {
            fingerprint: Some("order <n> not found".into()),
            ..Filter::all()
        };
        assert_eq!(
            ids(page(&all, &by_fp, Order::OldestFirst, 0, 10)),
            vec![1, 3]
        );
        let by_position = Filter {
            ids: vec!["#4".into()],
            ..Filter::all()
        };
        assert_eq!(
            ids(page(&all, &by_position, Order::OldestFirst, 0, 10)),
            vec![4]
        );
    }

    #[test]
    fn stats_group_by_fingerprint_and_type_largest_first() {
        let s = stats(&letters());
        assert_eq!((s.total, s.malformed), (4, 1));
        assert_eq!(s.by_fingerprint[0].fingerprint, "order <n> not found");
        assert_eq!(s.by_fingerprint[0].count, 2);
        assert_eq!(
            (
                s.by_fingerprint[0].first_position,
                s.by_fingerprint[0].last_position
            ),
            (1, 3)
        );
        assert_eq!(s.by_job_type[0].job_type, "email");
        assert_eq!(s.by_job_type[0].count, 2);
        assert!(s.by_job_type.iter().any(|t| t.job_type == "(unknown)"));
    }

    #[test]
    fn a_dead_letter_reads_its_headers_and_envelope() {
        let all = letters();
        let l = &all[0];
        assert_eq!(l.reason(), "order 1 not found");
        assert_eq!(l.attempts(), Some(3));
        assert_eq!(l.original_queue().as_deref(), Some("q"));
        assert!(l.answers_to(&l.id()) && l.answers_to("#1"));
        let garbage = &all[3];
        assert!(garbage.is_malformed());
        assert_eq!(garbage.id(), "#4");
        assert_eq!(garbage.reason(), "(no reason)");
        assert!(find(&all, "q.dead", "nope").is_err());
    }
}
