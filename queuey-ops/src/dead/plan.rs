//! The redrive preview: one read of the queue keeping counts per target
//! (each checked to exist) and the first few moves; with a limit it stops
//! there and counts what it read.

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
    /// Dead letters when the preview began, and read.
    pub(crate) total: usize,
    pub(crate) read: usize,
    /// Whether the whole queue was read (false: stopped at the limit).
    pub(crate) complete: bool,
    pub(crate) would_move: usize,
    pub(crate) targets: Vec<TargetPlan>,
    /// Dead letters for targets past [`MAX_TARGETS`] (not named or checked).
    pub(crate) other_targets: usize,
    /// The first [`PREVIEW_SAMPLES`] moves.
    pub(crate) samples: Vec<PlannedMove>,
    /// Matching foreign dead letters that would stay.
    pub(crate) foreign: usize,
    #[serde(flatten)]
    pub(crate) left: Left,
}

/// One target of a redrive preview: its matching dead letters, whether
/// they would move (false: foreign), whether it is another queue than the
/// redrive's home, and whether it exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TargetPlan {
    pub(crate) queue: String,
    pub(crate) letters: usize,
    pub(crate) moves: bool,
    pub(crate) foreign: bool,
    pub(crate) exists: bool,
}

/// One planned move, with the start of its reason.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlannedMove {
    pub(crate) id: String,
    pub(crate) job_type: Option<String>,
    pub(crate) reason: String,
    pub(crate) target: String,
}

/// What [`redrive`](crate::dead::redrive) with `options` would move now.
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
    /// [`plan_redrive`] over every dead-letter queue, each with its own
    /// home, added up.
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
