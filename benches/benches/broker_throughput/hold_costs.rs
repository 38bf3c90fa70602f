//! `holds-create`: what hold queues cost the broker, quorum against
//! classic.
//!
//! Each run creates [`HOLDS`] fresh hold queues of one kind for one fresh
//! work-queue name, declared one after the other on one channel with the
//! names and arguments queuey gives them ([`HoldQueues::name`],
//! [`HoldQueues::arguments`]), as [`HOLDS`] distinct delays would: TTLs from
//! [`FIRST_TTL_MS`] in steps of [`TTL_STEP_MS`] (a classic hold's
//! `x-expires` lease is twice its TTL, so none expires during the run).
//! Each declaration is timed. After [`SETTLE`] the broker's memory for them
//! is read twice: the `memory` column of `rabbitmqctl list_queues` summed
//! over the new queues, and the growth of `erlang:memory(total)` since
//! before the first declaration, both per queue. Then they are deleted one
//! by one, timed. The kind that goes first alternates between runs.
//!
//! `rabbitmqctl` must reach the broker's node from this machine (it runs
//! with the defaults, so the node on this host); otherwise, or when it does
//! not list every queue created, the memory columns say n/a.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::uri::AMQPUri;
use queuey::rabbitmq::{HoldQueues, RabbitMqOptions};

use crate::broker::{self, Broker, bounded, close, rabbitmqctl};
use crate::holds::{KINDS, kind_name};
use crate::report::median;
use crate::{BenchResult, PAUSE, Settings};

/// The row id.
pub(crate) const ID: &str = "holds-create";
/// Hold queues created per run.
const HOLDS: usize = 50;
/// The first hold's TTL, and the step between two holds' TTLs.
const FIRST_TTL_MS: u64 = 600_000;
const TTL_STEP_MS: u64 = 1_000;
/// How long the new queues settle before their memory is read (a quorum
/// queue starts its Raft member after the declare-ok).
const SETTLE: Duration = Duration::from_secs(3);

/// One run's measurements.
#[derive(Debug, Default)]
struct Costs {
    /// Milliseconds per declaration (creating the queue).
    declare_ms: Vec<f64>,
    /// Milliseconds per deletion.
    delete_ms: Vec<f64>,
    /// Bytes per queue by `list_queues`, one value per run read.
    listed: Vec<f64>,
    /// Bytes per queue of `erlang:memory(total)` growth, one value per run
    /// read.
    erlang: Vec<f64>,
}

impl Costs {
    fn absorb(&mut self, run: Costs) {
        self.declare_ms.extend(run.declare_ms);
        self.delete_ms.extend(run.delete_ms);
        self.listed.extend(run.listed);
        self.erlang.extend(run.erlang);
    }
}

/// Runs the row and returns its table.
pub(crate) async fn measure(broker: &Broker, settings: &Settings) -> BenchResult<String> {
    let uri: AMQPUri = settings
        .url
        .parse()
        .map_err(|e| format!("AMQP_URL is not an AMQP URL: {e}"))?;
    let connection = broker.connect_named(&broker.connection_name(ID)).await?;
    let mut costs = [Costs::default(), Costs::default()];
    let measured = async {
        for run in 0..settings.runs {
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                tokio::time::sleep(PAUSE).await;
                let created = create(broker, &connection, KINDS[k], &uri.vhost).await;
                // The queues are deleted by the run; this deletes them if it
                // failed half-way.
                broker.delete_created().await?;
                let created = created?;
                println!(
                    "create {HOLDS} hold queues                          run {}/{}  {:<7} declare median {:.2} ms, max {:.2} ms; delete median {:.2} ms; memory per queue: listed {}, erlang {}",
                    run + 1,
                    settings.runs,
                    kind_name(KINDS[k]),
                    median(created.declare_ms.clone()),
                    max(&created.declare_ms),
                    median(created.delete_ms.clone()),
                    kilobytes(median(created.listed.clone())),
                    kilobytes(median(created.erlang.clone())),
                );
                costs[k].absorb(created);
            }
        }
        BenchResult::Ok(())
    }
    .await;
    let _ = connection.close(200, "hold queue costs done".into()).await;
    measured?;
    Ok(table(settings, &costs))
}

/// One run: creates, measures and deletes [`HOLDS`] hold queues of `kind`.
async fn create(
    broker: &Broker,
    connection: &lapin::Connection,
    kind: HoldQueues,
    vhost: &str,
) -> BenchResult<Costs> {
    // Only the holds' prefix and dead-letter target: no message ever moves.
    let queue = broker.fresh_queue();
    let suffix = RabbitMqOptions::default()
        .settings()
        .deferred_suffix()
        .to_owned();
    let mut holds = Vec::with_capacity(HOLDS);
    for i in 0..HOLDS as u64 {
        let ttl_ms = FIRST_TTL_MS + i * TTL_STEP_MS;
        let name = kind.name(&queue, &suffix, ttl_ms)?;
        broker.track(&name);
        holds.push((
            name,
            queuey::rabbitmq::__private::field_table(&kind.arguments(&queue, ttl_ms)),
        ));
    }
    let channel = connection.create_channel().await?;
    let mut costs = Costs::default();
    let before = erlang_memory().await;
    for (name, arguments) in &holds {
        let started = Instant::now();
        bounded(
            "declaring a hold queue",
            channel.queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::durable(),
                arguments.clone(),
            ),
        )
        .await??;
        costs.declare_ms.push(millis(started.elapsed()));
    }
    tokio::time::sleep(SETTLE).await;
    let names: Vec<&str> = holds.iter().map(|(name, _)| name.as_str()).collect();
    if let Some(bytes) = listed_memory(vhost, &names).await {
        costs.listed.push(bytes as f64 / HOLDS as f64);
    }
    if let (Some(before), Some(after)) = (before, erlang_memory().await) {
        costs
            .erlang
            .push((after as f64 - before as f64) / HOLDS as f64);
    }
    for name in names {
        let started = Instant::now();
        bounded(
            "deleting a hold queue",
            channel.queue_delete(name.into(), QueueDeleteOptions::default()),
        )
        .await??;
        costs.delete_ms.push(millis(started.elapsed()));
    }
    close(&channel).await;
    Ok(costs)
}

/// The table: one line per kind, then quorum/classic.
fn table(settings: &Settings, costs: &[Costs; 2]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Hold-queue creation and memory: {HOLDS} fresh hold queues per run declared one after \
         the other on one channel with queuey's names and arguments, {} runs per kind; times \
         over all declarations, memory per queue {} s after the last declaration (median of \
         the runs).\n",
        settings.runs,
        SETTLE.as_secs()
    );
    let _ = writeln!(
        out,
        "| hold kind | declarations | declare (create) median / max | delete median / max | `list_queues` memory per queue | `erlang:memory(total)` growth per queue |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|");
    for (kind, c) in KINDS.iter().zip(costs) {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} ms / {:.2} ms | {:.2} ms / {:.2} ms | {} | {} |",
            kind_name(*kind),
            c.declare_ms.len(),
            median(c.declare_ms.clone()),
            max(&c.declare_ms),
            median(c.delete_ms.clone()),
            max(&c.delete_ms),
            kilobytes(median(c.listed.clone())),
            kilobytes(median(c.erlang.clone())),
        );
    }
    let ratio = |f: fn(&Costs) -> f64| {
        let r = f(&costs[0]) / f(&costs[1]);
        if r.is_finite() {
            format!("{r:.2}×")
        } else {
            "–".to_owned()
        }
    };
    let _ = writeln!(
        out,
        "| quorum/classic | | {} (median) | {} (median) | {} | {} |",
        ratio(|c| median(c.declare_ms.clone())),
        ratio(|c| median(c.delete_ms.clone())),
        ratio(|c| median(c.listed.clone())),
        ratio(|c| median(c.erlang.clone())),
    );
    out
}

/// The total of the `memory` column of `rabbitmqctl list_queues` over
/// `names`, if every one of them is listed.
async fn listed_memory(vhost: &str, names: &[&str]) -> Option<u64> {
    let listed = broker::listed(vhost, "memory").await?;
    names.iter().map(|name| listed.get(*name)).sum()
}

/// The broker node's `erlang:memory(total)`, in bytes.
async fn erlang_memory() -> Option<u64> {
    rabbitmqctl(&["-q", "eval", "erlang:memory(total)."])
        .await?
        .trim()
        .parse()
        .ok()
}

fn millis(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1_000.0
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

/// "89 KB" (1000 bytes), or n/a.
fn kilobytes(bytes: f64) -> String {
    if bytes.is_finite() {
        format!("{:.0} KB", bytes / 1_000.0)
    } else {
        "n/a".to_owned()
    }
}
