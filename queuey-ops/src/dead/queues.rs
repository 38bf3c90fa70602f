//! The dead-letter queues one queue name stands for: the queue's own and,
//! for a sharded queue, each shard's.

use serde::Serialize;

use crate::amqp::{Amqp, QueueCounts};
use crate::error::{OpsError, Result};
use crate::shards::{self, Shards};

/// One dead-letter queue, the work queue (or shard) its letters go back
/// to, and its shard (`None`: the lane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DeadQueue {
    pub(crate) dead_queue: String,
    pub(crate) work_queue: String,
    pub(crate) shard: Option<u16>,
}

/// Dead letters of one dead-letter queue among several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct QueueCount {
    pub(crate) dead_queue: String,
    pub(crate) shard: Option<u16>,
    pub(crate) count: usize,
}

/// The dead-letter queues of one queue name, read and acted on as one:
/// the lane's first, then each shard's. Positions (`#N`) count within one
/// queue, so an operation over several refuses them ([`Self::check_ids`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DeadQueues {
    /// The queue named (the lane of a sharded queue).
    pub(crate) queue: String,
    pub(crate) sharded: bool,
    pub(crate) queues: Vec<DeadQueue>,
}

impl DeadQueues {
    /// The dead-letter queues `queue` stands for: with its shards for a
    /// work queue; just `queue` when it ends in `dead_suffix`.
    pub(crate) async fn discover(amqp: &Amqp, queue: &str, dead_suffix: &str) -> Result<Self> {
        let dead_queue = crate::dead_queue_of(queue, dead_suffix)?;
        if dead_queue == queue {
            let work_queue = crate::work_queue_of(queue, dead_suffix)?;
            return Ok(DeadQueues {
                queue: work_queue.clone(),
                sharded: false,
                queues: vec![DeadQueue {
                    dead_queue,
                    work_queue,
                    shard: None,
                }],
            });
        }
        let shards = shards::discover(amqp, queue).await?;
        DeadQueues::of(&shards, dead_suffix)
    }

    /// The dead-letter queues of `shards`' queues.
    pub(crate) fn of(shards: &Shards, dead_suffix: &str) -> Result<Self> {
        let queues = shards
            .members()
            .into_iter()
            .map(|member| {
                Ok(DeadQueue {
                    dead_queue: crate::dead_queue_of(&member.queue, dead_suffix)?,
                    work_queue: member.queue,
                    shard: member.shard,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DeadQueues {
            queue: shards.queue.clone(),
            sharded: shards.is_sharded(),
            queues,
        })
    }

    /// The first dead-letter queue: the lane's, or the only one.
    pub(crate) fn first(&self) -> &str {
        self.queues.first().map_or("", |q| q.dead_queue.as_str())
    }

    /// `emails.dead`, or `emails.dead and the dead-letter queues of 4 shards`.
    pub(crate) fn describe(&self) -> String {
        match self.queues.len() {
            0 | 1 => self.first().to_owned(),
            2 => format!("{} and the dead-letter queue of 1 shard", self.first()),
            n => format!(
                "{} and the dead-letter queues of {} shards",
                self.first(),
                n - 1
            ),
        }
    }

    /// A shard column's text for `shard` (see [`shards::label`]).
    pub(crate) fn label(&self, shard: Option<u16>) -> String {
        shards::label(self.sharded, shard)
    }

    /// The exact counts of each dead-letter queue that exists; when none
    /// does, the first one is [`OpsError::UnknownQueue`].
    pub(crate) async fn present(&self, amqp: &Amqp) -> Result<Vec<(&DeadQueue, QueueCounts)>> {
        let mut present = Vec::with_capacity(self.queues.len());
        for queue in &self.queues {
            let counts = amqp.counts(&queue.dead_queue).await?;
            present.extend(counts.map(|counts| (queue, counts)));
        }
        if present.is_empty() {
            return Err(OpsError::UnknownQueue(self.first().to_owned()));
        }
        Ok(present)
    }

    /// The dead letters in each dead-letter queue that exists, exactly.
    pub(crate) async fn counts(&self, amqp: &Amqp) -> Result<Vec<QueueCount>> {
        Ok(self
            .present(amqp)
            .await?
            .into_iter()
            .map(|(queue, counts)| QueueCount {
                dead_queue: queue.dead_queue.clone(),
                shard: queue.shard,
                count: counts.messages as usize,
            })
            .collect())
    }

    /// Refuses a position (`#N`) among `ids` when there are several
    /// dead-letter queues: it would name one letter in each.
    pub(crate) fn check_ids<'a>(&self, ids: impl IntoIterator<Item = &'a String>) -> Result<()> {
        if self.queues.len() < 2 {
            return Ok(());
        }
        match ids.into_iter().find(|id| id.trim().starts_with('#')) {
            Some(id) => Err(OpsError::Invalid(format!(
                "`{}` is a position, and positions count within one dead-letter queue, while \
                 `{}` is sharded ({}): name the queue the letter is on instead (`{}` for \
                 shard s0, `{}` for the lane, as the listing's SHARD column says), or give its \
                 job id",
                crate::escape::line(id),
                crate::escape::line(&self.queue),
                crate::escape::line(&self.describe()),
                crate::escape::line(&shards::shard_name(&self.queue, 0)),
                crate::escape::line(self.first()),
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sharded_queue_has_a_dead_letter_queue_per_shard_and_positions_are_refused() {
        let shards = Shards {
            queue: "q".into(),
            count: 2,
        };
        let queues = DeadQueues::of(&shards, ".dead").unwrap();
        let names: Vec<(&str, &str, Option<u16>)> = queues
            .queues
            .iter()
            .map(|q| (q.dead_queue.as_str(), q.work_queue.as_str(), q.shard))
            .collect();
        assert_eq!(
            names,
            [
                ("q.dead", "q", None),
                ("q.s0.dead", "q.s0", Some(0)),
                ("q.s1.dead", "q.s1", Some(1)),
            ]
        );
        assert_eq!(
            queues.describe(),
            "q.dead and the dead-letter queues of 2 shards"
        );
        let err = queues
            .check_ids(&["#3".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("position") && err.contains("q.s0"), "{err}");
        assert!(queues.check_ids(&["some-job".to_owned()]).is_ok());
        let one = DeadQueues::of(&Shards::unsharded("q.s1"), ".dead").unwrap();
        assert_eq!(one.describe(), "q.s1.dead");
        assert!(one.check_ids(&["#3".to_owned()]).is_ok());
    }
}
