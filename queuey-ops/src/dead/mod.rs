//! Dead letters: list, group, show, redrive, purge with an export, import.
//!
//! Every read goes through a [`Cursor`](crate::browse::Cursor): the queue is
//! read from its head, held, and handed back in order. Each operation keeps
//! only what it reports, so its memory does not grow with the queue:
//!
//! | operation | reads | keeps |
//! |---|---|---|
//! | [`list`](DeadQueues::list) | up to the page's last letter (newest first with a filter: the queue twice) | the page |
//! | [`read_stats`](DeadQueues::read_stats) | the whole queue | aggregates, bounded (see [`StatsBuilder`]) |
//! | [`find`](DeadQueues::find) | up to the letter found (`#N`: N letters) | that letter |
//! | [`plan_redrive`](DeadQueues::plan_redrive), [`plan_purge`](DeadQueues::plan_purge) | the whole queue (a redrive preview stops at its limit) | counts and the first [`PREVIEW_SAMPLES`] |
//! | [`redrive`](DeadQueues::redrive), [`purge_with_export`](DeadQueues::purge_with_export) | the whole queue | counts (a purge: the delivery tags it removes) |
//! | [`scan`](DeadQueues::scan) | until the visitor stops | what the visitor keeps |
//!
//! Each operation reads every dead-letter queue of a queue name, the
//! lane's first; a redrive sends each letter back to the shard it died on.
//!
//! Every read counts as one delivery of each letter handed back: a quorum
//! dead-letter queue has [`SAFE_DELIVERY_LIMIT`](queuey_rabbitmq::topology::SAFE_DELIVERY_LIMIT)
//! (out of reach), or, if older, the broker's default (20 on RabbitMQ 4),
//! which `doctor` and `topology verify` find and `topology apply` fixes.

mod fingerprint;
mod letter;
mod list;
mod plan;
mod purge;
mod queues;
mod redrive;
mod scan;
mod show;
mod stats;
mod transfer;

pub(crate) use fingerprint::fingerprint;
pub(crate) use letter::{DeadLetter, Filter, History, MALFORMED_REASON, Summary};
pub(crate) use list::Order;
pub(crate) use plan::{PREVIEW_SAMPLES, RedrivePlan};
pub(crate) use purge::PurgeReport;
pub(crate) use queues::{DeadQueue, DeadQueues, QueueCount};
#[cfg(test)]
pub(crate) use redrive::redrive;
pub(crate) use redrive::{DEFAULT_BATCH, Destination, Left, MAX_TARGETS, Moved, RedriveOptions};
pub(crate) use scan::scan;
pub(crate) use show::show;
pub(crate) use stats::{MAX_GROUPS, MAX_JOB_TYPES, StatsBuilder};
pub(crate) use transfer::{ExportRecord, TRAILER_KEY, import, plan_import, read_export};

/// Adds `n` to the count of `key` in `map`, which names at most `max`
/// keys; whether `key` is named there (if not, the caller counts it apart).
pub(crate) fn count_in(
    map: &mut std::collections::BTreeMap<String, usize>,
    key: &str,
    n: usize,
    max: usize,
) -> bool {
    if let Some(count) = map.get_mut(key) {
        *count += n;
    } else if map.len() < max {
        map.insert(key.to_owned(), n);
    } else {
        return false;
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
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

    pub(crate) fn letters() -> Vec<DeadLetter> {
        vec![
            letter(1, "email", "order 1 not found", 3),
            letter(2, "invoice", "HTTP 503", 1),
            letter(3, "email", "order 22 not found", 2),
            DeadLetter::new(4, b"garbage".to_vec(), BasicProperties::default()),
        ]
    }

    #[test]
    fn filters_combine() {
        let all = letters();
        let ids = |filter: &Filter| {
            all.iter()
                .filter(|l| filter.matches(l))
                .map(|l| l.position)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&Filter::all()), vec![1, 2, 3, 4]);
        let emails = Filter {
            job_type: Some("email".into()),
            ..Filter::all()
        };
        assert_eq!(ids(&emails), vec![1, 3]);
        let narrower = Filter {
            reason: Some("ORDER 22".into()),
            ..emails
        };
        assert_eq!(ids(&narrower), vec![3]);
        let by_fp = Filter {
            fingerprint: Some("order <n> not found".into()),
            ..Filter::all()
        };
        assert_eq!(ids(&by_fp), vec![1, 3]);
        let by_position = Filter {
            ids: vec!["#4".into()],
            ..Filter::all()
        };
        assert_eq!(ids(&by_position), vec![4]);
    }

    #[test]
    fn stats_group_by_fingerprint_and_type_largest_first() {
        let mut builder = StatsBuilder::new();
        letters().iter().for_each(|l| builder.add(l));
        let s = builder.finish();
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
        assert!(!all.iter().any(|l| l.answers_to("nope")));
    }
}
