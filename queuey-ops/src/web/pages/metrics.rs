//! `/metrics`: the fleet and its queues for Prometheus, in its text
//! exposition format.

use std::collections::HashSet;
use std::fmt::{Display, Write as _};
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::PageError;
use crate::holds::{self, label};
use crate::shards;
use crate::web::App;

/// Writes a metric family: its help and type (a counter when its name ends
/// in `_total`, else a gauge), then a sample per `(labels, value)`, the
/// labels already in Prometheus form.
fn family<V: Display>(
    out: &mut String,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (String, V)>,
) {
    let kind = if name.ends_with("_total") {
        "counter"
    } else {
        "gauge"
    };
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// The `queue` label of `queue`.
fn on(queue: &str) -> String {
    format!("queue=\"{}\"", label(queue))
}

/// GET `/metrics`: queue, dead-letter and hold counts from the broker (a
/// sharded queue's summed over its lane and shards, its holds labelled by
/// shard); the fleet's workers, running jobs, paused queues and settled
/// jobs from the workers' heartbeats.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Result<Response, PageError> {
    let infos = app.mgmt.queues(None).await?;
    let queues = app.queues_of(&infos);
    let workers = app.fleet.workers().await?;
    let state = app.fleet.state().await?;
    let names: HashSet<&str> = infos.iter().map(|i| i.name.as_str()).collect();
    // Ready and dead-letter counts are exact, unacknowledged ones statistics.
    let mut counts = Vec::new();
    let mut censuses = Vec::new();
    for q in &queues {
        let shards = shards::in_listing(q, |n| names.contains(n));
        let members = app.member_counts(&shards).await?;
        let ready = members
            .iter()
            .filter_map(|(_, work, _)| work.map(|w| w.messages));
        let dead = members.iter().filter_map(|(_, _, dead)| *dead);
        let unacked = members
            .iter()
            .filter_map(|(m, _, _)| infos.iter().find(|i| i.name == m.queue))
            .filter_map(|i| i.messages_unacknowledged);
        let sums = [
            ready.map(u64::from).reduce(|a, b| a + b),
            unacked.reduce(|a, b| a + b),
            dead.map(u64::from).reduce(|a, b| a + b),
        ];
        counts.push((on(q), sums));
        let suffix = &app.config.deferred_suffix;
        censuses.push(holds::census_of(&app.mgmt, &app.amqp, &shards, suffix, 0).await?);
    }
    let mut out = String::new();
    let exact = |i: usize| {
        let sums = counts.iter();
        sums.filter_map(move |(q, sums): &(String, [Option<u64>; 3])| Some((q.clone(), sums[i]?)))
    };
    family(
        &mut out,
        "queuey_queue_ready",
        "Jobs ready in a work queue.",
        exact(0),
    );
    let help = "Jobs of a work queue delivered to a worker and not yet settled, by the management \
                API's statistics (a few seconds behind).";
    family(&mut out, "queuey_queue_unacked", help, exact(1));
    let help = "Jobs in a work queue's dead-letter queue.";
    family(&mut out, "queuey_dead_letters", help, exact(2));
    let help = "1 while a work queue is paused for the whole fleet.";
    let paused = queues.iter().map(|q| (on(q), u8::from(state.is_paused(q))));
    family(&mut out, "queuey_queue_paused", help, paused);
    let help = "Workers heard from recently that consume a queue.";
    let consuming = |q: &String| workers.iter().filter(|w| w.queues.contains(q)).count();
    family(
        &mut out,
        "queuey_workers",
        help,
        queues.iter().map(|q| (on(q), consuming(q))),
    );
    let help = "Jobs the fleet runs right now, by queue.";
    let running = |q: &String| {
        let jobs = workers.iter().flat_map(|w| &w.running);
        jobs.filter(|j| &j.queue == q).count()
    };
    family(
        &mut out,
        "queuey_jobs_running",
        help,
        queues.iter().map(|q| (on(q), running(q))),
    );
    let help = "Jobs the fleet settled since this dashboard started, by queue and outcome (from \
                the workers' heartbeats).";
    let totals = app.history.totals();
    let settled = totals.iter().filter(|(q, _)| queues.contains(q));
    let settled = settled.flat_map(|(q, c)| {
        [
            ("finished", c.finished),
            ("retried", c.retried),
            ("deferred", c.deferred),
            ("dead_lettered", c.dead_lettered),
        ]
        .map(|(outcome, n)| (format!("{},outcome=\"{outcome}\"", on(q)), n))
    });
    family(&mut out, "queuey_fleet_jobs_total", help, settled);
    out.push_str(&holds::prometheus(&censuses));
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    Ok(([(header::CONTENT_TYPE, content_type)], out).into_response())
}
