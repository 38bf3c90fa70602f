//! `/workers`: every worker heard from recently and the jobs it runs, like
//! a busy page; long-running jobs stand out and can be cancelled. A
//! dashboard started with `--queue` shows the workers of its queues, and
//! of their jobs only those of its queues.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;

use super::PageResult;
use crate::fleet;
use crate::time::{format_duration_ms, format_ms};
use crate::web::App;
use crate::web::html::{esc, page, post_form};
use crate::web::session::Session;

/// A job running longer than this is highlighted unless `?long=` says
/// otherwise (in seconds).
const LONG: Duration = Duration::from_secs(300);

#[derive(Debug, Deserialize)]
pub(crate) struct WorkersQuery {
    /// Seconds after which a running job is highlighted.
    long: Option<u64>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `/workers`: the workers table, then every running job.
pub(crate) async fn workers(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Query(query): Query<WorkersQuery>,
) -> PageResult {
    let long = query.long.map_or(LONG, Duration::from_secs);
    let mut workers = app.fleet.workers().await?;
    workers.retain(|w| w.queues.iter().any(|q| app.in_scope(q)));
    let mut body = String::from(
        "<table id=\"workers\"><tr><th>worker</th><th>version</th><th>queues</th>\
         <th>paused</th><th>connection</th><th>busy</th><th>up</th><th>last heartbeat</th></tr>",
    );
    for w in &workers {
        let connection = if w.connection == "connected" {
            format!("<span class=ok>{}</span>", esc(&w.connection))
        } else {
            format!("<span class=bad>{}</span>", esc(&w.connection))
        };
        let _ = write!(
            body,
            "<tr class=worker><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{connection}</td>\
             <td class=n>{}/{}</td><td>{}</td><td>{}</td></tr>",
            esc(&fleet::label(w)),
            esc(&w.version),
            esc(&w.queues.join(", ")),
            esc(&if w.paused.is_empty() {
                "-".to_owned()
            } else {
                w.paused.join(", ")
            }),
            w.running.len(),
            w.concurrency,
            esc(&format_duration_ms(
                i64::try_from(w.at_ms.saturating_sub(w.started_at_ms)).unwrap_or(i64::MAX)
            )),
            esc(&format_ms(i64::try_from(w.at_ms).unwrap_or(i64::MAX))),
        );
    }
    body.push_str("</table>");
    if workers.is_empty() {
        body.push_str(
            "<p class=note id=\"no-workers\">No worker has sent a heartbeat in the last few \
             intervals.</p>",
        );
    }
    let _ = write!(
        body,
        "<h2>Busy</h2><table id=\"busy\"><tr><th>job</th><th>type</th><th>queue</th>\
         <th>attempt</th><th>worker</th><th>running for</th><th></th></tr>"
    );
    let csrf = session.csrf.as_str();
    let mut any = false;
    for (worker, job) in fleet::running_where(&workers, |j| app.in_scope(&j.queue)) {
        any = true;
        let running = fleet::running_for(worker, job);
        let class = if running > long { " class=long" } else { "" };
        let flag = if running > long {
            " <span class=bad>long</span>"
        } else {
            ""
        };
        let id = job.job_id.to_string();
        let _ = write!(
            body,
            "<tr{class}><td><code>{}</code></td><td>{}</td><td>{}</td><td class=n>{}</td>\
             <td>{}</td><td>{}{flag}</td><td>{}</td></tr>",
            esc(&id),
            esc(&job.job_type),
            esc(&job.queue),
            job.attempt,
            esc(&fleet::label(worker)),
            esc(&format_duration_ms(ms(running))),
            post_form(
                "/job/cancel",
                csrf,
                &[("job_id", id.as_str())],
                "Cancel…",
                "danger",
                &format!("cancel-{id}")
            ),
        );
    }
    body.push_str("</table>");
    if !any {
        body.push_str("<p class=note>No job is running.</p>");
    }
    let _ = write!(
        body,
        "<p class=note>From the workers' heartbeats (every few seconds); a worker that stops \
         sending them leaves this page after three intervals. Jobs running longer than {} are \
         marked long (<code>?long=SECONDS</code> to change).</p>",
        esc(&format_duration_ms(ms(long)))
    );
    Ok(Html(page("Workers", &body)))
}
