//! The redrive preview: what a redrive would move, and where, before
//! anything moves.
//!
//! The preview reads the queue once and keeps counts, not letters: per
//! target (at most [`MAX_TARGETS`] named, each checked for existence), the
//! first [`PREVIEW_SAMPLES`] moves and the first [`MAX_SAMPLES`](crate::dead::redrive::MAX_SAMPLES) dead letters
//! that cannot move. With a [`limit`](RedriveOptions::limit) it stops once
//! the limit is reached, and its counts are then those of the letters read
//! ([`RedrivePlan::complete`] is false).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::amqp::Amqp;
use crate::dead::redrive::{Decision, Left, MAX_TARGETS, options_for};
use crate::dead::{DeadQueues, RedriveOptions, count_in, scan};
use crate::error::Result;

/// Moves a preview lists one by one; the rest are counted.
pub(crate) const PREVIEW_SAMPLES: usize = 20;

/// What a redrive would move, computed without changing anything.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RedrivePlan {
    /// The work queue the redrive runs for.
    pub(crate) queue: String,
    /// Dead letters in the queue (all of its dead-letter queues) when the
    /// preview began.
    pub(crate) total: usize,
    /// Dead letters read.
    pub(crate) read: usize,
    /// Whether the whole queue was read (the counts are exact); false when
    /// the preview stopped at the limit.
    pub(crate) complete: bool,
    /// Dead letters that would move.
    pub(crate) would_move: usize,
    /// Every target named, with what happens to its dead letters.
    pub(crate) targets: Vec<TargetPlan>,
    /// Dead letters for targets past [`MAX_TARGETS`] (counted, not named or
    /// checked).
    pub(crate) other_targets: usize,
    /// The first [`PREVIEW_SAMPLES`] moves.
    pub(crate) samples: Vec<PlannedMove>,
    /// Matching dead letters that would stay because their original queue
    /// is foreign (another queue than [`queue`](Self::queue)).
    pub(crate) foreign: usize,
    /// The other dead letters that would stay.
    #[serde(flatten)]
    pub(crate) left: Left,
}

/// One target of a redrive preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TargetPlan {
    pub(crate) queue: String,
    /// Matching dead letters for it.
    pub(crate) letters: usize,
    /// Whether they would move there (false: foreign, they stay).
    pub(crate) moves: bool,
    /// Whether it is another queue than the one the redrive runs for (over
    /// a sharded queue: than the work queue of the dead-letter queue its
    /// letters are in).
    pub(crate) foreign: bool,
    /// Whether it exists now.
    pub(crate) exists: bool,
}

/// One planned move.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlannedMove {
    pub(crate) id: String,
    pub(crate) job_type: Option<String>,
    /// Its reason (the start of it).
    pub(crate) reason: String,
    /// The queue it would go to.
    pub(crate) target: String,
}

/// What [`redrive`](crate::dead::redrive) with `options` would move now.
/// Changes nothing.
pub(crate) async fn plan_redrive(
    amqp: &Amqp,
    dead_queue: &str,
    options: &RedriveOptions,
) -> Result<RedrivePlan> {
    let mut plan = RedrivePlan {
        queue: options.queue.clone(),
        ..RedrivePlan::default()
    };
    let mut moving: BTreeMap<String, usize> = BTreeMap::new();
    let mut staying: BTreeMap<String, usize> = BTreeMap::new();
    let pass = scan(amqp, dead_queue, None, |letter| {
        if options.limit.is_some_and(|n| plan.would_move >= n) {
            return ControlFlow::Break(());
        }
        match plan.left.decide(&letter, options) {
            Some(Decision::Move(target)) => {
                plan.would_move += 1;
                if !count_in(&mut moving, &target, 1, MAX_TARGETS) {
                    plan.other_targets += 1;
                }
                if plan.samples.len() < PREVIEW_SAMPLES {
                    plan.samples.push(PlannedMove {
                        id: letter.id(),
                        job_type: letter.job_type(),
                        reason: letter.reason_sample(),
                        target,
                    });
                }
                if options.limit.is_some_and(|n| plan.would_move >= n) {
                    return ControlFlow::Break(());
                }
            }
            Some(Decision::Foreign(original)) => {
                plan.foreign += 1;
                if !count_in(&mut staying, &original, 1, MAX_TARGETS) {
                    plan.other_targets += 1;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    })
    .await?;
    plan.total = pass.total;
    plan.read = pass.read;
    plan.complete = pass.complete;
    let named = moving
        .into_iter()
        .map(|(q, n)| (q, n, true))
        .chain(staying.into_iter().map(|(q, n)| (q, n, false)));
    for (queue, letters, moves) in named {
        if plan.targets.len() >= MAX_TARGETS {
            plan.other_targets += letters;
            continue;
        }
        let exists = amqp.counts(&queue).await?.is_some();
        plan.targets.push(TargetPlan {
            foreign: queue != options.queue,
            queue,
            letters,
            moves,
            exists,
        });
    }
    Ok(plan)
}

impl DeadQueues {
    /// What [`redrive`](DeadQueues::redrive) with `options` would move now,
    /// over every dead-letter queue: each one previewed as
    /// [`plan_redrive`] does with its own work queue as
    /// [`RedriveOptions::queue`], and the previews added up (targets named
    /// once with their letters summed; samples and limits over all).
    /// Changes nothing.
    pub(crate) async fn plan_redrive(
        &self,
        amqp: &Amqp,
        options: &RedriveOptions,
    ) -> Result<RedrivePlan> {
        self.check_ids(&options.filter.ids)?;
        let mut all = RedrivePlan {
            queue: options.queue.clone(),
            complete: true,
            ..RedrivePlan::default()
        };
        for (queue, counts) in self.present(amqp).await? {
            let left = options.limit.map(|n| n.saturating_sub(all.would_move));
            if left == Some(0) {
                all.total += counts.messages as usize;
                all.complete &= counts.messages == 0;
                continue;
            }
            let plan =
                plan_redrive(amqp, &queue.dead_queue, &options_for(options, queue, left)).await?;
            all.add(plan);
        }
        Ok(all)
    }
}

impl RedrivePlan {
    /// Adds the preview of one more dead-letter queue.
    fn add(&mut self, plan: RedrivePlan) {
        self.total += plan.total;
        self.read += plan.read;
        self.complete &= plan.complete;
        self.would_move += plan.would_move;
        self.other_targets += plan.other_targets;
        for target in plan.targets {
            let named = self.targets.len();
            let same = self
                .targets
                .iter_mut()
                .find(|t| t.queue == target.queue && t.moves == target.moves);
            match same {
                Some(same) => same.letters += target.letters,
                None if named < MAX_TARGETS => self.targets.push(target),
                None => self.other_targets += target.letters,
            }
        }
        let room = PREVIEW_SAMPLES.saturating_sub(self.samples.len());
        self.samples.extend(plan.samples.into_iter().take(room));
        self.foreign += plan.foreign;
        self.left.add(plan.left);
    }
}
