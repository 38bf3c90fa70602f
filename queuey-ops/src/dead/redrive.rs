//! Moving dead letters back to a work queue.
//!
//! By default a redrive moves dead letters only to the work queue it runs
//! for ([`Destination::Home`]); one whose `x-original-queue` names another
//! queue is *foreign* and stays, counted. [`plan_redrive`] previews every
//! target with its count, whether it exists and whether it is foreign.
//!
//! Safety: each batch of publishes and acks of the dead letters is one AMQP
//! transaction on the reading channel, so a job is never in both queues or
//! in neither against client failure, and running an interrupted redrive
//! again resumes it. `commit-ok` confirms the publishes; as a transactional
//! channel cannot see `mandatory` returns, a target is checked to exist
//! first and the redrive stops at the first letter for a missing one. The
//! queue is read in one pass from its head, in constant memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::amqp::{Amqp, publish};
use crate::browse::Cursor;
use crate::dead::{DeadLetter, DeadQueue, DeadQueues, Filter, count_in};
use crate::error::{OpsError, Result};
use crate::headers;

/// Moves per transaction unless told otherwise.
pub(crate) const DEFAULT_BATCH: usize = 64;

/// Where a redrive sends the dead letters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Destination {
    /// To [`RedriveOptions::queue`] only; foreign letters stay.
    #[default]
    Home,
    /// Every dead letter to this queue, whatever its original queue.
    Queue(String),
    /// Each dead letter to its own original queue.
    Original,
}

/// How a redrive runs.
#[derive(Debug, Clone)]
pub(crate) struct RedriveOptions {
    /// The work queue the redrive runs for (per dead-letter queue of a
    /// sharded queue: that shard's).
    pub(crate) queue: String,
    pub(crate) destination: Destination,
    pub(crate) filter: Filter,
    pub(crate) limit: Option<usize>,
    /// At most this many moves per second.
    pub(crate) rate: Option<f64>,
    /// Keep the attempt counter instead of resetting it to 1.
    pub(crate) keep_attempts: bool,
    /// Stamped on every moved message as `queuey-redrive-id`.
    pub(crate) redrive_id: String,
    /// Moves per transaction (at least 1; 1 with a `rate`).
    pub(crate) batch: usize,
    /// Set it to stop after the current batch.
    pub(crate) stop: Arc<AtomicBool>,
}

impl RedriveOptions {
    /// A redrive of every dead letter of `queue` back to `queue`.
    pub(crate) fn new(queue: impl Into<String>) -> Self {
        RedriveOptions {
            queue: queue.into(),
            destination: Destination::Home,
            filter: Filter::all(),
            limit: None,
            rate: None,
            keep_attempts: false,
            redrive_id: uuid::Uuid::new_v4().to_string(),
            batch: DEFAULT_BATCH,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// Foreign targets a report or plan names (further ones are counted only).
pub(crate) const MAX_TARGETS: usize = 100;
/// Unmovable dead letters a report or plan names.
pub(crate) const MAX_SAMPLES: usize = 20;

/// One dead letter moved, and the queue it went to.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Moved {
    pub(crate) id: String,
    pub(crate) target: String,
}

/// What a redrive did.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RedriveReport {
    pub(crate) redrive_id: String,
    pub(crate) moved: usize,
    /// Dead letters moved, per target queue.
    pub(crate) moved_to: BTreeMap<String, usize>,
    /// Matching foreign dead letters left in place.
    pub(crate) foreign: usize,
    /// `foreign`, per original queue (at most [`MAX_TARGETS`] named).
    pub(crate) foreign_targets: BTreeMap<String, usize>,
    #[serde(flatten)]
    pub(crate) left: Left,
    /// Why the run stopped early, when it did.
    pub(crate) stopped: Option<String>,
}

/// The dead letters read and left in place: matching but unmovable (the
/// first [`MAX_SAMPLES`] with why), and not matching.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Left {
    pub(crate) unmovable: usize,
    pub(crate) unmovable_samples: Vec<(String, String)>,
    pub(crate) not_matching: usize,
}

impl Left {
    /// What `options` do with `letter`; `None` (counted here) when it does
    /// not match or cannot move.
    pub(crate) fn decide(
        &mut self,
        letter: &DeadLetter,
        options: &RedriveOptions,
    ) -> Option<Decision> {
        if !options.filter.matches(letter) {
            self.not_matching += 1;
            return None;
        }
        match decide(letter, options) {
            Decision::Unmovable(why) => {
                self.unmovable += 1;
                if self.unmovable_samples.len() < MAX_SAMPLES {
                    self.unmovable_samples.push((letter.id(), why));
                }
                None
            }
            decision => Some(decision),
        }
    }

    /// Adds what one more dead-letter queue left.
    pub(crate) fn add(&mut self, other: Left) {
        self.unmovable += other.unmovable;
        let room = MAX_SAMPLES.saturating_sub(self.unmovable_samples.len());
        self.unmovable_samples
            .extend(other.unmovable_samples.into_iter().take(room));
        self.not_matching += other.not_matching;
    }
}

/// What a redrive does with one matching dead letter: move it to a queue,
/// or leave it, foreign (its original queue) or unmovable (why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Move(String),
    Foreign(String),
    Unmovable(String),
}

/// What `options` do with `letter`.
pub(crate) fn decide(letter: &DeadLetter, options: &RedriveOptions) -> Decision {
    if letter.is_malformed() {
        return Decision::Unmovable(
            "the body is not a queuey envelope; export it, fix it and import it".into(),
        );
    }
    let original = letter.original_queue();
    match (&options.destination, original) {
        (Destination::Queue(to), _) => Decision::Move(to.clone()),
        (Destination::Original, Some(original)) => Decision::Move(original),
        (Destination::Original, None) => {
            Decision::Unmovable("no original queue (no x-original-queue header)".into())
        }
        (Destination::Home, Some(original)) if original != options.queue => {
            Decision::Foreign(original)
        }
        // It is in this queue's dead-letter queue and names no other.
        (Destination::Home, _) => Decision::Move(options.queue.clone()),
    }
}

/// The redriven body: the attempt reset to 1 unless `keep_attempts`.
fn redriven_body(letter: &DeadLetter, keep_attempts: bool) -> Result<Vec<u8>> {
    match &letter.envelope {
        Some(env) if !keep_attempts && env.attempt != 1 => {
            let mut env = env.clone();
            env.attempt = 1;
            env.encode()
                .map_err(|e| OpsError::Invalid(format!("re-encoding job {}: {e}", env.job_id)))
        }
        _ => Ok(letter.body.clone()),
    }
}

/// Moves the dead letters of `dead_queue` that pass `options`, calling
/// `on_move` after each committed move; stops at a missing target.
pub(crate) async fn redrive(
    amqp: &Amqp,
    dead_queue: &str,
    options: &RedriveOptions,
    on_move: &mut (dyn FnMut(&Moved) + Send),
) -> Result<RedriveReport> {
    let mut cursor = Cursor::open(amqp, dead_queue, None).await?;
    let outcome = run(amqp, &mut cursor, options, on_move).await;
    cursor.release().await;
    outcome
}

async fn run(
    amqp: &Amqp,
    cursor: &mut Cursor,
    options: &RedriveOptions,
    on_move: &mut (dyn FnMut(&Moved) + Send),
) -> Result<RedriveReport> {
    let channel = cursor.channel().clone();
    channel
        .tx_select()
        .await
        .map_err(|e| OpsError::amqp("starting a transaction", e))?;
    let period = options
        .rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| Duration::from_secs_f64(1.0 / r));
    let mut next_at = Instant::now();
    let mut exists: HashMap<String, bool> = HashMap::new();
    let batch = period.map_or(options.batch.max(1), |_| 1);
    let mut report = RedriveReport {
        redrive_id: options.redrive_id.clone(),
        ..RedriveReport::default()
    };
    let mut uncommitted: Vec<Moved> = Vec::new();
    while options
        .limit
        .is_none_or(|n| report.moved + uncommitted.len() < n)
    {
        if options.stop.load(Ordering::Relaxed) {
            report.stopped = Some("interrupted; run the redrive again to move the rest".into());
            break;
        }
        let Some(held) = cursor.next().await? else {
            break;
        };
        let letter = DeadLetter::new(held.position, held.body, held.properties);
        let target = match report.left.decide(&letter, options) {
            Some(Decision::Move(target)) => target,
            Some(Decision::Foreign(original)) => {
                report.foreign += 1;
                count_in(&mut report.foreign_targets, &original, 1, MAX_TARGETS);
                continue;
            }
            _ => continue,
        };
        if !exists.contains_key(&target) {
            exists.insert(target.clone(), amqp.counts(&target).await?.is_some());
        }
        if !exists[&target] {
            report.stopped = Some(format!(
                "the target queue `{target}` of {} does not exist; nothing was moved to it. \
                 Declare it (topology apply) and run the redrive again",
                letter.id()
            ));
            break;
        }
        if let Some(period) = period {
            tokio::time::sleep_until(next_at).await;
            next_at = Instant::now().max(next_at) + period;
        }
        let body = redriven_body(&letter, options.keep_attempts)?;
        let properties = letter.properties.clone().with_headers(headers::for_redrive(
            letter.properties.headers().as_ref(),
            &options.redrive_id,
        ));
        let what = || format!("moving {} to `{target}`", letter.id());
        publish(&channel, &target, &body, properties, what).await?;
        cursor.ack(held.tag).await?;
        uncommitted.push(Moved {
            id: letter.id(),
            target,
        });
        if uncommitted.len() >= batch {
            commit(&channel, &mut uncommitted, &mut report, on_move).await?;
        }
    }
    commit(&channel, &mut uncommitted, &mut report, on_move).await?;
    Ok(report)
}

impl DeadQueues {
    /// [`redrive`] over every dead-letter queue in turn, each home to its
    /// own shard, under one id, limit and stop flag; ends at the first that
    /// stopped early.
    pub(crate) async fn redrive(
        &self,
        amqp: &Amqp,
        options: &RedriveOptions,
        on_move: &mut (dyn FnMut(&Moved) + Send),
    ) -> Result<RedriveReport> {
        self.check_ids(&options.filter.ids)?;
        let mut all = RedriveReport {
            redrive_id: options.redrive_id.clone(),
            ..RedriveReport::default()
        };
        for (queue, counts) in self.present(amqp).await? {
            let left = options.limit.map(|n| n.saturating_sub(all.moved));
            if counts.messages == 0 || left == Some(0) {
                continue;
            }
            let report = redrive(
                amqp,
                &queue.dead_queue,
                &options_for(options, queue, left),
                on_move,
            )
            .await?;
            all.add(report);
            if all.stopped.is_some() {
                break;
            }
        }
        Ok(all)
    }
}

/// `options` for one dead-letter queue of several: its home, `limit` moves.
pub(crate) fn options_for(
    options: &RedriveOptions,
    queue: &DeadQueue,
    limit: Option<usize>,
) -> RedriveOptions {
    RedriveOptions {
        queue: queue.work_queue.clone(),
        limit,
        ..options.clone()
    }
}

impl RedriveReport {
    /// Adds the report of one more dead-letter queue.
    fn add(&mut self, report: RedriveReport) {
        self.moved += report.moved;
        for (target, n) in report.moved_to {
            *self.moved_to.entry(target).or_default() += n;
        }
        self.foreign += report.foreign;
        for (original, n) in report.foreign_targets {
            count_in(&mut self.foreign_targets, &original, n, MAX_TARGETS);
        }
        self.left.add(report.left);
        self.stopped = self.stopped.take().or(report.stopped);
    }
}

/// Commits the moves made since the last commit, then reports them.
async fn commit(
    channel: &lapin::Channel,
    uncommitted: &mut Vec<Moved>,
    report: &mut RedriveReport,
    on_move: &mut (dyn FnMut(&Moved) + Send),
) -> Result<()> {
    if uncommitted.is_empty() {
        return Ok(());
    }
    channel.tx_commit().await.map_err(|e| {
        OpsError::amqp(
            format!(
                "committing {} moves (none of them happened; run the redrive again)",
                uncommitted.len()
            ),
            e,
        )
    })?;
    for moved in uncommitted.drain(..) {
        on_move(&moved);
        report.moved += 1;
        *report.moved_to.entry(moved.target).or_default() += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use lapin::BasicProperties;
    use queuey_core::Envelope;

    use super::*;

    #[test]
    fn a_redrive_resets_the_attempt_unless_told_to_keep_it() {
        let payload = serde_json::value::to_raw_value(&serde_json::json!({"k": [1, 2]})).unwrap();
        let mut env = Envelope::new("t", "q", payload);
        env.attempt = 5;
        let letter = DeadLetter::new(1, env.encode().unwrap(), BasicProperties::default());
        let reset = Envelope::decode(&redriven_body(&letter, false).unwrap()).unwrap();
        assert_eq!((reset.attempt, reset.job_id), (1, env.job_id));
        assert_eq!(reset.payload.get(), env.payload.get());
        assert_eq!(redriven_body(&letter, true).unwrap(), letter.body);
    }

    fn letter_from(envelope_queue: &str, original: Option<&str>) -> DeadLetter {
        let payload = serde_json::value::to_raw_value(&serde_json::json!({})).unwrap();
        let env = Envelope::new("t", envelope_queue, payload);
        let mut headers = lapin::types::FieldTable::default();
        if let Some(q) = original {
            headers.insert(
                headers::ORIGINAL_QUEUE.into(),
                lapin::types::AMQPValue::LongString(q.into()),
            );
        }
        let props = BasicProperties::default().with_headers(headers);
        DeadLetter::new(1, env.encode().unwrap(), props)
    }

    #[test]
    fn each_destination_decides_where_a_letter_goes_and_a_foreign_one_stays() {
        use Decision::{Foreign, Move, Unmovable};
        let ours = letter_from("q", Some("q"));
        let theirs = letter_from("q", Some("payments"));
        let by_envelope = letter_from("payments", None);
        let garbage = DeadLetter::new(2, b"x".to_vec(), BasicProperties::default());
        let home = RedriveOptions::new("q");
        let original = RedriveOptions {
            destination: Destination::Original,
            ..RedriveOptions::new("q")
        };
        let to = RedriveOptions {
            destination: Destination::Queue("elsewhere".into()),
            ..RedriveOptions::new("q")
        };
        let m = |q: &str| Move(q.to_owned());
        assert_eq!(decide(&ours, &home), m("q"));
        assert_eq!(decide(&theirs, &home), Foreign("payments".into()));
        assert_eq!(decide(&by_envelope, &home), Foreign("payments".into()));
        assert_eq!(decide(&ours, &original), m("q"));
        assert_eq!(decide(&theirs, &original), m("payments"));
        assert_eq!(decide(&theirs, &to), m("elsewhere"));
        assert_eq!(decide(&ours, &to), m("elsewhere"));
        for options in [&home, &original, &to] {
            assert!(
                matches!(decide(&garbage, options), Unmovable(why) if why.contains("not a queuey envelope"))
            );
        }
    }

    #[test]
    fn targets_past_the_bound_are_counted_but_not_named() {
        let mut map = BTreeMap::new();
        let mut count_target = |target: &str| count_in(&mut map, target, 1, MAX_TARGETS);
        for i in 0..MAX_TARGETS + 3 {
            count_target(&format!("q{i}"));
        }
        assert!(count_target("q0"));
        assert!(!count_target("another"));
        assert_eq!(map.len(), MAX_TARGETS);
        assert_eq!(map["q0"], 2);
    }
}
