//! Pause, resume and cancel: a preview first, then the command on
//! confirmation.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::{Extension, Form};
use maud::html;
use queuey_core::Uuid;
use queuey_core::control::{Command, Heartbeat};
use serde::Deserialize;

use super::actions::back;
use super::{PageError, PageResult};
use crate::fleet;
use crate::web::App;
use crate::web::html::{page, post_form, queue_path, shown};
use crate::web::session::Session;

/// The fields of a pause, resume or cancel form.
#[derive(Debug, Deserialize)]
pub(crate) struct ControlForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    job_id: String,
    #[serde(default)]
    confirm: String,
    /// `yes`: send a pause or resume although no worker that would read it
    /// is heard consuming the queue.
    #[serde(default)]
    force: String,
}

/// The consumers of `queue` nobody hears (see [`fleet::Unheard`]):
/// RabbitMQ counts `consumers`, and none of `workers` consumes it. With
/// the other control streams on the broker.
pub(super) async fn unheard(
    app: &App,
    queue: &str,
    consumers: u32,
    workers: &[Heartbeat],
) -> Option<fleet::Unheard> {
    let consuming = fleet::consumers_of(workers, queue);
    let unheard = fleet::Unheard::of(queue, consumers, &consuming, &app.config.control_stream)?;
    Some(unheard.look_elsewhere(&app.mgmt).await)
}

/// Who the dashboard says sent a command.
fn by() -> String {
    fleet::signature("queuey web")
}

/// POST `/queue/{q}/pause`.
pub(crate) async fn pause(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
    Form(form): Form<ControlForm>,
) -> PageResult {
    switch(app, session, queue, form, true).await
}

/// POST `/queue/{q}/resume`.
pub(crate) async fn resume(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
    Form(form): Form<ControlForm>,
) -> PageResult {
    switch(app, session, queue, form, false).await
}

async fn switch(
    app: Arc<App>,
    session: Session,
    queue: String,
    form: ControlForm,
    pause: bool,
) -> PageResult {
    app.check_csrf(&session, &form.csrf)?;
    app.admit(&queue).await?;
    let (verb, path) = if pause {
        ("Pause", "pause")
    } else {
        ("Resume", "resume")
    };
    let workers = app.fleet.workers().await?;
    let consumers = app.amqp.require(&queue).await?.consumers;
    let unheard = unheard(&app, &queue, consumers, &workers).await;
    let forced = form.force == "yes";
    if form.confirm != "yes" || (unheard.is_some() && !forced) {
        let consuming = fleet::consumers_of(&workers, &queue);
        let what = if pause {
            "every worker stops taking its jobs within a second or two, lets the running ones \
             finish and hands back the ones it had not started; its other queues keep flowing"
        } else {
            "every worker takes its jobs again"
        };
        let (fields, label): (&[(&str, &str)], String) = match &unheard {
            Some(_) => (
                &[("confirm", "yes"), ("force", "yes")],
                format!("{verb} anyway"),
            ),
            None => (&[("confirm", "yes")], format!("Confirm {path}")),
        };
        let body = html! {
            div.box #preview {
                p { (verb) " " code { (shown(&queue)) } ": " (what) "." }
                p {
                    (consuming.len()) " worker(s) consume it now"
                    @if !consuming.is_empty() { ": " (shown(&consuming.join(", "))) }
                    "."
                }
                @if let Some(unheard) = &unheard {
                    p.bad #unheard {
                        (shown(&unheard.to_string())) ". Sending it anyway reaches only the \
                         workers that follow " code { (shown(&app.config.control_stream)) } "."
                    }
                }
                p { "Nothing has changed yet." }
                p {
                    (post_form(
                        &queue_path(&queue, path),
                        session.csrf.as_str(),
                        fields,
                        &label,
                        if pause { "danger" } else { "go" },
                        "confirm",
                    ))
                    " "
                    (back(&queue))
                }
            }
        };
        return Ok(page(&format!("{verb} {queue}: preview"), body));
    }
    let command = if pause {
        Command::Pause {
            queue: queue.clone(),
        }
    } else {
        Command::Resume {
            queue: queue.clone(),
        }
    };
    app.fleet.send(command, &by()).await?;
    let body = html! {
        div.box {
            p.ok #result {
                (if pause { "Paused" } else { "Resumed" }) " " code { (shown(&queue)) } "."
            }
            p { (back(&queue)) }
        }
    };
    Ok(page(&format!("{verb} {queue}: done"), body))
}

/// Refuses, on a dashboard started with `--queue`, a cancel of a job it
/// does not see running on one of its queues: a cancel reaches the job
/// wherever it is, and such a dashboard acts on its own queues only. A
/// dashboard without `--queue` cancels any job.
fn admit_cancel(app: &App, job_id: Uuid, workers: &[Heartbeat]) -> Result<(), PageError> {
    if app.config.queues.is_empty() {
        return Ok(());
    }
    let mut runs = fleet::running_where(workers, |j| j.job_id == job_id).peekable();
    let seen = runs.peek().is_some();
    if seen && runs.all(|(_, job)| app.in_scope(&job.queue)) {
        return Ok(());
    }
    Err(PageError(
        axum::http::StatusCode::NOT_FOUND,
        format!(
            "job {job_id} is not on this dashboard: it was started with --queue, and cancels \
             only the jobs it sees running on those queues; cancel others with \
             `queuey job cancel {job_id}`"
        ),
    ))
}

/// POST `/job/cancel`: a preview, or with `confirm=yes` the cancellation.
pub(crate) async fn cancel(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Form(form): Form<ControlForm>,
) -> PageResult {
    app.check_csrf(&session, &form.csrf)?;
    let job_id = Uuid::parse_str(form.job_id.trim()).map_err(|_| {
        PageError(
            axum::http::StatusCode::BAD_REQUEST,
            format!("`{}` is not a job id", form.job_id),
        )
    })?;
    let back = html! { a href="/workers" #back { "back to the workers" } };
    let workers = app.fleet.workers().await?;
    admit_cancel(&app, job_id, &workers)?;
    if form.confirm != "yes" {
        let id = job_id.to_string();
        let body = html! {
            div.box #preview {
                p {
                    "Cancel job " code { (id) } ": wherever it waits, it is not run again; the \
                     next worker to take it dead-letters it with the reason "
                    code { "cancelled" } "."
                }
                @for (worker, job) in fleet::running_where(&workers, |j| j.job_id == job_id) {
                    p {
                        "It runs now on " (shown(&fleet::label(worker))) " ("
                        (shown(&job.job_type)) ", attempt " (job.attempt)
                        @if let Some(progress) = &job.progress {
                            ", at " (shown(&progress.to_string()))
                        }
                        "): its handler is told and decides; nothing is killed."
                    }
                }
                p { "Nothing has changed yet." }
                p {
                    (post_form(
                        "/job/cancel",
                        session.csrf.as_str(),
                        &[("job_id", id.as_str()), ("confirm", "yes")],
                        "Confirm cancel",
                        "danger",
                        "confirm",
                    ))
                    " "
                    (back)
                }
            }
        };
        return Ok(page("Cancel a job: preview", body));
    }
    app.fleet.send(Command::Cancel { job_id }, &by()).await?;
    let body = html! {
        div.box {
            p.ok #result { "Cancelled job " code { (job_id) } "." }
            p { (back) }
        }
    };
    Ok(page("Cancel a job: done", body))
}
