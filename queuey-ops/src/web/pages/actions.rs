//! Redrive and purge: a preview first, then the change on confirmation.
//! Over a sharded queue both cover the lane and every shard, and a redrive
//! sends each dead letter back to its own shard.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Html;
use axum::{Extension, Form};
use serde::Deserialize;

use super::PageResult;
use crate::dead::{Filter, RedriveOptions};
use crate::time::now_ms;
use crate::web::App;
use crate::web::html::{esc, page, post_form, seg};
use crate::web::session::Session;

/// The fields of a redrive or purge form.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    fingerprint: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    confirm: String,
}

impl ActionForm {
    fn filter(&self) -> Filter {
        Filter {
            fingerprint: (!self.fingerprint.is_empty()).then(|| self.fingerprint.clone()),
            ids: if self.id.is_empty() {
                vec![]
            } else {
                vec![self.id.clone()]
            },
            ..Filter::all()
        }
    }

    fn fields(&self) -> Vec<(&'static str, &str)> {
        let mut f = vec![("confirm", "yes")];
        if !self.fingerprint.is_empty() {
            f.push(("fingerprint", self.fingerprint.as_str()));
        }
        if !self.id.is_empty() {
            f.push(("id", self.id.as_str()));
        }
        f
    }

    fn scope(&self) -> String {
        match (self.fingerprint.is_empty(), self.id.is_empty()) {
            (true, true) => "every dead letter".to_owned(),
            (false, _) => format!(
                "the dead letters with fingerprint <code>{}</code>",
                esc(&self.fingerprint)
            ),
            (true, false) => format!("dead letter <code>{}</code>", esc(&self.id)),
        }
    }
}

fn back(queue: &str) -> String {
    format!(
        "<a href=\"/queue/{}\" id=\"back\">back to {}</a>",
        seg(queue),
        esc(queue)
    )
}

/// POST `/queue/{q}/redrive`: a preview, or with `confirm=yes` the move.
pub(crate) async fn redrive(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
    Form(form): Form<ActionForm>,
) -> PageResult {
    app.check_csrf(&session, &form.csrf)?;
    app.admit(&queue).await?;
    let csrf = session.csrf.as_str();
    let (_, queues) = app.dead_queues(&queue).await?;
    let options = RedriveOptions {
        filter: form.filter(),
        ..RedriveOptions::new(&queue)
    };
    if form.confirm != "yes" {
        let plan = queues.plan_redrive(&app.amqp, &options).await?;
        let mut body = format!(
            "<div class=box id=\"preview\"><p>Redrive {}: <b id=\"would-move\">would move {} of {}</b> dead letters back.</p><ul>",
            form.scope(),
            plan.would_move,
            plan.read
        );
        for t in &plan.targets {
            let flag = match (t.moves, t.exists) {
                (false, _) => " <span class=bad>another queue: left in place</span>",
                (true, false) => " <span class=bad>missing: the redrive stops there</span>",
                (true, true) => "",
            };
            let _ = write!(
                body,
                "<li>{} → <code>{}</code>{flag}</li>",
                t.letters,
                esc(&t.queue)
            );
        }
        for (id, why) in &plan.unmovable_samples {
            let _ = write!(
                body,
                "<li class=bad>cannot move {}: {}</li>",
                esc(id),
                esc(why)
            );
        }
        let _ = write!(
            body,
            "</ul><p>Each job goes back with its attempt counter reset to 1. Nothing has changed yet.</p><p>{} {}</p></div>",
            post_form(
                &format!("/queue/{}/redrive", seg(&queue)),
                csrf,
                &form.fields(),
                "Confirm redrive",
                "go",
                "confirm"
            ),
            back(&queue)
        );
        return Ok(Html(page(&format!("Redrive {queue}: preview"), &body)));
    }
    let report = queues.redrive(&app.amqp, &options, &mut |_| {}).await?;
    let mut body = format!(
        "<div class=box><p class=ok id=\"result\">Moved {} dead letters back (redrive id <code>{}</code>).</p>",
        report.moved,
        esc(&report.redrive_id)
    );
    if report.foreign > 0 {
        let _ = write!(
            body,
            "<p class=bad>left {} whose original queue is another queue</p>",
            report.foreign
        );
    }
    for (id, why) in &report.unmovable_samples {
        let _ = write!(body, "<p class=bad>left {}: {}</p>", esc(id), esc(why));
    }
    if let Some(why) = &report.stopped {
        let _ = write!(body, "<p class=bad>stopped early: {}</p>", esc(why));
    }
    let _ = write!(body, "<p>{}</p></div>", back(&queue));
    Ok(Html(page(&format!("Redrive {queue}: done"), &body)))
}

/// POST `/queue/{q}/purge`: a preview, or with `confirm=yes` the export and removal.
pub(crate) async fn purge(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
    Form(form): Form<ActionForm>,
) -> PageResult {
    app.check_csrf(&session, &form.csrf)?;
    app.admit(&queue).await?;
    let csrf = session.csrf.as_str();
    let (_, queues) = app.dead_queues(&queue).await?;
    let dq = queues.first().to_owned();
    let filter = form.filter();
    if form.confirm != "yes" {
        let plan = queues.plan_purge(&app.amqp, &filter).await?;
        let n = plan.matching;
        let body = format!(
            "<div class=box id=\"preview\"><p>Purge {}: <b>would export {n} of {} dead letters</b> to a file in <code>{}</code>, flush it, then remove them.</p><p>Nothing has changed yet.</p><p>{} {}</p></div>",
            form.scope(),
            plan.read,
            esc(&app.config.export_dir.display().to_string()),
            post_form(
                &format!("/queue/{}/purge", seg(&queue)),
                csrf,
                &form.fields(),
                "Confirm purge",
                "danger",
                "confirm"
            ),
            back(&queue)
        );
        return Ok(Html(page(&format!("Purge {queue}: preview"), &body)));
    }
    let file_name: String = format!("{dq}-{}.jsonl", now_ms())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = app.config.export_dir.join(file_name);
    let report = queues.purge_with_export(&app.amqp, &filter, &path).await?;
    let body = format!(
        "<div class=box><p class=ok id=\"result\">Exported {} dead letters to <code>{}</code>, then removed them.</p><p>Restore them with <code>queuey dead import {}</code>.</p><p>{}</p></div>",
        report.purged,
        esc(&path.display().to_string()),
        esc(&path.display().to_string()),
        back(&queue)
    );
    Ok(Html(page(&format!("Purge {queue}: done"), &body)))
}
