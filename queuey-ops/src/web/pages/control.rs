//! Pause, resume and cancel: a preview first, then the command on
//! confirmation.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Html;
use axum::{Extension, Form};
use queuey_core::Uuid;
use queuey_core::control::{Command, Heartbeat};
use serde::Deserialize;

use super::{PageError, PageResult};
use crate::fleet;
use crate::web::App;
use crate::web::html::{esc, page, post_form, seg};
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
    let back = format!(
        "<a href=\"/queue/{}\" id=\"back\">back to {}</a>",
        seg(&queue),
        esc(&queue)
    );
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
        let (warning, fields, label): (String, &[(&str, &str)], String) = match &unheard {
            Some(unheard) => (
                format!(
                    "<p class=bad id=\"unheard\">{}. Sending it anyway reaches only the workers \
                     that follow <code>{}</code>.</p>",
                    esc(&unheard.to_string()),
                    esc(&app.config.control_stream)
                ),
                &[("confirm", "yes"), ("force", "yes")],
                format!("{verb} anyway"),
            ),
            None => (
                String::new(),
                &[("confirm", "yes")],
                format!("Confirm {path}"),
            ),
        };
        let body = format!(
            "<div class=box id=\"preview\"><p>{verb} <code>{}</code>: {what}.</p>\
             <p>{} worker(s) consume it now{}.</p>{warning}<p>Nothing has changed yet.</p><p>{} {back}</p></div>",
            esc(&queue),
            consuming.len(),
            if consuming.is_empty() {
                String::new()
            } else {
                format!(": {}", esc(&consuming.join(", ")))
            },
            post_form(
                &format!("/queue/{}/{path}", seg(&queue)),
                session.csrf.as_str(),
                fields,
                &label,
                if pause { "danger" } else { "go" },
                "confirm"
            ),
        );
        return Ok(Html(page(&format!("{verb} {queue}: preview"), &body)));
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
    let body = format!(
        "<div class=box><p class=ok id=\"result\">{} <code>{}</code>.</p><p>{back}</p></div>",
        if pause { "Paused" } else { "Resumed" },
        esc(&queue)
    );
    Ok(Html(page(&format!("{verb} {queue}: done"), &body)))
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
    let back = "<a href=\"/workers\" id=\"back\">back to the workers</a>";
    let workers = app.fleet.workers().await?;
    admit_cancel(&app, job_id, &workers)?;
    if form.confirm != "yes" {
        let mut body = format!(
            "<div class=box id=\"preview\"><p>Cancel job <code>{job_id}</code>: wherever it \
             waits, it is not run again; the next worker to take it dead-letters it with the \
             reason <code>cancelled</code>.</p>"
        );
        for (worker, job) in fleet::running_where(&workers, |j| j.job_id == job_id) {
            let _ = write!(
                body,
                "<p>It runs now on {} ({}, attempt {}): its handler is told and decides; \
                 nothing is killed.</p>",
                esc(&fleet::label(worker)),
                esc(&job.job_type),
                job.attempt
            );
        }
        let id = job_id.to_string();
        let _ = write!(
            body,
            "<p>Nothing has changed yet.</p><p>{} {back}</p></div>",
            post_form(
                "/job/cancel",
                session.csrf.as_str(),
                &[("job_id", id.as_str()), ("confirm", "yes")],
                "Confirm cancel",
                "danger",
                "confirm"
            )
        );
        return Ok(Html(page("Cancel a job: preview", &body)));
    }
    app.fleet.send(Command::Cancel { job_id }, &by()).await?;
    let body = format!(
        "<div class=box><p class=ok id=\"result\">Cancelled job <code>{job_id}</code>.</p><p>{back}</p></div>"
    );
    Ok(Html(page("Cancel a job: done", &body)))
}
