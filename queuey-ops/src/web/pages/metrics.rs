//! `/metrics`: the fleet and its queues for Prometheus, in its text
//! exposition format.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::PageError;
use crate::holds::{self, label};
use crate::shards::{self, Shards};
use crate::web::App;

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
}

/// GET `/metrics`: queue, dead-letter and hold counts from the broker (a
/// sharded queue's summed over its lane and shards, its holds labelled by
/// shard); the fleet's workers, running jobs, paused queues and settled
/// jobs from the workers' heartbeats.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Result<Response, PageError> {
    let queues = app.shown_queues().await?;
    let infos = app.mgmt.queues(None).await?;
    let workers = app.fleet.workers().await?;
    let state = app.fleet.state().await?;
    let mut out = String::new();

    // A sharded queue counts as one: its lane's and every shard's counts
    // together, its shards found in the listing.
    let names: HashSet<&str> = infos.iter().map(|i| i.name.as_str()).collect();
    let sharded: Vec<Shards> = queues
        .iter()
        .map(|q| shards::in_listing(q, |n| names.contains(n)))
        .collect();
    // Ready and dead-letter counts exactly (a passive declare), as a
    // queue's page reads them; the management API's statistics lag.
    let mut ready = Vec::new();
    let mut dead = Vec::new();
    for shards in &sharded {
        let (mut r, mut d) = (None, None);
        for member in shards.members() {
            let add = |sum: &mut Option<u32>, n: Option<u32>| {
                if let Some(n) = n {
                    *sum = Some(sum.unwrap_or(0) + n);
                }
            };
            add(
                &mut r,
                app.amqp.counts(&member.queue).await?.map(|c| c.messages),
            );
            let dq = app.dead_queue(&member.queue)?;
            add(&mut d, app.amqp.counts(&dq).await?.map(|c| c.messages));
        }
        ready.push(r);
        dead.push(d);
    }
    family(
        &mut out,
        "queuey_queue_ready",
        "gauge",
        "Jobs ready in a work queue.",
    );
    for (q, n) in queues.iter().zip(&ready) {
        if let Some(n) = n {
            let _ = writeln!(out, "queuey_queue_ready{{queue=\"{}\"}} {n}", label(q));
        }
    }
    family(
        &mut out,
        "queuey_queue_unacked",
        "gauge",
        "Jobs of a work queue delivered to a worker and not yet settled, by the management \
         API's statistics (a few seconds behind).",
    );
    for (q, shards) in queues.iter().zip(&sharded) {
        if let Some(v) = shards
            .members()
            .iter()
            .filter_map(|m| infos.iter().find(|i| i.name == m.queue))
            .filter_map(|i| i.messages_unacknowledged)
            .reduce(|a, b| a + b)
        {
            let _ = writeln!(out, "queuey_queue_unacked{{queue=\"{}\"}} {v}", label(q));
        }
    }
    family(
        &mut out,
        "queuey_dead_letters",
        "gauge",
        "Jobs in a work queue's dead-letter queue.",
    );
    for (q, n) in queues.iter().zip(&dead) {
        if let Some(n) = n {
            let _ = writeln!(out, "queuey_dead_letters{{queue=\"{}\"}} {n}", label(q));
        }
    }
    family(
        &mut out,
        "queuey_queue_paused",
        "gauge",
        "1 while a work queue is paused for the whole fleet.",
    );
    for q in &queues {
        let _ = writeln!(
            out,
            "queuey_queue_paused{{queue=\"{}\"}} {}",
            label(q),
            u8::from(state.is_paused(q))
        );
    }
    family(
        &mut out,
        "queuey_workers",
        "gauge",
        "Workers heard from recently that consume a queue.",
    );
    family(
        &mut out,
        "queuey_jobs_running",
        "gauge",
        "Jobs the fleet runs right now, by queue.",
    );
    for q in &queues {
        let consuming = workers.iter().filter(|w| w.queues.contains(q)).count();
        let running: usize = workers
            .iter()
            .map(|w| w.running.iter().filter(|j| &j.queue == q).count())
            .sum();
        let _ = writeln!(out, "queuey_workers{{queue=\"{}\"}} {consuming}", label(q));
        let _ = writeln!(
            out,
            "queuey_jobs_running{{queue=\"{}\"}} {running}",
            label(q)
        );
    }
    family(
        &mut out,
        "queuey_fleet_jobs_total",
        "counter",
        "Jobs the fleet settled since this dashboard started, by queue and outcome \
         (from the workers' heartbeats).",
    );
    for (q, counts) in app.history.totals() {
        if !queues.contains(&q) {
            continue;
        }
        for (outcome, n) in [
            ("finished", counts.finished),
            ("retried", counts.retried),
            ("deferred", counts.deferred),
            ("dead_lettered", counts.dead_lettered),
        ] {
            let _ = writeln!(
                out,
                "queuey_fleet_jobs_total{{queue=\"{}\",outcome=\"{outcome}\"}} {n}",
                label(&q)
            );
        }
    }
    let mut censuses = Vec::new();
    for shards in &sharded {
        censuses.push(
            holds::census_of(&app.mgmt, &app.amqp, shards, &app.config.deferred_suffix, 0).await?,
        );
    }
    out.push_str(&holds::prometheus(&censuses));
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response())
}
