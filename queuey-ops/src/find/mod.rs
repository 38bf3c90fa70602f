//! Where one job is, by its id: running on a worker, ready in a work queue,
//! held in a hold queue until its release time, in a suspect queue, or dead
//! with its reason (`queuey job show` and the dashboard's job page).
//!
//! Searched in that order, stopping at the first hit: heartbeats, then
//! queues read from their head (a capped number each, handed back); the
//! [`Answer`] says what was read where. Messages come back redelivered,
//! which a worker's poison guard counts, so work and suspect queues are
//! read only when asked ([`Search::read_ready`]), else counted.

mod answer;
mod look;

use queuey_core::Uuid;
use queuey_core::control::Heartbeat;

use crate::amqp::Amqp;
use crate::error::{OpsError, Result};
use crate::fleet;
use crate::holds;
use crate::mgmt::Management;
use crate::shards::{self, Member};

pub(crate) use answer::{Answer, Place, Role, Searched};
use look::look;

/// Messages a search reads off one queue at most, unless told otherwise.
pub(crate) const DEFAULT_MAX_PER_QUEUE: usize = 10_000;

/// What to search for, and where.
#[derive(Debug, Clone)]
pub(crate) struct Search<'a> {
    pub(crate) job_id: Uuid,
    /// The work queues whose places are searched (shards included).
    pub(crate) queues: &'a [String],
    pub(crate) max_per_queue: usize,
    /// Whether to read the work and suspect queues too.
    pub(crate) read_ready: bool,
    pub(crate) dead_suffix: &'a str,
    pub(crate) deferred_suffix: &'a str,
    pub(crate) suspect_suffix: &'a str,
}

/// The job id in `text`, or an error that says what one looks like.
pub(crate) fn parse_job_id(text: &str) -> Result<Uuid> {
    Uuid::parse_str(text.trim()).map_err(|_| {
        OpsError::Invalid(format!(
            "`{}` is not a job id (a UUID such as 67e55044-10b1-426f-9247-bb680e5fe0c8)",
            crate::escape::line(text)
        ))
    })
}

/// Where `search`'s job is: running among `workers`, else in the first
/// place that holds it, else not found, with what was searched.
pub(crate) async fn find(
    search: &Search<'_>,
    amqp: &Amqp,
    mgmt: &Management,
    workers: &[Heartbeat],
) -> Result<Answer> {
    let mut answer = Answer::new(search, workers.len());
    if let Some((worker, job)) = fleet::running_where(workers, |j| j.job_id == search.job_id).next()
    {
        answer.place = Place::running(worker, job);
        return Ok(answer);
    }
    let mut members: Vec<Member> = Vec::new();
    for queue in search.queues {
        members.extend(shards::discover(amqp, queue).await?.members());
    }
    let max = search.max_per_queue;
    let id = search.job_id;

    for m in &members {
        let role = Role::Work;
        if !search.read_ready {
            answer
                .searched
                .push(Searched::unread(amqp, &m.queue, role, m.shard).await?);
            continue;
        }
        if let Some(hit) = answer.record(look(amqp, &m.queue, role, m.shard, max, id).await?) {
            answer.place = Place::ready(m, hit);
            return Ok(answer);
        }
    }

    for queue in search.queues {
        let shards = shards::discover(amqp, queue).await?;
        // Holds are listed by the management API; without it, say so.
        let listed = match holds::listed_holds(mgmt, &shards, search.deferred_suffix).await {
            Ok(listed) => listed,
            Err(e) => {
                answer.unsearched.push(format!(
                    "the hold queues of {queue} were not searched: they could not be listed ({e})"
                ));
                continue;
            }
        };
        for hold in listed {
            let (name, shard) = (&hold.info.name, hold.member.shard);
            if let Some(hit) = answer.record(look(amqp, name, Role::Hold, shard, max, id).await?) {
                answer.place = Place::held(&hold, hit);
                return Ok(answer);
            }
        }
    }

    for m in &members {
        let suspect =
            queuey_rabbitmq::topology::suspect_queue_name(&m.queue, search.suspect_suffix);
        let role = Role::Suspect;
        if !search.read_ready {
            answer
                .searched
                .push(Searched::unread(amqp, &suspect, role, m.shard).await?);
            continue;
        }
        if let Some(hit) = answer.record(look(amqp, &suspect, role, m.shard, max, id).await?) {
            answer.place = Place::suspect(&suspect, m, hit);
            return Ok(answer);
        }
    }

    for m in &members {
        let dead = crate::dead_queue_of(&m.queue, search.dead_suffix)?;
        if let Some(letter) = answer.record(look::look_dead(amqp, &dead, m.shard, max, id).await?) {
            answer.place = Place::dead(&dead, m, &letter);
            return Ok(answer);
        }
    }
    Ok(answer)
}

impl Answer {
    /// Notes what one look read, and hands back what it found.
    fn record<T>(&mut self, (hit, searched): (Option<T>, Searched)) -> Option<T> {
        self.searched.push(searched);
        hit
    }
}
