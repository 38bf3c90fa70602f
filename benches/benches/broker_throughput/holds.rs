//! Hold queues, quorum against classic: what queuey's default durable holds
//! ([`HoldQueues::Quorum`]) cost next to the first version's classic holds
//! ([`HoldQueues::Classic`]), on the same broker, runs alternating.
//!
//! - `holds-retry-1ms`, `holds-retry-100ms`: the retry rows' queuey run
//!   ([`queuey_side::retry`]: every job fails once and comes back through a
//!   hold queue) on a backend with quorum holds and on one with classic
//!   holds; jobs/s of each and quorum/classic against the bar for quorum
//!   holds to be the default: at most 20 % slower ([`RETRY_BAR`]).
//! - `holds-create`: the cost of the hold queues themselves, in
//!   [`hold_costs`](crate::hold_costs).

use std::fmt::Write as _;
use std::time::Duration;

use queuey::rabbitmq::topology;
use queuey::rabbitmq::{HoldQueues, RabbitMqBackend, RabbitMqOptions};

use crate::broker::Broker;
use crate::report::{cpu, lost, median, percent, rates, thousands};
use crate::{
    BenchResult, Measured, PAUSE, RETRY_HOLDS_MS, RETRY_PREFETCH, Settings, hold_costs, queuey_side,
};

/// The two kinds, in the order of the tables.
pub(crate) const KINDS: [HoldQueues; 2] = [HoldQueues::Quorum, HoldQueues::Classic];
/// Quorum holds may cost at most 20 % of the retry path's throughput
/// against classic holds to be the default.
const RETRY_BAR: f64 = 0.8;

/// A kind's short name, for connection names and tables.
pub(crate) fn kind_name(kind: HoldQueues) -> &'static str {
    match kind {
        HoldQueues::Quorum => "quorum",
        HoldQueues::Classic => "classic",
        _ => "other",
    }
}

/// The row id of the retry comparison with `hold_ms`.
fn retry_id(hold_ms: u16) -> String {
    format!("holds-retry-{hold_ms}ms")
}

/// Whether any of this module's rows is asked for.
pub(crate) fn wanted(settings: &Settings) -> bool {
    RETRY_HOLDS_MS
        .iter()
        .any(|&ms| settings.wants_id(&retry_id(ms)))
        || settings.wants_id(hold_costs::ID)
}

/// Runs the rows asked for and returns their tables.
pub(crate) async fn measure(broker: &Broker, settings: &Settings) -> BenchResult<String> {
    let mut retries = Vec::new();
    for hold_ms in RETRY_HOLDS_MS {
        if settings.wants_id(&retry_id(hold_ms)) {
            retries.push((hold_ms, retry_row(broker, settings, hold_ms).await?));
        }
    }
    let mut out = String::from("### Hold queues: quorum vs classic\n\n");
    if !retries.is_empty() {
        out.push_str(&retry_table(settings, &retries));
    }
    if settings.wants_id(hold_costs::ID) {
        let costs = hold_costs::measure(broker, settings).await?;
        out.push('\n');
        out.push_str(&costs);
    }
    Ok(out)
}

/// Every run of one retry row, by kind (in the order of [`KINDS`]).
type RetryRuns = [Vec<Measured>; 2];

/// One retry row: a backend of each kind, with the hold time as the retry
/// granularity (as in the `retry-*` rows), and the runs of both, the kind
/// that goes first alternating.
async fn retry_row(broker: &Broker, settings: &Settings, hold_ms: u16) -> BenchResult<RetryRuns> {
    let granularity = Duration::from_millis(u64::from(hold_ms));
    let mut backends = Vec::new();
    for kind in KINDS {
        let label = format!("queuey-{}-{}", retry_id(hold_ms), kind_name(kind));
        let options = RabbitMqOptions::default()
            .connection_name(broker.connection_name(&label))
            .control_stream(broker.control_stream())
            .retry_granularity(granularity)
            .hold_queues(kind);
        backends.push(RabbitMqBackend::with_options(broker.url(), options).await?);
    }
    let mut runs: RetryRuns = [Vec::new(), Vec::new()];
    let measured = async {
        for run in 0..settings.runs {
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                tokio::time::sleep(PAUSE).await;
                let measured =
                    queuey_side::retry(broker, &backends[k], RETRY_PREFETCH, settings.jobs).await;
                // Delete the run's queues, its hold queue too, whatever
                // happened.
                broker.delete_created().await?;
                let measured = measured?;
                println!(
                    "{:<48} run {}/{}  {:<7} {:>8} jobs/s  in {:>6.2} s  cpu {}  load {}{}",
                    format!("fail once, retry after {hold_ms} ms"),
                    run + 1,
                    settings.runs,
                    kind_name(KINDS[k]),
                    thousands(measured.rate()),
                    measured.elapsed.as_secs_f64(),
                    cpu(&[measured]),
                    measured
                        .load
                        .map_or("n/a".to_owned(), |l| format!("{l:.2}")),
                    measured.trouble(),
                );
                runs[k].push(measured);
            }
        }
        BenchResult::Ok(())
    }
    .await;
    for backend in backends {
        backend.close().await?;
    }
    measured?;
    Ok(runs)
}

/// The retry comparison's table.
fn retry_table(settings: &Settings, rows: &[(u16, RetryRuns)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Retry path: every job fails once and comes back through a hold queue; queuey on both \
         sides, {} jobs per run, prefetch {RETRY_PREFETCH}, default options but the hold kind, \
         median of {} runs per kind (min–max).\n",
        thousands(settings.jobs as f64),
        settings.runs
    );
    let _ = writeln!(
        out,
        "| operation | quorum holds, jobs/s | classic holds, jobs/s | quorum/classic | bar: ≥ {:.0} % | jobs lost, quorum / classic | cpu client / broker / other, quorum | same, classic |",
        RETRY_BAR * 100.0
    );
    let _ = writeln!(out, "|---|--:|--:|--:|---|--:|--:|--:|");
    for (hold_ms, runs) in rows {
        let shortest = topology::SHORTEST_HOLD_MS;
        let held = if u64::from(*hold_ms) < shortest {
            format!(" (held {shortest} ms)")
        } else {
            String::new()
        };
        let ratio = median_rate(&runs[0]) / median_rate(&runs[1]);
        let bar = if !ratio.is_finite() {
            "–"
        } else if ratio >= RETRY_BAR {
            "met"
        } else {
            "**missed**"
        };
        let _ = writeln!(
            out,
            "| fail once, retry after {hold_ms} ms{held} | {} | {} | {} | {bar} | {} / {} | {} | {} |",
            rates(&runs[0]),
            rates(&runs[1]),
            percent(ratio),
            lost(&runs[0]),
            lost(&runs[1]),
            cpu(&runs[0]),
            cpu(&runs[1]),
        );
    }
    out
}

fn median_rate(runs: &[Measured]) -> f64 {
    median(runs.iter().map(Measured::rate).collect())
}
