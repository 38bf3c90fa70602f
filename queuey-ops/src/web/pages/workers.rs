//! `/workers`: every worker heard from recently and the jobs it runs, like
//! a busy page, each with the progress its handler last reported;
//! long-running jobs stand out and can be cancelled. A dashboard started
//! with `--queue` shows the workers of its queues, and of their jobs only
//! those of its queues.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Query, State};
use maud::html;
use serde::Deserialize;

use super::PageResult;
use crate::fleet;
use crate::time::{format_duration_ms, format_ms};
use crate::web::App;
use crate::web::html::{Tone, heads, nav, page, post_form, shown};
use crate::web::session::Session;

/// A job running longer than this is highlighted unless `?long=` says
/// otherwise (in seconds).
const LONG: Duration = Duration::from_secs(300);

#[derive(Debug, Deserialize)]
pub(crate) struct WorkersQuery {
    /// Seconds after which a running job is highlighted.
    long: Option<u64>,
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
    let running: Vec<_> = fleet::running_where(&workers, |j| app.in_scope(&j.queue))
        .map(|(worker, job)| (worker, job, fleet::running_for(worker, job)))
        .collect();
    let tenants = fleet::running_by_tenant(&workers, |j| app.in_scope(&j.queue));
    let limits = fleet::limits_by_key(&workers);
    let csrf = session.csrf.as_str();
    let body = html! {
        (nav(None))
        table #workers {
            (heads(&[
                "worker", "version", "queues", "paused", "connection", "busy", "up",
                "last heartbeat",
            ]))
            @for w in &workers {
                tr.worker {
                    td { (shown(&fleet::label(w))) }
                    td { (shown(&w.version)) }
                    td { (shown(&w.queues.join(", "))) }
                    td {
                        @if w.paused.is_empty() { "-" } @else { (shown(&w.paused.join(", "))) }
                    }
                    td {
                        span class=(if w.connection == "connected" { "ok" } else { "bad" }) {
                            (shown(&w.connection))
                        }
                    }
                    td.n { (w.running.len()) "/" (w.concurrency) }
                    td {
                        (format_duration_ms(w.at_ms.saturating_sub(w.started_at_ms)))
                    }
                    td { (format_ms(w.at_ms)) }
                }
            }
        }
        @if workers.is_empty() {
            p.note #no-workers {
                "No worker has sent a heartbeat in the last few intervals."
            }
        }
        h2 { "Busy" }
        table #busy {
            (heads(&[
                "job", "type", "queue", "tenant", "attempt", "worker", "running for", "progress",
                "",
            ]))
            @for (worker, job, running) in &running {
                @let id = job.job_id.to_string();
                tr class=[(*running > long).then_some("long")] {
                    td { code { (id) } }
                    td { (shown(&job.job_type)) }
                    td { (shown(&job.queue)) }
                    td { (shown(job.tenant.as_deref().unwrap_or("-"))) }
                    td.n { (job.attempt) }
                    td { (shown(&fleet::label(worker))) }
                    td {
                        (format_duration_ms(running.as_millis()))
                        @if *running > long { " " span.bad { "long" } }
                    }
                    // A bar, its percentage and its handler's message;
                    // `-` before its first report.
                    td #{ "progress-" (id) } {
                        @match &job.progress {
                            Some(p) => {
                                progress max="100" value=(p.percent) { (p.percent) "%" }
                                span.progress { (shown(&p.to_string())) }
                            }
                            None => "-",
                        }
                    }
                    td {
                        (post_form(
                            "/job/cancel",
                            csrf,
                            &[("job_id", id.as_str())],
                            "Cancel…",
                            Tone::Danger,
                            &format!("cancel-{id}"),
                        ))
                    }
                }
            }
        }
        @if running.is_empty() {
            p.note { "No job is running." }
        }
        @if !tenants.is_empty() {
            h2 { "Tenants" }
            table #tenants {
                (heads(&["tenant", "queue", "running"]))
                @for (tenant, queue, count) in &tenants {
                    tr {
                        td { (shown(tenant)) }
                        td { (shown(queue)) }
                        td.n { (count) }
                    }
                }
            }
        }
        @if !limits.is_empty() {
            h2 { "Limits" }
            table #limits {
                (heads(&["limit", "key", "running", "waiting", "waits", "rate"]))
                @for seen in &limits {
                    tr {
                        td { (shown(&seen.name)) }
                        td { (shown(&seen.key)) }
                        td.n {
                            (seen.running)
                            @if let Some(limit) = seen.concurrency { "/" (limit) }
                        }
                        td.n { (seen.waiting) }
                        td.n { (seen.waits) }
                        td { (shown(seen.rate.as_deref().unwrap_or("-"))) }
                    }
                }
            }
        }
        p.note {
            "From the workers' heartbeats (every few seconds); a worker that stops sending them \
             leaves this page three intervals and two seconds after its last one. Jobs running \
             longer than "
            (format_duration_ms(long.as_millis()))
            " are marked long (" code { "?long=SECONDS" } " to change). A job's progress is what \
             its handler last reported. Tenants: how many jobs of each run now, \
             for jobs that name one. Limits: per key, the slots held now (of the limit), the \
             jobs waiting for a slot as the store last said, and the jobs told to wait lately."
        }
    };
    Ok(page("Workers", body))
}
