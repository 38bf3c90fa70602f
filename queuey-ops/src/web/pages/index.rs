//! `/`: every queue of the dashboard with its counts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;

use super::PageResult;
use crate::holds;
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
    let by_name: BTreeMap<&str, &crate::mgmt::QueueInfo> =
        infos.iter().map(|i| (i.name.as_str(), i)).collect();
    let queues = app.queues_of(&infos);
    let paused = app.fleet.state().await?;
    let now = now_ms();
    let mut body = String::from(
        "<table id=\"queues\"><tr><th>queue</th><th>state</th><th>ready</th><th>unacked</th><th>consumers</th>\
         <th>dead</th><th>held</th><th>publish</th><th>deliver</th><th>ack</th></tr>",
    );
    for q in &queues {
        let info = by_name.get(q.as_str());
        let dead = by_name
            .get(app.dead_queue(q)?.as_str())
            .and_then(|i| i.messages);
        let held: u64 = infos
            .iter()
            .filter(|i| holds::hold_delay(&i.name, q, &app.config.deferred_suffix).is_some())
            .filter_map(|i| i.messages)
            .sum();
        let n = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        let _ = write!(
            body,
            "<tr><td><a href=\"/queue/{}\">{}</a></td><td>{}</td><td class=n>{}</td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td><td class=n>{held}</td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td></tr>",
            seg(q),
            esc(q),
            if paused.is_paused(q) {
                "<span class=bad>paused</span>"
            } else {
                "running"
            },
            n(info.and_then(|i| i.messages_ready)),
            n(info.and_then(|i| i.messages_unacknowledged)),
            n(info.and_then(|i| i.consumers)),
            n(dead),
            rate(info.and_then(|i| i.rate("publish"))),
            rate(info.and_then(|i| i.rate("deliver_get"))),
            rate(info.and_then(|i| i.rate("ack"))),
        );
    }
    body.push_str("</table>");
    if queues.is_empty() {
        body.push_str("<p class=note>No queue with a dead-letter queue found in this vhost.</p>");
    }
    body.push_str(
        "<p class=note>Counts come from the management API's statistics and can lag a few \
         seconds; a queue's own page reads them exactly.</p>",
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
