//! What a search answers: where the job is, what was read to find out, and
//! the same in sentences (unescaped) for the tool and the dashboard.

use queuey_core::Uuid;
use queuey_core::control::{Heartbeat, Progress, RunningJob};
use serde::Serialize;

use super::Search;
use crate::amqp::Amqp;
use crate::browse::Held;
use crate::dead::DeadLetter;
use crate::error::Result;
use crate::holds::Listed;
use crate::shards::Member;
use crate::time::{format_duration_ms, format_ms, now_ms, when};

/// The job's message, found in a queue.
#[derive(Debug)]
pub(crate) struct Hit {
    pub(crate) held: Held,
    /// Its envelope, when the body is one.
    pub(crate) envelope: Option<queuey_core::Envelope>,
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum Place {
    /// A worker's heartbeat lists it running.
    Running {
        queue: String,
        /// The worker's label: its connection's name and `host:pid`.
        worker: String,
        worker_id: Uuid,
        job_type: String,
        attempt: u32,
        started_at_ms: u64,
        /// The heartbeat's time: what it says is as of then.
        heartbeat_at_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        progress: Option<Progress>,
    },
    /// Waiting for a worker in a work queue (or a shard of one).
    Ready {
        queue: String,
        shard: Option<u16>,
        /// 1-based, from the head of the queue.
        position: usize,
        job_type: Option<String>,
        attempt: Option<u32>,
    },
    /// Waiting in a hold queue until its release time.
    Held {
        hold: String,
        /// The work queue (or shard) it goes back to.
        queue: String,
        shard: Option<u16>,
        /// `quorum` or `classic`.
        kind: &'static str,
        delay_ms: u64,
        /// When it is due back (its `queuey-due-at` header).
        due_at_ms: Option<i64>,
        position: usize,
        job_type: Option<String>,
        attempt: Option<u32>,
    },
    /// In the poison guard's suspect queue: it came back unsettled more
    /// than once and runs alone next.
    Suspect {
        suspect_queue: String,
        queue: String,
        shard: Option<u16>,
        position: usize,
        job_type: Option<String>,
        attempt: Option<u32>,
    },
    /// In a dead-letter queue.
    Dead {
        dead_queue: String,
        queue: String,
        shard: Option<u16>,
        position: usize,
        reason: String,
        attempts: Option<i64>,
        job_type: Option<String>,
    },
    /// In none of the places searched.
    NotFound,
}

impl Place {
    pub(super) fn running(worker: &Heartbeat, job: &RunningJob) -> Self {
        Place::Running {
            queue: job.queue.clone(),
            worker: crate::fleet::label(worker),
            worker_id: worker.worker_id,
            job_type: job.job_type.clone(),
            attempt: job.attempt,
            started_at_ms: job.started_at_ms,
            heartbeat_at_ms: worker.at_ms,
            progress: job.progress.clone(),
        }
    }

    pub(super) fn ready(member: &Member, hit: Hit) -> Self {
        Place::Ready {
            queue: member.queue.clone(),
            shard: member.shard,
            position: hit.held.position,
            job_type: hit.envelope.as_ref().map(|e| e.job_type.clone()),
            attempt: hit.envelope.as_ref().map(|e| e.attempt),
        }
    }

    pub(super) fn held(hold: &Listed, hit: Hit) -> Self {
        let headers = hit.held.properties.headers().as_ref();
        Place::Held {
            hold: hold.info.name.clone(),
            queue: hold.member.queue.clone(),
            shard: hold.member.shard,
            kind: match hold.family {
                queuey_rabbitmq::HoldQueues::Classic => "classic",
                _ => "quorum",
            },
            delay_ms: hold.delay_ms,
            due_at_ms: crate::headers::integer(headers, crate::headers::DUE_AT),
            position: hit.held.position,
            job_type: hit.envelope.as_ref().map(|e| e.job_type.clone()),
            attempt: hit.envelope.as_ref().map(|e| e.attempt),
        }
    }

    pub(super) fn suspect(suspect_queue: &str, member: &Member, hit: Hit) -> Self {
        Place::Suspect {
            suspect_queue: suspect_queue.to_owned(),
            queue: member.queue.clone(),
            shard: member.shard,
            position: hit.held.position,
            job_type: hit.envelope.as_ref().map(|e| e.job_type.clone()),
            attempt: hit.envelope.as_ref().map(|e| e.attempt),
        }
    }

    pub(super) fn dead(dead_queue: &str, member: &Member, letter: &DeadLetter) -> Self {
        Place::Dead {
            dead_queue: dead_queue.to_owned(),
            queue: member.queue.clone(),
            shard: member.shard,
            position: letter.position,
            reason: letter.reason(),
            attempts: letter.attempts(),
            job_type: letter.job_type(),
        }
    }
}

/// The kind of queue a search read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    Work,
    Hold,
    Suspect,
    Dead,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Work => "work queue",
            Role::Hold => "hold",
            Role::Suspect => "suspect queue",
            Role::Dead => "dead-letter queue",
        }
    }
}

/// One queue a search looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Searched {
    pub(crate) queue: String,
    pub(crate) role: Role,
    pub(crate) shard: Option<u16>,
    pub(crate) exists: bool,
    /// Messages in it when the search looked (exact).
    pub(crate) messages: u64,
    pub(crate) read: u64,
    pub(crate) was_read: bool,
    /// The read stopped before the end without finding the job.
    pub(crate) partly_read: bool,
}

impl Searched {
    pub(super) fn absent(queue: &str, role: Role, shard: Option<u16>) -> Self {
        Searched {
            queue: queue.to_owned(),
            role,
            shard,
            exists: false,
            messages: 0,
            read: 0,
            was_read: false,
            partly_read: false,
        }
    }

    pub(super) fn read(
        queue: &str,
        role: Role,
        shard: Option<u16>,
        messages: u64,
        read: u64,
        found: bool,
    ) -> Self {
        Searched {
            exists: true,
            messages,
            read,
            was_read: true,
            partly_read: !found && read < messages,
            ..Searched::absent(queue, role, shard)
        }
    }

    /// A queue counted, not read.
    pub(super) async fn unread(
        amqp: &Amqp,
        queue: &str,
        role: Role,
        shard: Option<u16>,
    ) -> Result<Self> {
        Ok(match amqp.counts(queue).await? {
            Some(counts) => Searched {
                exists: true,
                messages: u64::from(counts.messages),
                ..Searched::absent(queue, role, shard)
            },
            None => Searched::absent(queue, role, shard),
        })
    }

    /// One line: the queue, its role, and what was read of it.
    pub(crate) fn line(&self) -> String {
        let shard = self
            .shard
            .map(|s| format!(", shard s{s}"))
            .unwrap_or_default();
        let what = if !self.exists {
            "absent".to_owned()
        } else if !self.was_read {
            format!(
                "{} job(s), not read (--ready reads work and suspect queues)",
                self.messages
            )
        } else if self.partly_read {
            format!(
                "read {} of {} (partly read: raise --max-per-queue to read more)",
                self.read, self.messages
            )
        } else {
            format!("read {} of {}", self.read, self.messages)
        };
        format!("{} ({}{shard}): {what}", self.queue, self.role.as_str())
    }
}

/// Where a job is, and what was read to find out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Answer {
    pub(crate) job_id: Uuid,
    #[serde(flatten)]
    pub(crate) place: Place,
    /// Workers whose heartbeats were searched for it.
    pub(crate) workers_heard: usize,
    /// The queues looked at, in order.
    pub(crate) searched: Vec<Searched>,
    pub(crate) max_per_queue: usize,
    /// Places that could not be searched, and why.
    pub(crate) unsearched: Vec<String>,
}

impl Answer {
    pub(super) fn new(search: &Search<'_>, workers_heard: usize) -> Self {
        Answer {
            job_id: search.job_id,
            place: Place::NotFound,
            workers_heard,
            searched: Vec::new(),
            max_per_queue: search.max_per_queue,
            unsearched: Vec::new(),
        }
    }

    /// Whether the job was found.
    pub(crate) fn found(&self) -> bool {
        self.place != Place::NotFound
    }

    /// Messages read off queues in all.
    pub(crate) fn messages_read(&self) -> u64 {
        self.searched.iter().map(|s| s.read).sum()
    }

    /// The first line: where the job is.
    pub(crate) fn headline(&self) -> String {
        let id = self.job_id;
        let now = now_ms();
        let of = |job_type: &Option<String>, attempt: Option<u32>| {
            let types = job_type.iter().map(|t| format!("type {t}"));
            let parts: Vec<String> = types
                .chain(attempt.map(|a| format!("attempt {a}")))
                .collect();
            if parts.is_empty() {
                String::new()
            } else {
                format!(" ({})", parts.join(", "))
            }
        };
        let shard =
            |shard: &Option<u16>| shard.map(|s| format!(" (shard s{s})")).unwrap_or_default();
        match &self.place {
            Place::Running {
                queue,
                worker,
                job_type,
                attempt,
                started_at_ms,
                progress,
                ..
            } => {
                let progress = progress
                    .as_ref()
                    .map(|p| format!(", at {p}"))
                    .unwrap_or_default();
                format!(
                    "job {id} is running on worker {worker} (queue {queue}, type {job_type}, \
                     attempt {attempt}), started {}{progress}",
                    when(*started_at_ms, now)
                )
            }
            Place::Ready {
                queue,
                shard: s,
                position,
                job_type,
                attempt,
            } => format!(
                "job {id}{} is ready in {queue}{}, at position {position}: waiting for a worker",
                of(job_type, *attempt),
                shard(s)
            ),
            Place::Held {
                hold,
                queue,
                kind,
                delay_ms,
                due_at_ms,
                job_type,
                attempt,
                ..
            } => {
                let until = match due_at_ms {
                    Some(due) => format!("until {}", when(*due, now)),
                    None => format!(
                        "for {} from when it entered (it carries no due time)",
                        format_duration_ms(*delay_ms)
                    ),
                };
                format!(
                    "job {id}{} is held in {hold} (a {} {kind} hold) {until}; then it goes back \
                     to {queue}",
                    of(job_type, *attempt),
                    format_duration_ms(*delay_ms)
                )
            }
            Place::Suspect {
                suspect_queue,
                queue,
                position,
                job_type,
                attempt,
                ..
            } => format!(
                "job {id}{} is in the suspect queue {suspect_queue} of {queue}, at position \
                 {position}: it came back unsettled more than once (its worker died or lost its \
                 connection) and runs alone there next",
                of(job_type, *attempt)
            ),
            Place::Dead {
                dead_queue,
                queue,
                reason,
                attempts,
                job_type,
                ..
            } => {
                let attempts = attempts
                    .map(|a| format!(" after {a} attempt(s)"))
                    .unwrap_or_default();
                format!(
                    "job {id}{} is dead in {dead_queue} (queue {queue}){attempts}; reason: \
                     {reason}",
                    of(job_type, None)
                )
            }
            Place::NotFound => format!("job {id} was not found"),
        }
    }

    /// Every line of the answer: the headline, then what was searched and
    /// what the answer does not cover.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut lines = vec![self.headline()];
        match &self.place {
            Place::Dead {
                queue, dead_queue, ..
            } => lines.push(format!(
                "`queuey dead show {queue} {}` shows the letter (in {dead_queue}); `queuey dead \
                 redrive {queue} --id {}` sends it back",
                self.job_id, self.job_id
            )),
            Place::Running {
                heartbeat_at_ms, ..
            } => lines.push(format!(
                "as of the worker's heartbeat at {}",
                format_ms(*heartbeat_at_ms)
            )),
            _ => {}
        }
        let read = self.messages_read();
        lines.push(format!(
            "searched: the heartbeats of {} worker(s), then {} queue(s), {read} message(s) read \
             (at most {} a queue) and handed back",
            self.workers_heard,
            self.searched.len(),
            self.max_per_queue
        ));
        for searched in &self.searched {
            lines.push(format!("  {}", searched.line()));
        }
        for unsearched in &self.unsearched {
            lines.push(format!("  {unsearched}"));
        }
        if !self.found() {
            lines.push(
                "a job that finished leaves no trace on the broker (unless it had a result \
                 waiting for its caller), and a job a worker has taken but not started \
                 (prefetched) is in no queue a read can see"
                    .to_owned(),
            );
            if self
                .searched
                .iter()
                .any(|s| s.exists && !s.was_read && s.messages > 0)
            {
                lines.push(
                    "work and suspect queues were not read: --ready reads them, which marks \
                     every job read redelivered (a worker's poison guard then sends it to the \
                     back of its queue)"
                        .to_owned(),
                );
            }
        }
        lines
    }
}
