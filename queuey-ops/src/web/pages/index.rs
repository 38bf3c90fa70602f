//! `/`: every queue of the dashboard with its counts (a sharded queue's:
//! its lane's and every shard's together).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;

use super::PageResult;
use crate::holds;
use crate::mgmt::QueueInfo;
use crate::shards;
use crate::time::now_ms;
use crate::web::App;
use crate::web::chart;
use crate::web::html::{esc, page, seg};

fn rate(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.1}/s"))
}

/// `/`: every queue with its counts.
pub(crate) async fn index(State(app): State<Arc<App>>) -> PageResult {
    let infos = app.mgmt.queues(None).await?;
    let by_name: BTreeMap<&str, &QueueInfo> = infos.iter().map(|i| (i.name.as_str(), i)).collect();
    let queues = app.queues_of(&infos);
    let paused = app.fleet.state().await?;
    let now = now_ms();
    let mut body = String::from(
        "<table id=\"queues\"><tr><th>queue</th><th>state</th><th>ready</th><th>unacked</th><th>consumers</th>\
         <th>dead</th><th>held</th><th>publish</th><th>deliver</th><th>ack</th></tr>",
    );
    for q in &queues {
        let shards = shards::in_listing(q, |name| by_name.contains_key(name));
        let members = shards.members();
        let work: Vec<&QueueInfo> = members
            .iter()
            .filter_map(|m| by_name.get(m.queue.as_str()).copied())
            .collect();
        let dead: Vec<&QueueInfo> = members
            .iter()
            .filter_map(|m| app.dead_queue(&m.queue).ok())
            .filter_map(|dq| by_name.get(dq.as_str()).copied())
            .collect();
        let held: u64 = infos
            .iter()
            .filter(|i| {
                members.iter().any(|m| {
                    holds::hold_delay(&i.name, &m.queue, &app.config.deferred_suffix).is_some()
                })
            })
            .filter_map(|i| i.messages)
            .sum();
        let n = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        let sum = |infos: &[&QueueInfo], f: fn(&QueueInfo) -> Option<u64>| {
            infos.iter().filter_map(|i| f(i)).reduce(|a, b| a + b)
        };
        let rate_of = |stat: &str| {
            work.iter()
                .filter_map(|i| i.rate(stat))
                .reduce(|a, b| a + b)
        };
        let sharded = if shards.is_sharded() {
            format!(" <span class=note>lane and {} shards</span>", shards.count)
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<tr><td><a href=\"/queue/{}\">{}</a>{sharded}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td><td class=n>{held}</td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td></tr>",
            seg(q),
            esc(q),
            if paused.is_paused(q) {
                "<span class=bad>paused</span>"
            } else {
                "running"
            },
            n(sum(&work, |i| i.messages_ready)),
            n(sum(&work, |i| i.messages_unacknowledged)),
            n(sum(&work, |i| i.consumers)),
            n(sum(&dead, |i| i.messages)),
            rate(rate_of("publish")),
            rate(rate_of("deliver_get")),
            rate(rate_of("ack")),
        );
    }
    body.push_str("</table>");
    if queues.is_empty() {
        body.push_str("<p class=note>No queue with a dead-letter queue found in this vhost.</p>");
    }
    body.push_str(
        "<p class=note>Counts come from the management API's statistics and can lag a few \
         seconds; a queue's own page reads them exactly. A sharded queue's counts are those \
         of its lane and every shard together; its page shows each shard.</p>",
    );
    body.push_str(
        "<p><a href=\"/workers\" id=\"workers-link\">Workers and the jobs they run</a> · \
         <a href=\"/schedules\" id=\"schedules-link\">Schedules of periodic jobs</a></p>",
    );
    body.push_str("<h2>Jobs settled per minute</h2>");
    for q in &queues {
        let _ = write!(body, "<h3>{}</h3>", esc(q));
        body.push_str(&chart::minutes(
            &format!("chart-{q}"),
            &app.history.per_minute(q, now),
        ));
    }
    body.push_str(
        "<p class=note>From the workers' heartbeats since this dashboard started: finished, \
         retried, deferred and dead-lettered jobs, minute by minute.</p>",
    );
    Ok(Html(page(
        &format!("Queues on vhost {}", app.mgmt.vhost()),
        &body,
    )))
}
