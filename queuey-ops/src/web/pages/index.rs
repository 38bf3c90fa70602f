//! `/`: the fleet's queues with their counts (a sharded queue's: its
//! lane's and every shard's together), and which rule chose them (see
//! `chosen`); `/?all=true` lists every queue of the dashboard.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use maud::{Markup, html};
use queuey_core::control::ControlState;
use serde::Deserialize;

use super::PageResult;
use crate::holds;
use crate::mgmt::QueueInfo;
use crate::queues::{self, Rule};
use crate::shards;
use crate::time::now_ms;
use crate::web::App;
use crate::web::chart;
use crate::web::html::{heads, job_search, page, queue_path, shown};

/// The broker's queues by name.
type ByName<'a> = BTreeMap<&'a str, &'a QueueInfo>;

/// The row of queue `q` (with its shards, found in `names`) and its counts.
fn row(app: &App, names: &ByName<'_>, q: &str, state: &ControlState) -> PageResult {
    let by_name = |name: &str| names.get(name).copied();
    let shards = shards::in_listing(q, |name| by_name(name).is_some());
    let line = queues::line(&shards, &app.config.dead_suffix, state, by_name)?;
    let members = shards.members();
    let suffix = &app.config.deferred_suffix;
    let is_hold = |i: &QueueInfo| {
        (members.iter()).any(|m| holds::hold_delay(&i.name, &m.queue, suffix).is_some())
    };
    let held: u64 = names
        .values()
        .filter(|i| is_hold(i))
        .filter_map(|i| i.messages)
        .sum();
    let count = |n: Option<u64>| n.map_or("-".into(), |n| n.to_string());
    let rate_of = |stat: &str| {
        let work = members.iter().filter_map(|m| by_name(&m.queue));
        let rate = work.filter_map(|i| i.rate(stat)).reduce(|a, b| a + b);
        rate.map_or("-".into(), |r| format!("{r:.1}/s"))
    };
    Ok(html! {
        tr {
            td {
                a href=(queue_path(q, "")) { (shown(q)) }
                @if shards.is_sharded() {
                    " " span.note { "lane and " (shards.count) " shards" }
                }
            }
            td { @if line.paused { span.warn { "paused" } } @else { "running" } }
            td.n { (count(line.ready)) }
            td.n { (count(line.unacked)) }
            td.n { (count(line.consumers)) }
            td.n { (count(line.dead)) }
            td.n { (held) }
            td.n { (rate_of("publish")) }
            td.n { (rate_of("deliver_get")) }
            td.n { (rate_of("ack")) }
        }
    })
}

/// The overview's query.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct IndexQuery {
    /// List every queue of the dashboard, not only the fleet's.
    all: bool,
}

/// The line saying which rule chose the queues listed, with the way to
/// the other list where there is one.
fn chosen_by(app: &App, rule: &Rule) -> Markup {
    let stream = &app.config.control_stream;
    html! {
        p.note #chosen-by {
            @match rule {
                Rule::AllowList => {
                    "Listing the queues this dashboard was started with (--queue); it reads and \
                     changes no other."
                }
                Rule::Fleet { workers, .. } => {
                    "Listing the queues the fleet's " (workers) " worker(s) report consuming in \
                     their heartbeats on " code { (shown(stream)) } ". "
                    a href="/?all=true" #show-all {
                        "List every queue of the vhost that has a dead-letter queue"
                    }
                    "."
                }
                Rule::NoWorkerHeard => {
                    "No worker has sent a heartbeat on " code { (shown(stream)) } " recently, so \
                     this lists every queue of the vhost that has a dead-letter queue, other \
                     teams' included; start the dashboard with --queue to list and act on yours \
                     only."
                }
                Rule::Everything => {
                    "Listing every queue of the vhost that has a dead-letter queue, as asked. "
                    a href="/" #show-fleet { "List only the fleet's queues" } "."
                }
            }
        }
        @if let Rule::Fleet { unlisted, .. } = rule && !unlisted.is_empty() {
            p.note #unlisted {
                "Also consumed, not listed (no dead-letter queue): "
                (shown(&unlisted.join(", "))) "."
            }
        }
    }
}

/// `/`: the fleet's queues (or every one, `?all=true`) with their counts.
pub(crate) async fn index(
    State(app): State<Arc<App>>,
    Query(query): Query<IndexQuery>,
) -> PageResult {
    let infos = app.mgmt.queues(None).await?;
    let names: ByName<'_> = infos.iter().map(|i| (i.name.as_str(), i)).collect();
    let workers = app.fleet.workers().await?;
    let allow_listed = !app.config.queues.is_empty();
    let (queues, rule) = queues::choose(allow_listed, app.queues_of(&infos), &workers, query.all);
    let queues = &queues;
    let state = app.fleet.state().await?;
    let now = now_ms();
    let body = html! {
        (job_search(""))
        table #queues {
            (heads(&[
                "queue", "state", "ready", "unacked", "consumers", "dead", "held", "publish",
                "deliver", "ack",
            ]))
            @for q in queues { (row(&app, &names, q, &state)?) }
        }
        @if queues.is_empty() {
            p.note #no-queues {
                @if matches!(rule, Rule::Fleet { .. }) {
                    "None of the queues the fleet's workers consume has a dead-letter queue."
                } @else {
                    "No queue with a dead-letter queue found in this vhost."
                }
            }
        }
        (chosen_by(&app, &rule))
        p.note {
            "Counts come from the management API's statistics and can lag a few seconds; a \
             queue's own page reads them exactly. A sharded queue's counts are those of its \
             lane and every shard together; its page shows each shard."
        }
        p {
            a href="/workers" #workers-link { "Workers and the jobs they run" }
            " · "
            a href="/schedules" #schedules-link { "Schedules of periodic jobs" }
        }
        h2 { "Jobs settled per minute" }
        @for q in queues {
            h3 { (shown(q)) }
            (chart::minutes(&format!("chart-{q}"), &app.history.per_minute(q, now)))
        }
        p.note {
            "From the workers' heartbeats since this dashboard started: finished, retried, \
             deferred and dead-lettered jobs, minute by minute."
        }
    };
    Ok(page(&format!("Queues on vhost {}", app.mgmt.vhost()), body))
}
