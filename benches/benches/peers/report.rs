//! What the parent keeps of each child run, and the tables it prints: the
//! medians with their range over the runs, then each system against
//! queuey in the same run.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::child;
use crate::parent::ticks_to_us;
use crate::settings::{
    Config, MEMORY_JOBS, MEMORY_PAYLOAD, PAYLOAD, PRODUCERS, RETRY_DELAY_MS, SLOTS, System, Target,
};
use crate::side::{Outcome, Promise, Row};

/// A column of the table: a row, with the Latency row at its two rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Measure {
    Enqueue,
    Completions,
    /// The Latency row at 50 % of the most the system sustains: the lower
    /// of its own Enqueue and Completions medians.
    LatencyHalf,
    /// The Latency row at the common rate.
    LatencyCommon,
    Retry,
    Memory,
}

impl Measure {
    /// The row a child runs for this measure.
    pub(crate) fn row(self) -> Row {
        match self {
            Measure::Enqueue => Row::Enqueue,
            Measure::Completions => Row::Completions,
            Measure::LatencyHalf | Measure::LatencyCommon => Row::Latency,
            Measure::Retry => Row::Retry,
            Measure::Memory => Row::Memory,
        }
    }

    pub(crate) fn title(self, common_rate: f64) -> String {
        match self {
            Measure::Enqueue => format!("Enqueue: {PRODUCERS} producers, closed loop"),
            Measure::Completions => {
                format!("Completions: a backlog enqueued beforehand, a worker with {SLOTS} slots")
            }
            Measure::LatencyHalf => {
                "Latency at 50 % of what each system sustains (the lower of its Enqueue and \
                 Completions medians)"
                    .to_owned()
            }
            Measure::LatencyCommon => {
                format!(
                    "Latency at the common rate, {} jobs/s",
                    thousands(common_rate)
                )
            }
            Measure::Retry => format!(
                "Retry: each job fails once, back after {} s",
                RETRY_DELAY_MS as f64 / 1000.0
            ),
            Measure::Memory => format!(
                "Memory: {} jobs of {} KB held in the worker at once",
                thousands(MEMORY_JOBS as f64),
                MEMORY_PAYLOAD / 1000
            ),
        }
    }
}

/// One child run.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) outcome: Outcome,
    /// CPU of the child process, whole run.
    pub(crate) client_ticks: Option<u64>,
    /// CPU of the server over the child's run.
    pub(crate) server_ticks: Option<u64>,
    /// Wall time of the whole child process.
    pub(crate) wall: Duration,
    /// The Latency row's offered rate.
    pub(crate) rate: Option<f64>,
}

impl Record {
    /// Jobs per second of the measured part.
    fn throughput(&self) -> Option<f64> {
        (self.outcome.elapsed_secs > 0.0)
            .then(|| self.outcome.jobs as f64 / self.outcome.elapsed_secs)
    }

    /// CPU µs per job of the child and of the server.
    fn cpu_per_job(&self) -> (Option<f64>, Option<f64>) {
        let jobs = self.outcome.jobs.max(1) as f64;
        let per = |ticks: Option<u64>| ticks.map(|t| ticks_to_us(t) / jobs);
        (per(self.client_ticks), per(self.server_ticks))
    }

    /// Peak MiB per 1,000 jobs held.
    fn peak_mib_per_thousand(&self) -> Option<f64> {
        let kib = self.outcome.peak_rss_kib? as f64;
        Some(kib / 1024.0 * 1000.0 / self.outcome.jobs.max(1) as f64)
    }

    /// A line for the progress log.
    pub(crate) fn summary(&self, measure: Measure) -> String {
        let (client, server) = self.cpu_per_job();
        let cpu = format!(
            "CPU µs/job client {} + server {}",
            decimal(client),
            decimal(server)
        );
        let what = match measure {
            Measure::LatencyHalf | Measure::LatencyCommon => {
                let l = &self.outcome.latencies_us;
                format!(
                    "{} jobs at {}/s, p50 {} p99 {} p99.9 {} ms",
                    l.len(),
                    thousands(self.rate.unwrap_or(f64::NAN)),
                    ms(percentile(l, 50.0)),
                    ms(percentile(l, 99.0)),
                    ms(percentile(l, 99.9)),
                )
            }
            Measure::Retry => format!(
                "{} jobs/s, lateness p50 {} p99 {} ms, {} early",
                thousands(self.throughput().unwrap_or(f64::NAN)),
                ms(percentile(&self.outcome.lateness_us, 50.0)),
                ms(percentile(&self.outcome.lateness_us, 99.0)),
                self.outcome.early
            ),
            Measure::Memory => format!(
                "peak {} MiB per 1,000 jobs",
                decimal(self.peak_mib_per_thousand())
            ),
            Measure::Enqueue | Measure::Completions => format!(
                "{} jobs/s ({} jobs in {:.2} s)",
                thousands(self.throughput().unwrap_or(f64::NAN)),
                self.outcome.jobs,
                self.outcome.elapsed_secs
            ),
        };
        format!("{what}; {cpu}; child {:.1} s", self.wall.as_secs_f64())
    }
}

/// What happened to one measure of one target.
#[derive(Debug, Default)]
struct Entry {
    /// By run number.
    runs: BTreeMap<usize, Record>,
    failures: Vec<String>,
    lacks: Option<&'static str>,
    skipped: Option<&'static str>,
}

/// Every child run so far.
#[derive(Debug, Default)]
pub(crate) struct Results {
    entries: BTreeMap<(Target, Measure), Entry>,
}

impl Results {
    fn entry(&mut self, target: Target, measure: Measure) -> &mut Entry {
        self.entries.entry((target, measure)).or_default()
    }

    pub(crate) fn add(&mut self, target: Target, measure: Measure, run: usize, record: Record) {
        self.entry(target, measure).runs.insert(run, record);
    }

    pub(crate) fn failed(&mut self, target: Target, measure: Measure, run: usize, why: String) {
        self.entry(target, measure)
            .failures
            .push(format!("run {run}: {why}"));
    }

    pub(crate) fn lacks(&mut self, target: Target, measure: Measure, why: &'static str) {
        self.entry(target, measure).lacks = Some(why);
    }

    pub(crate) fn skipped(&mut self, target: Target, measure: Measure, why: &'static str) {
        self.entry(target, measure).skipped = Some(why);
    }

    /// The median Completions rate of `target`, once it has one.
    /// The most `target` sustains end to end: its Completions median, or
    /// its Enqueue median where that is lower (a producer that cannot
    /// offer more would only queue jobs in its own tasks).
    pub(crate) fn sustained(&self, target: Target) -> Option<f64> {
        let completions = self.throughput_median(target, Measure::Completions)?;
        Some(
            self.throughput_median(target, Measure::Enqueue)
                .map_or(completions, |enqueue| enqueue.min(completions)),
        )
    }

    fn throughput_median(&self, target: Target, measure: Measure) -> Option<f64> {
        let values = self.values(target, measure, Record::throughput);
        (!values.is_empty()).then(|| median(values.into_values().collect()))
    }

    /// `value` of each run of `target` on `measure` that has one.
    fn values(
        &self,
        target: Target,
        measure: Measure,
        value: impl Fn(&Record) -> Option<f64>,
    ) -> BTreeMap<usize, f64> {
        self.entries
            .get(&(target, measure))
            .map(|e| {
                e.runs
                    .iter()
                    .filter_map(|(&run, r)| Some((run, value(r)?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The cell of one figure: its median, with the range over the runs
    /// when there are several; `—` where the system lacks the row.
    fn cell(
        &self,
        target: Target,
        measure: Measure,
        value: impl Fn(&Record) -> Option<f64>,
        show: fn(f64) -> String,
    ) -> String {
        let Some(entry) = self.entries.get(&(target, measure)) else {
            return String::new();
        };
        if entry.lacks.is_some() {
            return "—".to_owned();
        }
        let values: Vec<f64> = self.values(target, measure, value).into_values().collect();
        if values.is_empty() {
            return if entry.failures.is_empty() && entry.skipped.is_none() {
                "n/a".to_owned()
            } else {
                "failed".to_owned()
            };
        }
        let (low, high) = range(&values);
        let mid = show(median(values.clone()));
        if values.len() > 1 {
            format!("{mid} ({}–{})", show(low), show(high))
        } else {
            mid
        }
    }

    /// The three percentiles of the Latency row at `measure`, each the
    /// median over the runs.
    fn latency_cell(&self, target: Target, measure: Measure) -> String {
        let Some(entry) = self.entries.get(&(target, measure)) else {
            return String::new();
        };
        if entry.lacks.is_some() {
            return "—".to_owned();
        }
        if entry.runs.is_empty() {
            return "failed".to_owned();
        }
        [50.0, 99.0, 99.9]
            .map(|p| {
                let values = self.values(target, measure, |r| {
                    percentile(&r.outcome.latencies_us, p).map(|us| us as f64)
                });
                ms(Some(median(values.into_values().collect()) as u64))
            })
            .join(" / ")
    }

    /// The median over the runs of `target`'s value over queuey's in the
    /// same run.
    fn against_queuey(
        &self,
        target: Target,
        queuey: Target,
        measure: Measure,
        value: impl Fn(&Record) -> Option<f64> + Copy,
    ) -> Option<f64> {
        let own = self.values(target, measure, value);
        let base = self.values(queuey, measure, value);
        let ratios: Vec<f64> = own
            .iter()
            .filter_map(|(run, v)| Some(v / base.get(run).filter(|b| **b > 0.0)?))
            .collect();
        (!ratios.is_empty()).then(|| median(ratios))
    }
}

/// Prints what the run is about to do.
pub(crate) fn print_header(config: &Config, servers: &str) {
    println!("# Peers: queuey beside the job systems it is compared with\n");
    println!(
        "- machine: {} cores; load (1 min) at the start: {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        crate::cpu::load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
    );
    println!(
        "- {} runs, {} jobs a run ({} on PostgreSQL; {} producers, {} slots, {} B of padding); \
         Latency at 50 % and at {}/s, at most {} s of jobs; Memory {} jobs of {} KB",
        config.runs,
        thousands(config.jobs as f64),
        thousands(config.postgres_jobs as f64),
        PRODUCERS,
        SLOTS,
        PAYLOAD,
        thousands(config.common_rate),
        config.latency_secs,
        thousands(MEMORY_JOBS as f64),
        MEMORY_PAYLOAD / 1000,
    );
    let systems: Vec<String> = config.targets().iter().map(Target::to_string).collect();
    println!("- systems: {}", systems.join("; "));
    println!("- servers: {servers}");
}

/// Prints the tables and their notes.
pub(crate) fn print(config: &Config, results: &Results) {
    let targets = config.targets();
    let common = thousands(config.common_rate);
    println!("\n## Results (median, min–max over the runs)\n");
    println!(
        "| system | enqueue/s | completions/s | latency at 50 % p50 / p99 / p99.9 ms | latency at \
         {common}/s p50 / p99 / p99.9 ms | retry completions/s | retry lateness p50 / p99 ms | CPU \
         µs/job client + server | peak MiB per 1,000 × 20 KB | promise |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &target in &targets {
        let cpu = {
            let client = results.cell(target, Measure::Completions, |r| r.cpu_per_job().0, one);
            let server = results.cell(target, Measure::Completions, |r| r.cpu_per_job().1, one);
            joined(&[client, server], " + ")
        };
        let lateness = [50.0, 99.0].map(|p| {
            results.cell(
                target,
                Measure::Retry,
                |r| percentile(&r.outcome.lateness_us, p).map(|us| us as f64 / 1000.0),
                two,
            )
        });
        let lateness = joined(&lateness, " / ");
        let promise = match child::promise(target.system, Row::Enqueue) {
            Promise::Runs(words) | Promise::Lacks(words) => words,
        };
        println!(
            "| {target} | {} | {} | {} | {} | {} | {lateness} | {cpu} | {} | {promise} |",
            results.cell(target, Measure::Enqueue, Record::throughput, thousands),
            results.cell(target, Measure::Completions, Record::throughput, thousands),
            results.latency_cell(target, Measure::LatencyHalf),
            results.latency_cell(target, Measure::LatencyCommon),
            results.cell(target, Measure::Retry, Record::throughput, thousands),
            results.cell(target, Measure::Memory, Record::peak_mib_per_thousand, one),
        );
    }
    print_ratios(&targets, results);
    print_notes(config, &targets, results);
}

/// Each system against queuey, run by run.
fn print_ratios(targets: &[Target], results: &Results) {
    let Some(&queuey) = targets.iter().find(|t| t.system == System::Queuey) else {
        return;
    };
    println!(
        "\n## Against queuey in the same run (median of the runs' ratios; above 1 is more \
         throughput, or more latency, CPU or memory)\n"
    );
    println!(
        "| system | enqueue/s | completions/s | latency p99 at 50 % | latency p99 at the common \
         rate | retry completions/s | CPU µs/job client + server | peak MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let ratio = |target, measure, value: fn(&Record) -> Option<f64>| {
        results
            .against_queuey(target, queuey, measure, value)
            .map_or("–".to_owned(), |r| format!("×{r:.2}"))
    };
    let p99 = |r: &Record| percentile(&r.outcome.latencies_us, 99.0).map(|us| us as f64);
    let cpu = |r: &Record| {
        let (client, server) = r.cpu_per_job();
        Some(client? + server.unwrap_or(0.0))
    };
    for &target in targets.iter().filter(|&&t| t != queuey) {
        println!(
            "| {target} | {} | {} | {} | {} | {} | {} | {} |",
            ratio(target, Measure::Enqueue, Record::throughput),
            ratio(target, Measure::Completions, Record::throughput),
            ratio(target, Measure::LatencyHalf, p99),
            ratio(target, Measure::LatencyCommon, p99),
            ratio(target, Measure::Retry, Record::throughput),
            ratio(target, Measure::Completions, cpu),
            ratio(target, Measure::Memory, Record::peak_mib_per_thousand),
        );
    }
}

/// What the cells do not say: rows a system lacks and why, failed runs,
/// the rates of the Latency row at 50 %, early retries, and each row's
/// promise where it differs from the enqueue path's.
fn print_notes(config: &Config, targets: &[Target], results: &Results) {
    println!("\nNotes:\n");
    println!(
        "- CPU is the whole child process of the Completions row (its untimed enqueue of the \
         backlog, then the worker) and the server over the same span (RabbitMQ: the node's \
         `beam.smp`; Redis: the private redis-server; PostgreSQL: every `postgres` process \
         with the backends it reaped), per job, in ticks of 10 ms."
    );
    println!(
        "- Peak memory is the child's whole resident set at its highest (VmHWM, reset after \
         the untimed enqueue), per 1,000 jobs held."
    );
    for &target in targets {
        for (&(t, measure), entry) in results.entries.range((target, Measure::Enqueue)..) {
            if t != target {
                break;
            }
            let row = crate::settings::row_name(measure.row());
            if let Some(why) = entry.lacks {
                println!("- {target}, {row}: —, {why}.");
            }
            if let Some(why) = entry.skipped {
                println!(
                    "- {target}, {}: not run, {why}.",
                    measure.title(config.common_rate)
                );
            }
            for failure in &entry.failures {
                println!("- {target}, {row}, {failure}");
            }
            if measure == Measure::LatencyHalf {
                let rates: Vec<String> = entry
                    .runs
                    .values()
                    .filter_map(|r| r.rate)
                    .map(thousands)
                    .collect();
                if let Some(rate) = rates.first() {
                    println!("- {target}: latency at 50 % offered {rate} jobs/s.");
                }
            }
            if measure == Measure::Retry {
                let early: u64 = entry.runs.values().map(|r| r.outcome.early).sum();
                if early > 0 {
                    println!(
                        "- {target}, retry: {early} second starts came before failure + delay."
                    );
                }
            }
        }
        let enqueue = match child::promise(target.system, Row::Enqueue) {
            Promise::Runs(words) | Promise::Lacks(words) => words,
        };
        for row in [Row::Completions, Row::Latency, Row::Retry, Row::Memory] {
            if let Promise::Runs(words) = child::promise(target.system, row)
                && words != enqueue
                && config.rows.contains(&row)
            {
                println!("- {target}, {}: {words}.", crate::settings::row_name(row));
            }
        }
    }
}

/// `parts` joined by `separator`, or nothing when every part is empty
/// (a row that did not run).
fn joined(parts: &[String], separator: &str) -> String {
    if parts.iter().all(String::is_empty) {
        String::new()
    } else {
        parts.join(separator)
    }
}

/// The median of `values`, NaN for none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

/// The `p`th percentile of `values` (nearest rank), `None` for none.
pub(crate) fn percentile(values: &[u64], p: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// µs as ms with two decimals, `–` for none.
fn ms(us: Option<u64>) -> String {
    us.map_or("–".to_owned(), |us| format!("{:.2}", us as f64 / 1000.0))
}

fn decimal(value: Option<f64>) -> String {
    value.map_or("–".to_owned(), one)
}

fn one(value: f64) -> String {
    format!("{value:.1}")
}

fn two(value: f64) -> String {
    format!("{value:.2}")
}

/// A rounded number with spaces between thousands: `12 345`.
pub(crate) fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return "–".to_owned();
    }
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}
