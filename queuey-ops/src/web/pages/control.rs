//! Pause, resume and cancel: a preview first, then the command on
//! confirmation.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::{Extension, Form};
use maud::html;
use queuey_core::Uuid;
use queuey_core::control::{Command, Heartbeat};
use serde::Deserialize;

use super::{PageError, PageResult};
use crate::fleet;
use crate::web::App;
use crate::web::html::{Tone, back_to_queue, done, post_form, preview, queue_path, shown};
use crate::web::session::Session;

/// The fields of a pause, resume or cancel form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ControlForm {
    csrf: String,
    job_id: String,
    confirm: String,
    /// `yes`: send a pause or resume although no worker that would read it
    /// is heard consuming the queue.
    force: String,
}

/// The `consumers` of `queue` none of `workers` is (see [`fleet::Unheard`]),
/// with the other control streams on the broker.
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

/// POST `/queue/{q}/pause` and `/queue/{q}/resume`: a preview, or with
/// `confirm=yes` the command.
pub(crate) async fn switch(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
    uri: Uri,
    Form(form): Form<ControlForm>,
) -> PageResult {
    let pause = uri.path().ends_with("/pause");
    app.check_csrf(&session, &form.csrf)?;
    app.admit(&queue).await?;
    let verb = if pause { "Pause" } else { "Resume" };
    let path = verb.to_ascii_lowercase();
    let workers = app.fleet.workers().await?;
    let consumers = app.amqp.require(&queue).await?.consumers;
    let unheard = unheard(&app, &queue, consumers, &workers).await;
    let title = format!("{verb} {queue}");
    if form.confirm != "yes" || (unheard.is_some() && form.force != "yes") {
        let consuming = fleet::consumers_of(&workers, &queue);
        let what = if pause {
            "every worker stops taking its jobs within a second or two, lets the running ones \
             finish and hands back the ones it had not started; its other queues keep flowing"
        } else {
            "every worker takes its jobs again"
        };
        let (fields, label) = match &unheard {
            Some(_) => (
                &[("confirm", "yes"), ("force", "yes")][..],
                format!("{verb} anyway"),
            ),
            None => (&[("confirm", "yes")][..], format!("Confirm {path}")),
        };
        let action = queue_path(&queue, &path);
        let confirm = post_form(
            &action,
            &session.csrf,
            fields,
            &label,
            Tone::Primary,
            "confirm",
        );
        let body = html! {
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
        };
        return Ok(preview(&title, body, confirm, back_to_queue(&queue)));
    }
    let q = queue.clone();
    let command = if pause {
        Command::Pause { queue: q }
    } else {
        Command::Resume { queue: q }
    };
    app.fleet.send(command).await?;
    let result = html! {
        p.ok #result { (if pause { "Paused" } else { "Resumed" }) " " code { (shown(&queue)) } "." }
    };
    Ok(done(&title, result, back_to_queue(&queue)))
}

/// Refuses, with `--queue`, a cancel of a job not seen running on one of
/// those queues: a cancel reaches the job wherever it is.
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
        StatusCode::NOT_FOUND,
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
    let not_an_id = format!("`{}` is not a job id", form.job_id);
    let job_id = Uuid::parse_str(form.job_id.trim())
        .map_err(|_| PageError(StatusCode::BAD_REQUEST, not_an_id))?;
    let back = html! { a href="/workers" #back { "back to the workers" } };
    let workers = app.fleet.workers().await?;
    admit_cancel(&app, job_id, &workers)?;
    if form.confirm != "yes" {
        let id = job_id.to_string();
        let fields = [("job_id", id.as_str()), ("confirm", "yes")];
        let form = post_form(
            "/job/cancel",
            &session.csrf,
            &fields,
            "Confirm cancel",
            Tone::Danger,
            "confirm",
        );
        let body = html! {
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
        };
        return Ok(preview("Cancel a job", body, form, back));
    }
    app.fleet.send(Command::Cancel { job_id }).await?;
    let result = html! { p.ok #result { "Cancelled job " code { (job_id) } "." } };
    Ok(done("Cancel a job", result, back))
}
