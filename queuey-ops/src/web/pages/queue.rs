//! `/queue/{q}`: a queue's dead letters, holds and topology (a sharded
//! queue's: of its lane and every shard, with a row per shard); and one
//! dead letter in full.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use maud::{Markup, html};

use super::{LISTED, PageResult, READ_CAP};
use crate::amqp::QueueCounts;
use crate::dead;
use crate::holds;
use crate::shards::{self, Member, Shards};
use crate::time::{format_duration_ms, now_ms, when};
use crate::topology::{self, QueueSpec, TopologySpec};
use crate::web::App;
use crate::web::html::{Tone, back_to_queue, heads, nav, page, post_form, queue_path, seg, shown};
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
    let members = app.member_counts(&shards).await?;
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
    let action = |verb: &str| queue_path(&queue, verb);
    let counts = members.iter().filter_map(|(_, work, _)| *work);
    let (ready, consumers) = counts.fold((0, 0), |(r, c), w| (r + w.messages, c + w.consumers));
    let paused = app.fleet.state().await?.is_paused(&queue);
    let workers = app.fleet.workers().await?;
    let unheard = super::control::unheard(&app, &queue, work.consumers, &workers).await;
    let holds = holds_section(&app, &shards).await;
    let topology = topology_section(&app, &queue, shards.count).await;
    let lane = lane_link(&app, &queue).await;
    let body = html! {
        (nav(lane))
        p {
            (ready) " ready · " (consumers) " consumer(s) · " b #dead-count { (pass.read) }
            " dead letter(s) in " code { (shown(&queues.describe())) }
        }
        @if shards.is_sharded() { (shards_table(&shards, &members)) }
        @if let Some(unheard) = &unheard {
            p.bad #unheard {
                (shown(&unheard.to_string())) ": pausing or resuming it here reaches only the \
                 workers that follow " code { (shown(&app.config.control_stream)) } "."
            }
        }
        div.box #control {
            p {
                @if paused {
                    span.warn #paused { "Paused: no worker takes its jobs." } " "
                    (post_form(&action("resume"), csrf, &[], "Resume…", Tone::Neutral, "resume"))
                } @else {
                    span.ok #running { "Running." } " "
                    (post_form(&action("pause"), csrf, &[], "Pause…", Tone::Neutral, "pause"))
                }
            }
            form method="post" action="/job/cancel" {
                input type="hidden" name="csrf" value=(csrf);
                label {
                    "Cancel a job by id "
                    input name="job_id" #cancel-id size="38"
                        placeholder="67e55044-10b1-426f-9247-bb680e5fe0c8";
                }
                " "
                button type="submit" class=(Tone::Danger.class()) #cancel-job { "Cancel…" }
            }
        }
        h2 { "Dead letters by reason" }
        @if !pass.complete {
            p.note { "Showing the oldest " (READ_CAP) "; `queuey dead stats` reads them all." }
        }
        @if pass.read == 0 {
            p.ok #no-dead { "No dead letters." }
        } @else {
            p {
                (post_form(&action("redrive"), csrf, &[], "Redrive all…", Tone::Neutral, "redrive-all"))
                " "
                (post_form(&action("purge"), csrf, &[], "Purge all (with export)…", Tone::Danger, "purge-all"))
            }
            table #groups {
                (heads(&["count", "fingerprint", "job types", "example", ""]))
                @for (i, g) in stats.by_fingerprint.iter().enumerate() {
                    @let fields = [("fingerprint", g.fingerprint.as_str())];
                    tr {
                        td.n { (g.count) }
                        td { code { (shown(&g.fingerprint)) } }
                        td {
                            @for (n, (t, count)) in g.job_types.iter().enumerate() {
                                @if n > 0 { br; }
                                (shown(t)) " ×" (count)
                            }
                        }
                        td {
                            a href={ (queue_path(&queue, "dead")) "/" (seg(&g.example_id)) } {
                                (shown(&g.example_reason))
                            }
                        }
                        td {
                            (post_form(&action("redrive"), csrf, &fields, "Redrive…", Tone::Neutral, &format!("redrive-{i}")))
                            " "
                            (post_form(&action("purge"), csrf, &fields, "Purge…", Tone::Danger, &format!("purge-{i}")))
                        }
                    }
                }
            }
            h2 { "Oldest " (oldest.len()) " dead letters" }
            @let now = now_ms();
            table #dead {
                @let columns = ["shard", "#", "id", "type", "attempts", "died", "reason"];
                (heads(&columns[usize::from(!queues.sharded)..]))
                @for s in &oldest {
                    // A position names a letter in one dead-letter queue:
                    // the shard's page finds it.
                    @let page_queue = match queues.queues.iter().find(|q| q.shard == s.shard) {
                        Some(q) if s.id.starts_with('#') => q.work_queue.as_str(),
                        _ => queue.as_str(),
                    };
                    tr {
                        @if queues.sharded { td { (shown(&queues.label(s.shard))) } }
                        td.n { (s.position) }
                        td {
                            a href={ (queue_path(page_queue, "dead")) "/" (seg(&s.id)) } {
                                code { (shown(&s.id)) }
                            }
                        }
                        td { (shown(s.job_type.as_deref().unwrap_or("-"))) }
                        td.n {
                            @match s.attempts { Some(a) => (a), None => "-" }
                        }
                        td.died { (s.died_at_ms.map_or("-".to_owned(), |ms| when(ms, now))) }
                        td { (shown(&s.reason)) }
                    }
                }
            }
        }
        (holds)
        (topology)
    };
    Ok(page(&format!("Queue {queue}"), body))
}

/// The link from a shard's page to its sharded queue's, when `queue` is a
/// shard by the rule the queue pages follow ([`shards::discover`]) and
/// that queue's page is on the dashboard.
async fn lane_link(app: &App, queue: &str) -> Option<Markup> {
    let (lane, index) = shards::parse_shard_name(queue)?;
    app.admit(lane).await.ok()?;
    let shards = shards::discover(&app.amqp, lane).await.ok()?;
    (shards.count > index).then(|| {
        html! {
            "shard of " a href=(queue_path(lane, "")) #lane { (shown(lane)) }
        }
    })
}

/// The table of a sharded queue's lane and shards; a member missing on
/// the broker is left out.
fn shards_table(shards: &Shards, members: &[(Member, Option<QueueCounts>, Option<u32>)]) -> Markup {
    html! {
        h2 { "Shards" }
        p.note {
            (shown(&shards.queue)) " is spread over " (shards.count) " shards besides itself (the \
             lane, where producers that do not shard publish)."
        }
        table #shards {
            (heads(&["shard", "queue", "ready", "consumers", "dead letters"]))
            @for (m, work, dead) in members {
                @if let Some(work) = work {
                    tr {
                        td { (shown(&shards::label(true, m.shard))) }
                        td { a href=(queue_path(&m.queue, "")) { code { (shown(&m.queue)) } } }
                        td.n { (work.messages) }
                        td.n { (work.consumers) }
                        td.n { @match dead { Some(n) => (n), None => "-" } }
                    }
                }
            }
        }
    }
}

async fn holds_section(app: &App, shards: &Shards) -> Markup {
    let suffix = &app.config.deferred_suffix;
    let census = holds::census_of(&app.mgmt, &app.amqp, shards, suffix, 100).await;
    let now = now_ms();
    html! {
        h2 { "Hold queues" }
        @match census {
            Err(e) => p.bad { (shown(&e.to_string())) },
            Ok(c) if c.holds.is_empty() => {
                p.note { "No hold queues: nothing is waiting." }
            }
            Ok(c) => {
                @let sharded = c.shards > 0;
                table #holds {
                    @let columns = [
                        "shard", "delay", "jobs", "consumers", "lease left", "earliest release",
                        "latest release",
                    ];
                    (heads(&columns[usize::from(!sharded)..]))
                    @for h in &c.holds {
                        tr {
                            @if sharded { td { (shown(&shards::label(true, h.shard))) } }
                            td { (format_duration_ms(h.delay_ms)) }
                            td.n { (h.jobs) }
                            td.n {
                                @if h.consumers > 0 {
                                    span.bad { (h.consumers) " (steals delayed jobs)" }
                                } @else {
                                    "0"
                                }
                            }
                            td { (h.lease_left_ms.map_or("in use".into(), format_duration_ms)) }
                            td { (h.earliest_text(now)) }
                            td { (h.latest_text(now)) }
                        }
                    }
                }
                @for h in c.holds.iter().filter(|h| h.release_note.is_some()) {
                    p.note.release-note {
                        code { (shown(&h.name)) } ": "
                        (shown(h.release_note.as_deref().unwrap_or_default()))
                    }
                }
            }
        }
    }
}

/// The topology problems of `queue`, checked against the configured queue
/// set, else queuey's defaults with the `shards` found.
async fn topology_section(app: &App, queue: &str, shards: u16) -> Markup {
    let configured = (app.config.topology.as_ref()).and_then(|t| {
        let q = t.queues.iter().find(|q| q.name == queue)?;
        Some(TopologySpec {
            queues: vec![q.clone()],
            ..t.clone()
        })
    });
    let defaults = configured.is_none();
    let spec = configured.unwrap_or_else(|| TopologySpec {
        dead_suffix: app.config.dead_suffix.clone(),
        deferred_suffix: app.config.deferred_suffix.clone(),
        suspect_suffix: crate::DEFAULT_SUSPECT_SUFFIX.to_owned(),
        queues: vec![QueueSpec {
            shards: shards.max(1),
            ..QueueSpec::new(queue)
        }],
    });
    let verified = topology::verify(&app.mgmt, Some(&app.amqp), &spec).await;
    html! {
        h2 { "Topology" }
        @if defaults {
            p.note {
                "Checked against queuey's defaults (priorities 0–10, durable, dead letters on); \
                 start the dashboard with --config to check against your queue set."
            }
        }
        @match verified {
            Err(e) => p.bad { (shown(&e.to_string())) },
            Ok(problems) if problems.is_empty() => p.ok #topology-ok { "No problems." },
            Ok(problems) => {
                table #problems {
                    (heads(&["queue", "problem"]))
                    @for p in &problems {
                        tr {
                            td { code { (shown(&p.queue)) } }
                            td.bad { (shown(&p.detail)) }
                        }
                    }
                }
            }
        }
    }
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
    let json = |v: Result<serde_json::Value, _>| pretty(&v.unwrap_or_default());
    let fields = [("id", detail.summary.id.as_str())];
    let now = now_ms();
    let at = |ms: Option<i64>| ms.map_or("- (unknown)".to_owned(), |ms| when(ms, now));
    let enqueued = detail
        .summary
        .enqueued_at_ms
        .filter(|&ms| ms > 0)
        .and_then(|ms| i64::try_from(ms).ok());
    let history = &detail.history;
    let body = html! {
        (nav(Some(back_to_queue(&queue))))
        p {
            "reason: " b { (shown(&detail.summary.reason)) } br;
            "died at: " span #died-at { (at(detail.summary.died_at_ms)) } br;
            @if enqueued.is_some() {
                "first enqueued: " span #enqueued-at { (at(enqueued)) } br;
            }
            @if let Some(error) = &detail.parse_error {
                "parse error: " code #parse-error { (shown(error)) } br;
            }
            "fingerprint: " code { (shown(&detail.summary.fingerprint)) } br;
            "back to: " code { (shown(detail.summary.original_queue.as_deref().unwrap_or("-"))) }
            @if queues.sharded {
                br;
                "shard: " span #shard { (shown(&queues.label(detail.summary.shard))) }
            }
        }
        p {
            (post_form(&queue_path(&queue, "redrive"), csrf, &fields, "Redrive this one…", Tone::Neutral, "redrive-one"))
        }
        @if !history.errors.is_empty() {
            h2 { "Attempts" }
            @if history.cut > 0 {
                p.note #errors-cut { (history.cut) " earlier errors were not kept." }
            }
            table #attempts {
                (heads(&["attempt", "failed at", "error"]))
                @for row in &history.errors {
                    tr {
                        td.n { (row.attempt) @if row.last { " (died)" } }
                        td { (at(row.at_ms.and_then(|ms| i64::try_from(ms).ok()))) }
                        td { (shown(&row.error)) }
                    }
                }
            }
        }
        h2 { "Headers" }
        pre { (shown(&json(serde_json::to_value(&detail.headers)))) }
        h2 { "Properties" }
        pre { (shown(&json(serde_json::to_value(&detail.properties)))) }
        h2 { "Envelope" }
        pre {
            (shown(&detail.envelope.as_ref().map_or("(not a queuey envelope)".to_owned(), pretty)))
        }
        h2 { "Payload" }
        pre #payload { (shown(&pretty(&detail.payload))) }
    };
    Ok(page(&format!("Dead letter {}", detail.summary.id), body))
}
