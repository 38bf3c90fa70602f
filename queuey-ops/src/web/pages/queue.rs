//! `/queue/{q}`: a queue's dead letters, holds and topology (a sharded
//! queue's: of its lane and every shard, with a row per shard); and one
//! dead letter in full.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::Html;

use super::{LISTED, PageResult, READ_CAP};
use crate::dead;
use crate::holds;
use crate::shards::{self, Shards};
use crate::time::{format_duration_ms, format_ms, now_ms};
use crate::topology;
use crate::web::App;
use crate::web::html::{esc, page, post_form, seg};
use crate::web::session::Session;

/// `/queue/{q}`: dead letters, holds and topology of one queue.
pub(crate) async fn queue(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(queue): Path<String>,
) -> PageResult {
    app.admit(&queue).await?;
    let csrf = session.csrf.as_str();
    let work = app.amqp.require(&queue).await?;
    let (shards, queues) = app.dead_queues(&queue).await?;
    let members = member_counts(&app, &shards, &queues).await?;
    let mut grouped = dead::StatsBuilder::new();
    let mut oldest = Vec::new();
    let pass = queues
        .scan(&app.amqp, Some(READ_CAP), |l| {
            grouped.add(&l);
            if oldest.len() < LISTED {
                oldest.push(l.summary());
            }
            std::ops::ControlFlow::Continue(())
        })
        .await?;
    let stats = grouped.finish();
    let action = |verb: &str| format!("/queue/{}/{verb}", seg(&queue));
    let (ready, consumers) = if shards.is_sharded() {
        members
            .iter()
            .fold((0, 0), |(r, c), m| (r + m.ready, c + m.consumers))
    } else {
        (work.messages, work.consumers)
    };
    let mut body = format!(
        "<p>{ready} ready · {consumers} consumer(s) · <b id=\"dead-count\">{}</b> dead letter(s) in <code>{}</code></p>",
        pass.read,
        esc(&queues.describe())
    );
    if shards.is_sharded() {
        body.push_str(&shards_table(&shards, &members));
    }
    let paused = app.fleet.state().await?.is_paused(&queue);
    let workers = app.fleet.workers().await?;
    if let Some(unheard) = super::control::unheard(&app, &queue, work.consumers, &workers).await {
        let _ = write!(
            body,
            "<p class=bad id=\"unheard\">{}: pausing or resuming it here reaches only the \
             workers that follow <code>{}</code>.</p>",
            esc(&unheard.to_string()),
            esc(&app.config.control_stream)
        );
    }
    let _ = write!(
        body,
        "<div class=box id=\"control\"><p>{} {}</p>\
         <form method=\"post\" action=\"/job/cancel\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>Cancel a job by id <input name=\"job_id\" id=\"cancel-id\" size=\"38\" \
         placeholder=\"67e55044-10b1-426f-9247-bb680e5fe0c8\"></label> \
         <button type=\"submit\" class=\"danger\" id=\"cancel-job\">Cancel…</button></form></div>",
        if paused {
            "<span class=bad id=\"paused\">Paused: no worker takes its jobs.</span>"
        } else {
            "<span class=ok id=\"running\">Running.</span>"
        },
        if paused {
            post_form(&action("resume"), csrf, &[], "Resume…", "go", "resume")
        } else {
            post_form(&action("pause"), csrf, &[], "Pause…", "danger", "pause")
        },
        esc(csrf),
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
        let shard_header = if queues.sharded { "<th>shard</th>" } else { "" };
        let _ = write!(
            body,
            "<table id=\"dead\"><tr>{shard_header}<th>#</th><th>id</th><th>type</th><th>attempts</th><th>reason</th></tr>"
        );
        for s in &oldest {
            let shard_cell = if queues.sharded {
                format!("<td>{}</td>", esc(&queues.label(s.shard)))
            } else {
                String::new()
            };
            // A position names a letter in one dead-letter queue: the
            // shard's page finds it.
            let page_queue = match queues.queues.iter().find(|q| q.shard == s.shard) {
                Some(q) if s.id.starts_with('#') => q.work_queue.as_str(),
                _ => queue.as_str(),
            };
            let _ = write!(
                body,
                "<tr>{shard_cell}<td class=n>{}</td><td><a href=\"/queue/{}/dead/{}\"><code>{}</code></a></td><td>{}</td><td class=n>{}</td><td>{}</td></tr>",
                s.position,
                seg(page_queue),
                seg(&s.id),
                esc(&s.id),
                esc(s.job_type.as_deref().unwrap_or("-")),
                s.attempts.map_or("-".into(), |a| a.to_string()),
                esc(&s.reason)
            );
        }
        body.push_str("</table>");
    }
    body.push_str(&holds_section(&app, &shards).await);
    body.push_str(&topology_section(&app, &queue, shards.count).await);
    Ok(Html(page(&format!("Queue {queue}"), &body)))
}

/// One broker queue of a sharded queue, counted exactly.
struct MemberCount {
    shard: Option<u16>,
    ready: u32,
    consumers: u32,
    dead: Option<u32>,
}

/// The counts of the lane and of each shard (a passive declare each); a
/// member missing on the broker is left out.
async fn member_counts(
    app: &App,
    shards: &Shards,
    queues: &dead::DeadQueues,
) -> Result<Vec<MemberCount>, crate::OpsError> {
    if !shards.is_sharded() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (member, dead) in shards.members().iter().zip(&queues.queues) {
        let Some(work) = app.amqp.counts(&member.queue).await? else {
            continue;
        };
        out.push(MemberCount {
            shard: member.shard,
            ready: work.messages,
            consumers: work.consumers,
            dead: app.amqp.counts(&dead.dead_queue).await?.map(|c| c.messages),
        });
    }
    Ok(out)
}

/// The table of a sharded queue's lane and shards.
fn shards_table(shards: &Shards, members: &[MemberCount]) -> String {
    let mut out = format!(
        "<h2>Shards</h2><p class=note>{} is spread over {} shards besides itself (the lane, \
         where producers that do not shard publish).</p><table id=\"shards\"><tr><th>shard</th>\
         <th>queue</th><th>ready</th><th>consumers</th><th>dead letters</th></tr>",
        esc(&shards.queue),
        shards.count
    );
    let names = shards.members();
    for m in members {
        let name = names
            .iter()
            .find(|n| n.shard == m.shard)
            .map_or("", |n| n.queue.as_str());
        let _ = write!(
            out,
            "<tr><td>{}</td><td><a href=\"/queue/{}\"><code>{}</code></a></td><td class=n>{}</td>\
             <td class=n>{}</td><td class=n>{}</td></tr>",
            esc(&shards::label(true, m.shard)),
            seg(name),
            esc(name),
            m.ready,
            m.consumers,
            m.dead.map_or("-".into(), |n| n.to_string()),
        );
    }
    out.push_str("</table>");
    out
}

async fn holds_section(app: &App, shards: &Shards) -> String {
    let mut out = String::from("<h2>Hold queues</h2>");
    match holds::census_of(
        &app.mgmt,
        &app.amqp,
        shards,
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
            let sharded = c.shards > 0;
            let _ = write!(
                out,
                "<table id=\"holds\"><tr>{}<th>delay</th><th>jobs</th><th>consumers</th><th>lease left</th><th>earliest release</th><th>latest release</th></tr>",
                if sharded { "<th>shard</th>" } else { "" }
            );
            for h in &c.holds {
                let shard = if sharded {
                    format!("<td>{}</td>", esc(&shards::label(true, h.shard)))
                } else {
                    String::new()
                };
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
                    "<tr>{shard}<td>{}</td><td class=n>{}</td><td class=n>{consumers}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
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

async fn topology_section(app: &App, queue: &str, shards: u16) -> String {
    let (spec, configured) = app.spec_for(queue, shards);
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
    let (_, queues) = app.dead_queues(&queue).await?;
    let detail = dead::show(&queues.find(&app.amqp, &id, Some(READ_CAP)).await?);
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let fields = [("id", detail.summary.id.as_str())];
    let action = format!("/queue/{}/redrive", seg(&queue));
    let body = format!(
        "<p>reason: <b>{}</b><br>fingerprint: <code>{}</code><br>back to: <code>{}</code>{}</p>\
         <p>{}</p><h2>Headers</h2><pre>{}</pre><h2>Properties</h2><pre>{}</pre>\
         <h2>Envelope</h2><pre>{}</pre><h2>Payload</h2><pre id=\"payload\">{}</pre>",
        esc(&detail.summary.reason),
        esc(&detail.summary.fingerprint),
        esc(detail.summary.original_queue.as_deref().unwrap_or("-")),
        if queues.sharded {
            format!(
                "<br>shard: <span id=\"shard\">{}</span>",
                esc(&queues.label(detail.summary.shard))
            )
        } else {
            String::new()
        },
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
