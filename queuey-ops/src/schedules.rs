//! The schedules of periodic jobs on the broker: for each, whether the
//! fleet has a leader, who waits in line, the last tick fired and the next.
//!
//! A schedule is a single-active-consumer queue `{queue}.periodic.{name}`
//! whose active consumer is the leader; the ticks come from the status the
//! leader copies into `….status` (read and handed back).

use queuey_rabbitmq::topology::{
    SCHEDULE_INFIX, SCHEDULE_STATUS_SUFFIX, SINGLE_ACTIVE_CONSUMER, schedule_status_queue_name,
};
use serde::Serialize;
use serde_json::Value;

use crate::amqp::Amqp;
use crate::browse::browse_counted;
use crate::error::{OpsError, Result};
use crate::fleet::Fleet;
use crate::mgmt::{Management, QueueInfo};
use crate::time::now_ms;

/// A process consuming a schedule queue: its connection's name (as the
/// process gave it, else its addresses) and where it connects from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Member {
    pub(crate) consumer_tag: String,
    pub(crate) connection: Option<String>,
    pub(crate) peer_host: Option<String>,
}

impl Member {
    /// Its connection and host, whichever are known, else its consumer tag.
    pub(crate) fn label(&self) -> String {
        match (&self.connection, &self.peer_host) {
            (Some(c), Some(h)) => format!("{c} ({h})"),
            (Some(c), None) => c.clone(),
            (None, Some(h)) => h.clone(),
            (None, None) => self.consumer_tag.clone(),
        }
    }
}

/// One schedule: its queue, the job queue its jobs go to, its leader and
/// those in line, and what the leader's status says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ScheduleInfo {
    pub(crate) queue: String,
    pub(crate) job_queue: String,
    pub(crate) name: String,
    pub(crate) leader: Option<Member>,
    pub(crate) waiting: Vec<Member>,
    /// As the leader describes it (`every 1s`, `cron "0 0 3 * * *" in …`).
    pub(crate) schedule: Option<String>,
    pub(crate) last_tick_ms: Option<i64>,
    pub(crate) next_tick_ms: Option<i64>,
    /// When the leader last wrote its status (at least once a minute).
    pub(crate) status_at_ms: Option<i64>,
    /// The last tick is more than [`FUTURE_TOLERANCE_MS`] past now.
    pub(crate) last_tick_in_future: bool,
    /// The status's sender (`unsigned`: none), when not trusted as a
    /// worker: the status is then not believed.
    pub(crate) untrusted_status_from: Option<String>,
}

/// How far past now a last tick may be (clocks a little apart).
pub(crate) const FUTURE_TOLERANCE_MS: i64 = 60_000;

/// Whether `last_tick_ms` is more than [`FUTURE_TOLERANCE_MS`] past `now_ms`.
pub(crate) fn tick_in_future(last_tick_ms: Option<i64>, now_ms: i64) -> bool {
    last_tick_ms.is_some_and(|tick| tick.saturating_sub(now_ms) > FUTURE_TOLERANCE_MS)
}

/// A warning line for each schedule whose last tick is in the future.
pub(crate) fn future_tick_warnings(listed: &[ScheduleInfo]) -> Vec<String> {
    listed
        .iter()
        .filter(|s| s.last_tick_in_future)
        .map(|s| {
            format!(
                "warning: the last tick of {} is in the future: its leader's clock runs ahead, \
                 or something else wrote its status queue; a leader resumes after its last \
                 tick, so the ticks until then may not fire",
                crate::escape::line(&s.queue)
            )
        })
        .collect()
}

/// A warning line for each schedule whose status came from an untrusted user.
pub(crate) fn untrusted_status_warnings(listed: &[ScheduleInfo]) -> Vec<String> {
    listed
        .iter()
        .filter_map(|s| {
            let from = s.untrusted_status_from.as_deref()?;
            Some(format!(
                "warning: the status of {} was written by `{}`, not a user trusted as a worker: \
                 it is not shown (give the workers' user with --worker-user)",
                crate::escape::line(&s.queue),
                crate::escape::line(from)
            ))
        })
        .collect()
}

/// Whether the management API's queue is a schedule queue.
pub(crate) fn is_schedule_queue(info: &QueueInfo) -> bool {
    split(&info.name).is_some()
        && !info.name.ends_with(SCHEDULE_STATUS_SUFFIX)
        && info.arguments.get(SINGLE_ACTIVE_CONSUMER) == Some(&Value::Bool(true))
}

/// The job queue and the schedule's name of a schedule queue's name.
pub(crate) fn split(queue: &str) -> Option<(&str, &str)> {
    queue
        .split_once(SCHEDULE_INFIX)
        .filter(|(q, name)| !q.is_empty() && !name.is_empty())
}

/// Every schedule of the vhost (a status believed only from a trusted worker).
pub(crate) async fn list(
    mgmt: &Management,
    amqp: &Amqp,
    fleet: &Fleet,
) -> Result<Vec<ScheduleInfo>> {
    let queues = mgmt.queues(Some("\\.periodic\\.")).await?;
    let consumers = mgmt.consumers().await?;
    // Connection addresses to the names the processes gave them.
    let connections = mgmt.connections().await?;
    let given: std::collections::HashMap<&str, &str> = (connections.iter())
        .filter_map(|c| {
            Some((
                c["name"].as_str()?,
                c["client_properties"]["connection_name"].as_str()?,
            ))
        })
        .collect();
    let mut out = Vec::new();
    for info in queues.iter().filter(|i| is_schedule_queue(i)) {
        let Some((job_queue, name)) = split(&info.name) else {
            continue;
        };
        let mut leader = None;
        let mut waiting = Vec::new();
        for c in consumers
            .iter()
            .filter(|c| c["queue"]["name"].as_str() == Some(info.name.as_str()))
        {
            let channel = &c["channel_details"];
            let member = Member {
                consumer_tag: c["consumer_tag"].as_str().unwrap_or_default().to_owned(),
                connection: (channel["connection_name"].as_str())
                    .map(|address| given.get(address).unwrap_or(&address).to_string()),
                peer_host: channel["peer_host"].as_str().map(str::to_owned),
            };
            let active = c["active"].as_bool().unwrap_or(false)
                || c["activity_status"].as_str() == Some("single_active");
            if active && leader.is_none() {
                leader = Some(member);
            } else {
                waiting.push(member);
            }
        }
        let (status, untrusted_status_from) =
            match read_status(amqp, &schedule_status_queue_name(&info.name)).await? {
                Some((_, sender)) if !fleet.trusts_worker(sender.as_deref()) => {
                    (None, Some(sender.unwrap_or_else(|| "unsigned".to_owned())))
                }
                Some((status, _)) => (status, None),
                None => (None, None),
            };
        let status = status.unwrap_or_default();
        let field = |key: &str| status[key].as_i64();
        let last_tick_ms = field("last_tick_ms");
        out.push(ScheduleInfo {
            queue: info.name.clone(),
            job_queue: job_queue.to_owned(),
            name: name.to_owned(),
            leader,
            waiting,
            schedule: status["schedule"].as_str().map(str::to_owned),
            last_tick_ms,
            last_tick_in_future: tick_in_future(last_tick_ms, now_ms()),
            next_tick_ms: field("next_tick_ms"),
            status_at_ms: field("at_ms"),
            untrusted_status_from,
        });
    }
    out.sort_by(|a, b| a.queue.cmp(&b.queue));
    Ok(out)
}

/// A schedule's status (`None` inside: not JSON) and its sender, read and
/// handed back; `None` when there is none.
async fn read_status(amqp: &Amqp, queue: &str) -> Result<Option<(Option<Value>, Option<String>)>> {
    let held = match browse_counted(amqp, queue, Some(1)).await {
        Ok((held, _)) => held,
        Err(OpsError::UnknownQueue(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(held.into_iter().next().map(|status| {
        let sender = status
            .properties
            .user_id()
            .as_ref()
            .map(|u| u.as_str().to_owned());
        (serde_json::from_slice(&status.body).ok(), sender)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_ticking_in_the_future_gets_a_warning() {
        let schedule = |queue: &str, ahead: bool| ScheduleInfo {
            queue: queue.to_owned(),
            job_queue: "q".to_owned(),
            name: "beat".to_owned(),
            leader: None,
            waiting: vec![],
            schedule: None,
            last_tick_ms: None,
            next_tick_ms: None,
            status_at_ms: None,
            last_tick_in_future: ahead,
            untrusted_status_from: None,
        };
        let warnings = future_tick_warnings(&[
            schedule("q.periodic.beat", false),
            schedule("q.periodic.\u{1b}[2Kx", true),
        ]);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .starts_with(r"warning: the last tick of q.periodic.\e[2Kx is in the future"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn a_last_tick_more_than_a_minute_ahead_is_in_the_future() {
        let now = 1_800_000_000_000;
        assert!(!tick_in_future(None, now));
        assert!(!tick_in_future(Some(now - 3_600_000), now));
        assert!(!tick_in_future(Some(now + FUTURE_TOLERANCE_MS), now));
        assert!(tick_in_future(Some(now + FUTURE_TOLERANCE_MS + 1), now));
        assert!(tick_in_future(Some(i64::MAX), i64::MIN));
    }

    #[test]
    fn schedule_queue_names_split_into_the_job_queue_and_the_name() {
        assert_eq!(
            split("app.maintenance.periodic.nightly-cleanup"),
            Some(("app.maintenance", "nightly-cleanup"))
        );
        assert_eq!(split("app.maintenance"), None);
        assert_eq!(split(".periodic.x"), None);
    }
}
