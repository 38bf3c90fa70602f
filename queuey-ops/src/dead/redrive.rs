//! Moving dead letters back to the queue they died on.
//!
//! Moves are AMQP transactions on the channel that read the dead letters:
//! the publishes to the original queue and the acknowledgements of the dead
//! letters are committed together (`tx.commit`), a batch of
//! [`RedriveOptions::batch`] moves at a time. If the process dies before a
//! commit, the broker rolls the batch back and the dead letters are
//! requeued; if it dies after, all of it happened. There is no state in which a
//! job is in both queues or in neither, so an interrupted redrive is resumed
//! by running it again, without a journal and without duplicates. (The
//! broker makes a transaction that touches two queues atomic against client
//! failure; a broker crash in the middle of a commit is outside what
//! AMQP 0-9-1 can promise.)
//!
//! The transaction's `commit-ok` is the broker's confirmation of the
//! publish. Before moving anything to a queue the redrive checks that the
//! queue exists, because a transactional channel cannot also be in
//! publisher-confirm mode to learn of a `mandatory` return.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lapin::options::BasicPublishOptions;
use lapin::types::ShortString;
use serde::Serialize;
use tokio::time::Instant;

use crate::amqp::{Amqp, short};
use crate::browse::Cursor;
use crate::dead::{DeadLetter, Filter, read};
use crate::error::{OpsError, Result};
use crate::headers;

/// Moves per transaction unless told otherwise.
pub const DEFAULT_BATCH: usize = 64;

/// How a redrive runs.
#[derive(Debug, Clone)]
pub struct RedriveOptions {
    /// Which dead letters move.
    pub filter: Filter,
    /// Move at most this many.
    pub limit: Option<usize>,
    /// At most this many moves per second.
    pub rate: Option<f64>,
    /// Keep the attempt counter instead of resetting it to 1.
    pub keep_attempts: bool,
    /// Stamped on every moved message as `queuey-redrive-id`.
    pub redrive_id: String,
    /// Moves committed together in one transaction (at least 1). A batch is
    /// all or nothing; with a `rate`, every move commits on its own.
    pub batch: usize,
    /// Set it to stop after the current batch: what was moved is committed
    /// and reported, [`RedriveReport::stopped`] says so.
    pub stop: Arc<AtomicBool>,
}

impl Default for RedriveOptions {
    fn default() -> Self {
        RedriveOptions {
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

/// What a redrive would move, computed without changing anything.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RedrivePlan {
    /// Dead letters read.
    pub read: usize,
    /// Dead letters that would move, with where they would go.
    pub moves: Vec<PlannedMove>,
    /// Moves per target queue.
    pub by_target: BTreeMap<String, usize>,
    /// Matching dead letters that cannot move: `(id, why)`.
    pub unmovable: Vec<(String, String)>,
}

/// One planned move.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedMove {
    /// The dead letter's id.
    pub id: String,
    /// Its job type.
    pub job_type: Option<String>,
    /// Its reason.
    pub reason: String,
    /// The queue it goes back to.
    pub target: String,
}

/// One dead letter moved.
#[derive(Debug, Clone, Serialize)]
pub struct Moved {
    /// The dead letter's id.
    pub id: String,
    /// The queue it went to.
    pub target: String,
}

/// What a redrive did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RedriveReport {
    /// The redrive id stamped on the moved messages.
    pub redrive_id: String,
    /// Dead letters moved, in order.
    pub moved: Vec<Moved>,
    /// Matching dead letters left in place because they cannot move.
    pub unmovable: Vec<(String, String)>,
    /// Dead letters read but not matching the filter, left in place.
    pub not_matching: usize,
    /// Set when the run stopped early: why.
    pub stopped: Option<String>,
}

/// Why `letter` cannot be redriven, if it cannot.
fn unmovable(letter: &DeadLetter) -> Result<String, String> {
    if letter.is_malformed() {
        return Err("the body is not a queuey envelope; export it, fix it and import it".into());
    }
    letter
        .original_queue()
        .ok_or_else(|| "no original queue (no x-original-queue header)".to_owned())
}

/// What [`redrive`] with `options` would move now. Changes nothing.
pub async fn plan_redrive(
    amqp: &Amqp,
    dead_queue: &str,
    options: &RedriveOptions,
) -> Result<RedrivePlan> {
    let letters = read(amqp, dead_queue, None).await?;
    let mut plan = RedrivePlan {
        read: letters.len(),
        ..RedrivePlan::default()
    };
    for letter in letters.iter().filter(|l| options.filter.matches(l)) {
        if options.limit.is_some_and(|n| plan.moves.len() >= n) {
            break;
        }
        match unmovable(letter) {
            Ok(target) => {
                *plan.by_target.entry(target.clone()).or_default() += 1;
                plan.moves.push(PlannedMove {
                    id: letter.id(),
                    job_type: letter.job_type(),
                    reason: letter.reason(),
                    target,
                });
            }
            Err(why) => plan.unmovable.push((letter.id(), why)),
        }
    }
    Ok(plan)
}

/// The body a redriven job travels with: the attempt counter reset to 1
/// unless `keep_attempts`, everything else (payload included) unchanged.
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

/// Moves the dead letters of `dead_queue` that pass `options` back to their
/// original queues, calling `on_move` after each committed move.
///
/// Reads one pass of the queue as it is when the redrive starts. Stops early
/// (and says why in [`RedriveReport::stopped`]) when an original queue is
/// missing; what was moved until then stays moved.
pub async fn redrive(
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
    let batch = if period.is_some() {
        1
    } else {
        options.batch.max(1)
    };
    let mut report = RedriveReport {
        redrive_id: options.redrive_id.clone(),
        ..RedriveReport::default()
    };
    let mut uncommitted: Vec<Moved> = Vec::new();
    while options
        .limit
        .is_none_or(|n| report.moved.len() + uncommitted.len() < n)
    {
        if options.stop.load(Ordering::Relaxed) {
            report.stopped = Some("interrupted; run the redrive again to move the rest".into());
            break;
        }
        let Some(held) = cursor.next().await? else {
            break;
        };
        let letter = DeadLetter::new(held.position, held.body, held.properties);
        if !options.filter.matches(&letter) {
            report.not_matching += 1;
            continue;
        }
        let target = match unmovable(&letter) {
            Ok(target) => target,
            Err(why) => {
                report.unmovable.push((letter.id(), why));
                continue;
            }
        };
        let present = match exists.get(&target) {
            Some(present) => *present,
            None => {
                let present = amqp.counts(&target).await?.is_some();
                exists.insert(target.clone(), present);
                present
            }
        };
        if !present {
            report.stopped = Some(format!(
                "the original queue `{target}` of {} does not exist; declare it (topology \
                 apply) and run the redrive again",
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
        channel
            .basic_publish(
                ShortString::default(),
                short(&target)?,
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                &body,
                properties,
            )
            .await
            .map_err(|e| OpsError::amqp(what(), e))?;
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
        report.moved.push(moved);
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
        let garbage = DeadLetter::new(2, b"x".to_vec(), BasicProperties::default());
        assert!(
            unmovable(&garbage)
                .unwrap_err()
                .contains("not a queuey envelope")
        );
        assert_eq!(unmovable(&letter).unwrap(), "q");
    }
}
