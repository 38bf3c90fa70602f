//! `/job?id=ID`: where a job is, the answer of `queuey job show` (see
//! [`find`](crate::find)) within the dashboard's queues.
//!
//! A GET changes nothing a worker would notice: the page reads the
//! workers' heartbeats, the hold queues and the dead-letter queues, and
//! hands back every message it reads. It never reads work or suspect
//! queues, whose jobs would come back redelivered, which the workers'
//! poison guard counts; it gives their counts and the command that reads
//! them.

use std::sync::Arc;

use axum::extract::{Query, State};
use maud::html;
use serde::Deserialize;

use super::PageResult;
use crate::find::{self, Place};
use crate::web::App;
use crate::web::html::{job_search, nav, page, queue_path, seg, shown};

/// The job page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct JobQuery {
    /// The job id to find.
    id: String,
}

/// `/job?id=ID`: where the job is, and what was read to find out.
pub(crate) async fn job(State(app): State<Arc<App>>, Query(query): Query<JobQuery>) -> PageResult {
    let job_id = find::parse_job_id(&query.id)?;
    let mut workers = app.fleet.workers().await?;
    for worker in &mut workers {
        worker.running.retain(|job| app.in_scope(&job.queue));
    }
    let queues = if app.config.queues.is_empty() {
        let infos = app.mgmt.queues(None).await?;
        let every = app.queues_of(&infos);
        crate::queues::choose(false, every, &workers, false).0
    } else {
        app.config.queues.clone()
    };
    let search = find::Search {
        job_id,
        queues: &queues,
        max_per_queue: super::READ_CAP,
        read_ready: false,
        dead_suffix: &app.config.dead_suffix,
        deferred_suffix: &app.config.deferred_suffix,
        suspect_suffix: crate::DEFAULT_SUSPECT_SUFFIX,
    };
    let answer = find::find(&search, &app.amqp, &app.mgmt, &workers).await?;
    let lines = answer.lines();
    // The place's `state`, as the JSON of `queuey job show --json` names it.
    let place = serde_json::to_value(&answer.place).unwrap_or_default();
    let state = place["state"].as_str().unwrap_or_default();
    let id = job_id.to_string();
    let body = html! {
        (nav(None))
        (job_search(&id))
        div.box #job-answer data-state=(state) {
            p #job-where {
                @match &answer.place {
                    Place::NotFound => span.warn { (shown(&lines[0])) },
                    Place::Dead { .. } => span.bad { (shown(&lines[0])) },
                    _ => span.ok { (shown(&lines[0])) },
                }
            }
            @match &answer.place {
                Place::Dead { queue, .. } => {
                    p { a #job-letter href=(queue_path(queue, &format!("dead/{}", seg(&id)))) {
                        "the dead letter"
                    } }
                }
                Place::Ready { queue, .. } | Place::Held { queue, .. }
                | Place::Suspect { queue, .. } => {
                    p { a #job-queue href=(queue_path(queue, "")) { (shown(queue)) } }
                }
                _ => {}
            }
        }
        h2 { "Searched" }
        ul #job-searched {
            @for line in lines.iter().skip(1) { li { (shown(line.trim_start())) } }
        }
        @if !answer.found() {
            p.note #job-ready-note {
                "This page does not read work or suspect queues: their jobs would come back \
                 redelivered, which the workers' poison guard counts. "
                code { "queuey job show " (id) " --ready" } " reads them."
            }
        }
        p { a href="/" #back { "back to the queues" } }
    };
    Ok(page(&format!("Job {id}"), body))
}
