//! `queuey schedules`.

use crate::Result;
use crate::out::{errln, out};
use crate::schedules::{self, Member, ScheduleInfo};
use crate::time::{self, now_ms};
use clap::Args;

use super::Global;
use super::table::Table;

#[derive(Debug, Args)]
pub(crate) struct SchedulesArgs {
    /// Job queues whose schedules to show [default: every schedule of the vhost].
    #[arg(value_name = "QUEUE")]
    queues: Vec<String>,
}

pub(crate) async fn run(global: &Global, args: SchedulesArgs) -> Result<bool> {
    let mgmt = global.management()?;
    let list = async |amqp: &_| {
        let list = async |fleet: &_| schedules::list(&mgmt, amqp, fleet).await;
        global.with_fleet("schedules", list).await
    };
    let mut listed = global.with_amqp("schedules", list).await?;
    if !args.queues.is_empty() {
        listed.retain(|s| args.queues.contains(&s.job_queue));
    }
    global.print(&listed, || {
        out!("{}", render(&listed, now_ms()));
    });
    for warning in schedules::untrusted_status_warnings(&listed) {
        errln!("{warning}");
    }
    for warning in schedules::future_tick_warnings(&listed) {
        errln!("{warning}");
    }
    let leaderless: Vec<_> = listed
        .iter()
        .filter(|s| s.leader.is_none())
        .map(|s| crate::escape::line(&s.queue))
        .collect();
    if !leaderless.is_empty() {
        errln!(
            "problem: no process leads {}, so its ticks are not fired. Start a process that \
             declares the periodic job, or delete the schedule queue if the job is gone for good.",
            leaderless.join(", ")
        );
    }
    Ok(!leaderless.is_empty())
}

pub(crate) fn render(listed: &[ScheduleInfo], now: i64) -> String {
    if listed.is_empty() {
        return "no schedule queue (`{queue}.periodic.{name}`) in this vhost\n".to_owned();
    }
    let when = |ms: Option<i64>| ms.map_or_else(|| "-".to_owned(), |ms| time::when(ms, now));
    let mut table = Table::new([
        "QUEUE",
        "SCHEDULE",
        "EVERY",
        "LEADER",
        "WAITING",
        "LAST TICK",
        "NEXT TICK",
    ]);
    for s in listed {
        table.row(vec![
            s.job_queue.clone(),
            s.name.clone(),
            s.schedule.clone().unwrap_or_else(|| "-".to_owned()),
            s.leader.as_ref().map_or("none".to_owned(), Member::label),
            s.waiting.len().to_string(),
            if s.last_tick_in_future {
                format!("{} FUTURE", when(s.last_tick_ms))
            } else {
                when(s.last_tick_ms)
            },
            when(s.next_tick_ms),
        ]);
    }
    table.render()
}
