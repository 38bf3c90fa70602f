//! The dashboard's pages and actions.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Form};
use serde::Deserialize;

use super::App;
use super::html::{esc, page, post_form, seg};
use super::session::Session;
use crate::dead::{self, Filter, RedriveOptions};
use crate::error::OpsError;
use crate::holds;
use crate::time::{format_duration_ms, format_ms, now_ms};
use crate::topology::{self, QueueSpec, TopologySpec};

/// Dead letters read for one page view at most.
const READ_CAP: usize = 10_000;
/// Dead letters listed one by one.
const LISTED: usize = 100;

/// An error shown as a page.
pub(crate) struct PageError(StatusCode, String);

impl From<OpsError> for PageError {
    fn from(e: OpsError) -> Self {
        let status = match e {
            OpsError::UnknownQueue(_) | OpsError::NotFound { .. } => StatusCode::NOT_FOUND,
            OpsError::Invalid(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        PageError(status, e.to_string())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = format!(
            "<p class=\"bad\" id=\"error\">{}</p><p><a href=\"/\">back</a></p>",
            esc(&self.1)
        );
        (self.0, Html(page("Error", &body))).into_response()
    }
}

type PageResult = Result<Html<String>, PageError>;

impl App {
    fn dead_queue(&self, queue: &str) -> Result<String, OpsError> {
        crate::dead_queue_of(queue, &self.config.dead_suffix)
    }

    fn spec_for(&self, queue: &str) -> (TopologySpec, bool) {
        let configured = self
            .config
            .topology
            .as_ref()
            .and_then(|t| t.queues.iter().find(|q| q.name == queue).map(|q| (t, q)));
        match configured {
            Some((t, q)) => (
                TopologySpec {
                    dead_suffix: t.dead_suffix.clone(),
                    deferred_suffix: t.deferred_suffix.clone(),
                    suspect_suffix: t.suspect_suffix.clone(),
                    queues: vec![q.clone()],
                },
                true,
            ),
            None => (
                TopologySpec {
                    dead_suffix: self.config.dead_suffix.clone(),
                    deferred_suffix: self.config.deferred_suffix.clone(),
                    suspect_suffix: crate::DEFAULT_SUSPECT_SUFFIX.to_owned(),
                    queues: vec![QueueSpec::new(queue)],
                },
                false,
            ),
        }
    }

    /// Whether `queue` is one of the dashboard's: one of `--queue` when
    /// given, else a work queue that exists with its dead-letter queue (what
    /// the index lists). Others are answered as if they did not exist.
    async fn admit(&self, queue: &str) -> Result<(), PageError> {
        let refused = || {
            PageError(
                StatusCode::NOT_FOUND,
                format!(
                    "queue `{queue}` is not on this dashboard: it shows {}",
                    if self.config.queues.is_empty() {
                        "the queues that have a dead-letter queue"
                    } else {
                        "only the queues it was started with (--queue)"
                    }
                ),
            )
        };
        let dq = self.dead_queue(queue)?;
        let (work, dead) = if self.config.queues.is_empty() && dq != queue {
            (
                self.amqp.counts(queue).await?.is_some(),
                self.amqp.counts(&dq).await?.is_some(),
            )
        } else {
            (false, false)
        };
        let exists = |name: &str| (name == queue && work) || (name == dq && dead);
        if on_dashboard(&self.config.queues, queue, &dq, exists) {
            Ok(())
        } else {
            Err(refused())
        }
    }

    fn check_csrf(&self, session: &Session, given: &str) -> Result<(), PageError> {
        if self.sessions.verify(session, given) {
            Ok(())
        } else {
            Err(PageError(
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or stale: reload the page and try again".into(),
            ))
        }
    }
}

/// Whether `queue` (whose dead-letter queue is `dead_queue`) is one of the
/// dashboard's: one of `listed`, or with none listed, a work queue that
/// `exists` with its dead-letter queue.
fn on_dashboard(
    listed: &[String],
    queue: &str,
    dead_queue: &str,
    exists: impl Fn(&str) -> bool,
) -> bool {
    if listed.is_empty() {
        dead_queue != queue && exists(queue) && exists(dead_queue)
    } else {
        listed.iter().any(|q| q == queue)
    }
}

fn rate(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.1}/s"))
}

/// `/`: every queue with its counts.
pub(crate) async fn index(State(app): State<Arc<App>>) -> PageResult {
    let infos = app.mgmt.queues(None).await?;
    let by_name: BTreeMap<&str, &crate::mgmt::QueueInfo> =
        infos.iter().map(|i| (i.name.as_str(), i)).collect();
    let suffix = &app.config.dead_suffix;
    let queues: Vec<String> = if app.config.queues.is_empty() {
        infos
            .iter()
            .filter_map(|i| i.name.strip_suffix(suffix.as_str()))
            .filter(|q| {
                app.dead_queue(q)
                    .is_ok_and(|dq| on_dashboard(&[], q, &dq, |n| by_name.contains_key(n)))
            })
            .map(str::to_owned)
            .collect()
    } else {
        app.config.queues.clone()
    };
    let mut body = String::from(
        "<table id=\"queues\"><tr><th>queue</th><th>ready</th><th>unacked</th><th>consumers</th>\
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
            "<tr><td><a href=\"/queue/{}\">{}</a></td><td class=n>{}</td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td><td class=n>{held}</td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td></tr>",
            seg(q),
            esc(q),
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
    Ok(Html(page(
        &format!("Queues on vhost {}", app.mgmt.vhost()),
        &body,
    )))
}

/// `/queue/{q}`: dead letters, holds and topology of one queue.
pub(crate) async fn queue(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
) -> PageResult {
    app.admit(&queue).await?;
    let csrf = session.csrf.as_str();
    let dq = app.dead_queue(&queue)?;
    let work = app.amqp.require(&queue).await?;
    let mut grouped = dead::StatsBuilder::new();
    let mut oldest = Vec::new();
    let pass = dead::scan(&app.amqp, &dq, Some(READ_CAP), |l| {
        grouped.add(&l);
        if oldest.len() < LISTED {
            oldest.push(l.summary());
        }
        std::ops::ControlFlow::Continue(())
    })
    .await?;
    let stats = grouped.finish();
    let action = |verb: &str| format!("/queue/{}/{verb}", seg(&queue));
    let mut body = format!(
        "<p>{} ready · {} consumer(s) · <b id=\"dead-count\">{}</b> dead letter(s) in <code>{}</code></p>",
        work.messages,
        work.consumers,
        pass.read,
        esc(&dq)
    );
    body.push_str("<h2>Dead letters by reason</h2>");
    if !pass.complete {
        let _ = write!(
            body,
            "<p class=note>Showing the oldest {READ_CAP}; `queuey dead stats` reads them all.</p>"
        );
    }
    if pass.read == 0 {
        body.push_str("<p class=ok id=\"no-dead\">No dead letters.</p>");
    } else {
        let _ = write!(
            body,
            "<p>{} {}</p>",
            post_form(
                &action("redrive"),
                csrf,
                &[],
                "Redrive all…",
                "",
                "redrive-all"
            ),
            post_form(
                &action("purge"),
                csrf,
                &[],
                "Purge all (with export)…",
                "danger",
                "purge-all"
            ),
        );
        body.push_str("<table id=\"groups\"><tr><th>count</th><th>fingerprint</th><th>job types</th><th>example</th><th></th></tr>");
        for (i, g) in stats.by_fingerprint.iter().enumerate() {
            let types: Vec<String> = g
                .job_types
                .iter()
                .map(|(t, n)| format!("{} ×{n}", esc(t)))
                .collect();
            let fields = [("fingerprint", g.fingerprint.as_str())];
            let _ = write!(
                body,
                "<tr><td class=n>{}</td><td><code>{}</code></td><td>{}</td>\
                 <td><a href=\"/queue/{}/dead/{}\">{}</a></td><td>{} {}</td></tr>",
                g.count,
                esc(&g.fingerprint),
                types.join("<br>"),
                seg(&queue),
                seg(&g.example_id),
                esc(&g.example_reason),
                post_form(
                    &action("redrive"),
                    csrf,
                    &fields,
                    "Redrive…",
                    "",
                    &format!("redrive-{i}")
                ),
                post_form(
                    &action("purge"),
                    csrf,
                    &fields,
                    "Purge…",
                    "danger",
                    &format!("purge-{i}")
                ),
            );
        }
        body.push_str("</table>");
        let _ = write!(body, "<h2>Oldest {} dead letters</h2>", oldest.len());
        body.push_str("<table id=\"dead\"><tr><th>#</th><th>id</th><th>type</th><th>attempts</th><th>reason</th></tr>");
        for s in &oldest {
            let _ = write!(
                body,
                "<tr><td class=n>{}</td><td><a href=\"/queue/{}/dead/{}\"><code>{}</code></a></td><td>{}</td><td class=n>{}</td><td>{}</td></tr>",
                s.position,
                seg(&queue),
                seg(&s.id),
                esc(&s.id),
                esc(s.job_type.as_deref().unwrap_or("-")),
                s.attempts.map_or("-".into(), |a| a.to_string()),
                esc(&s.reason)
            );
        }
        body.push_str("</table>");
    }
    body.push_str(&holds_section(&app, &queue).await);
    body.push_str(&topology_section(&app, &queue).await);
    Ok(Html(page(&format!("Queue {queue}"), &body)))
}

async fn holds_section(app: &App, queue: &str) -> String {
    let mut out = String::from("<h2>Hold queues</h2>");
    match holds::census(
        &app.mgmt,
        &app.amqp,
        queue,
        &app.config.deferred_suffix,
        100,
    )
    .await
    {
        Err(e) => {
            let _ = write!(out, "<p class=bad>{}</p>", esc(&e.to_string()));
        }
        Ok(c) if c.holds.is_empty() => {
            out.push_str("<p class=note>No hold queues: nothing is waiting.</p>")
        }
        Ok(c) => {
            let now = now_ms();
            let when = |ms: Option<i64>| {
                ms.map_or("-".into(), |ms| {
                    format!("{} (in {})", format_ms(ms), format_duration_ms(ms - now))
                })
            };
            out.push_str("<table id=\"holds\"><tr><th>delay</th><th>jobs</th><th>consumers</th><th>lease left</th><th>earliest release</th><th>latest release</th></tr>");
            for h in &c.holds {
                let consumers = if h.consumers > 0 {
                    format!(
                        "<span class=bad>{} (steals delayed jobs)</span>",
                        h.consumers
                    )
                } else {
                    "0".into()
                };
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td class=n>{}</td><td class=n>{consumers}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    format_duration_ms(i64::try_from(h.delay_ms).unwrap_or(i64::MAX)),
                    h.jobs,
                    h.lease_left_ms.map_or("in use".into(), format_duration_ms),
                    when(h.earliest_release_ms),
                    when(h.latest_release_ms),
                );
            }
            out.push_str("</table>");
        }
    }
    out
}

async fn topology_section(app: &App, queue: &str) -> String {
    let (spec, configured) = app.spec_for(queue);
    let mut out = String::from("<h2>Topology</h2>");
    if !configured {
        out.push_str("<p class=note>Checked against queuey's defaults (priorities 0–10, durable, dead letters on); start the dashboard with --config to check against your queue set.</p>");
    }
    match topology::verify(&app.mgmt, Some(&app.amqp), &spec).await {
        Err(e) => {
            let _ = write!(out, "<p class=bad>{}</p>", esc(&e.to_string()));
        }
        Ok(problems) if problems.is_empty() => {
            out.push_str("<p class=ok id=\"topology-ok\">No problems.</p>")
        }
        Ok(problems) => {
            out.push_str("<table id=\"problems\"><tr><th>queue</th><th>problem</th></tr>");
            for p in problems {
                let _ = write!(
                    out,
                    "<tr><td><code>{}</code></td><td class=bad>{}</td></tr>",
                    esc(&p.queue),
                    esc(&p.detail)
                );
            }
            out.push_str("</table>");
        }
    }
    out
}

/// `/queue/{q}/dead/{id}`: one dead letter.
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((queue, id)): Path<(String, String)>,
) -> PageResult {
    app.admit(&queue).await?;
    let csrf = session.csrf.as_str();
    let dq = app.dead_queue(&queue)?;
    let detail = dead::show(&dead::find(&app.amqp, &dq, &id, Some(READ_CAP)).await?);
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let fields = [("id", detail.summary.id.as_str())];
    let action = format!("/queue/{}/redrive", seg(&queue));
    let body = format!(
        "<p>reason: <b>{}</b><br>fingerprint: <code>{}</code><br>back to: <code>{}</code></p>\
         <p>{}</p><h2>Headers</h2><pre>{}</pre><h2>Properties</h2><pre>{}</pre>\
         <h2>Envelope</h2><pre>{}</pre><h2>Payload</h2><pre id=\"payload\">{}</pre>",
        esc(&detail.summary.reason),
        esc(&detail.summary.fingerprint),
        esc(detail.summary.original_queue.as_deref().unwrap_or("-")),
        post_form(
            &action,
            csrf,
            &fields,
            "Redrive this one…",
            "",
            "redrive-one"
        ),
        esc(&pretty(
            &serde_json::to_value(&detail.headers).unwrap_or_default()
        )),
        esc(&pretty(
            &serde_json::to_value(&detail.properties).unwrap_or_default()
        )),
        esc(&detail
            .envelope
            .as_ref()
            .map_or("(not a queuey envelope)".to_owned(), pretty)),
        esc(&pretty(&detail.payload)),
    );
    Ok(Html(page(
        &format!("Dead letter {}", detail.summary.id),
        &body,
    )))
}

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
    let dq = app.dead_queue(&queue)?;
    let options = RedriveOptions {
        filter: form.filter(),
        ..RedriveOptions::new(&queue)
    };
    if form.confirm != "yes" {
        let plan = dead::plan_redrive(&app.amqp, &dq, &options).await?;
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
    let report = dead::redrive(&app.amqp, &dq, &options, &mut |_| {}).await?;
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
    let dq = app.dead_queue(&queue)?;
    let filter = form.filter();
    if form.confirm != "yes" {
        let plan = dead::plan_purge(&app.amqp, &dq, &filter).await?;
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
    let report = dead::purge_with_export(&app.amqp, &dq, &filter, &path).await?;
    let body = format!(
        "<div class=box><p class=ok id=\"result\">Exported {} dead letters to <code>{}</code>, then removed them.</p><p>Restore them with <code>queuey dead import {}</code>.</p><p>{}</p></div>",
        report.purged,
        esc(&path.display().to_string()),
        esc(&path.display().to_string()),
        back(&queue)
    );
    Ok(Html(page(&format!("Purge {queue}: done"), &body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_queues_are_the_dashboards_and_no_other() {
        let listed = vec!["a".to_owned()];
        let everything = |_: &str| true;
        assert!(on_dashboard(&listed, "a", "a.dead", everything));
        for other in ["b", "a.dead", "A", "a "] {
            assert!(
                !on_dashboard(&listed, other, "x.dead", everything),
                "{other}"
            );
        }
    }

    #[test]
    fn with_none_listed_every_queue_with_a_dead_letter_queue_is() {
        let existing = ["a", "a.dead", "b", "c.dead"];
        let exists = |n: &str| existing.contains(&n);
        assert!(on_dashboard(&[], "a", "a.dead", exists));
        assert!(
            !on_dashboard(&[], "b", "b.dead", exists),
            "no dead-letter queue"
        );
        assert!(!on_dashboard(&[], "c", "c.dead", exists), "no work queue");
        assert!(
            !on_dashboard(&[], "a.dead", "a.dead", exists),
            "a dead-letter queue is not a work queue"
        );
    }
}
