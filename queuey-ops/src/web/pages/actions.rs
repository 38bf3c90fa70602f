//! Redrive and purge: a preview first, then the change on confirmation.
//! Over a sharded queue both cover the lane and every shard, and a redrive
//! sends each dead letter back to its own shard.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::{Extension, Form};
use maud::{Markup, html};
use serde::Deserialize;

use super::PageResult;
use crate::dead::{Filter, RedriveOptions};
use crate::time::now_ms;
use crate::web::App;
use crate::web::html::{Tone, back_to_queue, done, post_form, preview, queue_path, shown};
use crate::web::session::Session;

/// The fields of a redrive or purge form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ActionForm {
    csrf: String,
    fingerprint: String,
    id: String,
    confirm: String,
}

impl ActionForm {
    fn filter(&self) -> Filter {
        Filter {
            fingerprint: (!self.fingerprint.is_empty()).then(|| self.fingerprint.clone()),
            ids: (!self.id.is_empty())
                .then(|| self.id.clone())
                .into_iter()
                .collect(),
            ..Filter::all()
        }
    }

    fn fields(&self) -> Vec<(&'static str, &str)> {
        let given = [("fingerprint", &self.fingerprint), ("id", &self.id)];
        let given = given.into_iter().filter(|(_, v)| !v.is_empty());
        std::iter::once(("confirm", "yes"))
            .chain(given.map(|(name, v)| (name, v.as_str())))
            .collect()
    }

    fn scope(&self) -> Markup {
        html! {
            @if !self.fingerprint.is_empty() {
                "the dead letters with fingerprint " code { (shown(&self.fingerprint)) }
            } @else if !self.id.is_empty() {
                "dead letter " code { (shown(&self.id)) }
            } @else {
                "every dead letter"
            }
        }
    }
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
    let title = format!("Redrive {queue}");
    if form.confirm != "yes" {
        let plan = queues.plan_redrive(&app.amqp, &options).await?;
        let action = queue_path(&queue, "redrive");
        let confirm = post_form(
            &action,
            csrf,
            &form.fields(),
            "Confirm redrive",
            Tone::Primary,
            "confirm",
        );
        let body = html! {
            p {
                "Redrive " (form.scope()) ": "
                b #would-move { "would move " (plan.would_move) " of " (plan.read) }
                " dead letters back."
            }
            ul {
                @for t in &plan.targets {
                    li {
                        (t.letters) " → " code { (shown(&t.queue)) }
                        @match (t.moves, t.exists) {
                            (false, _) => { " " span.bad { "another queue: left in place" } }
                            (true, false) => { " " span.bad { "missing: the redrive stops there" } }
                            (true, true) => {}
                        }
                    }
                }
                @for (id, why) in &plan.left.unmovable_samples {
                    li.bad { "cannot move " (shown(id)) ": " (shown(why)) }
                }
            }
            p { "Each job goes back with its attempt counter reset to 1." }
        };
        return Ok(preview(&title, body, confirm, back_to_queue(&queue)));
    }
    let report = queues.redrive(&app.amqp, &options, &mut |_| {}).await?;
    let result = html! {
        p.ok #result {
            "Moved " (report.moved) " dead letters back (redrive id "
            code { (shown(&report.redrive_id)) } ")."
        }
        @if report.foreign > 0 {
            p.bad { "left " (report.foreign) " whose original queue is another queue" }
        }
        @for (id, why) in &report.left.unmovable_samples {
            p.bad { "left " (shown(id)) ": " (shown(why)) }
        }
        @if let Some(why) = &report.stopped {
            p.bad { "stopped early: " (shown(why)) }
        }
    };
    Ok(done(&title, result, back_to_queue(&queue)))
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
    let title = format!("Purge {queue}");
    if form.confirm != "yes" {
        let plan = queues.plan_purge(&app.amqp, &filter).await?;
        let action = queue_path(&queue, "purge");
        let confirm = post_form(
            &action,
            csrf,
            &form.fields(),
            "Confirm purge",
            Tone::Danger,
            "confirm",
        );
        let body = html! {
            p {
                "Purge " (form.scope()) ": "
                b { "would export " (plan.matching) " of " (plan.read) " dead letters" }
                " to a file in " code { (shown(&app.config.export_dir.display().to_string())) }
                ", flush it, then remove them."
            }
        };
        return Ok(preview(&title, body, confirm, back_to_queue(&queue)));
    }
    let file_name: String = format!("{dq}-{}.jsonl", now_ms())
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    let path = app.config.export_dir.join(file_name);
    let report = queues.purge_with_export(&app.amqp, &filter, &path).await?;
    let path = path.display().to_string();
    let result = html! {
        p.ok #result {
            "Exported " (report.purged) " dead letters to " code { (shown(&path)) }
            ", then removed them."
        }
        p { "Restore them with " code { "queuey dead import " (shown(&path)) } "." }
    };
    Ok(done(&title, result, back_to_queue(&queue)))
}
