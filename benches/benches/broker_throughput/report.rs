//! Collecting runs and printing the tables.

use std::fmt::Write as _;

use crate::system::CpuUse;
use crate::{Measured, Row, Side};

/// Every run of one row, both sides (the `lapin` side is the row's
/// baseline).
#[derive(Debug)]
pub(crate) struct RowResult {
    pub(crate) row: Row,
    queuey: Vec<Measured>,
    lapin: Vec<Measured>,
}

impl RowResult {
    pub(crate) fn new(row: Row) -> RowResult {
        RowResult {
            row,
            queuey: Vec::new(),
            lapin: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, side: Side, measured: Measured) {
        match side {
            Side::Queuey => self.queuey.push(measured),
            Side::Lapin => self.lapin.push(measured),
        }
    }

    /// Median jobs/s of one side.
    fn median_rate(&self, side: Side) -> f64 {
        median(self.runs(side).iter().map(Measured::rate).collect())
    }

    fn runs(&self, side: Side) -> &[Measured] {
        match side {
            Side::Queuey => &self.queuey,
            Side::Lapin => &self.lapin,
        }
    }

    /// Jobs lost over all runs of one side.
    pub(crate) fn lost(&self, side: Side) -> usize {
        self.runs(side).iter().map(|m| m.lost).sum()
    }

    /// Jobs stranded in a hold over all runs of one side.
    pub(crate) fn stranded(&self, side: Side) -> usize {
        self.runs(side).iter().map(|m| m.stranded).sum()
    }

    /// The lost jobs of one side, and the stranded ones when there are any.
    fn lost_cell(&self, side: Side) -> String {
        lost(self.runs(side))
    }

    /// Median queuey jobs/s over median lapin jobs/s.
    fn ratio(&self) -> f64 {
        self.median_rate(Side::Queuey) / self.median_rate(Side::Lapin)
    }

    fn rates(&self, side: Side) -> String {
        rates(self.runs(side))
    }

    fn target(&self) -> String {
        match self.row.target {
            _ if !self.ratio().is_finite() => "–".to_owned(),
            None => "–".to_owned(),
            Some(target) if self.ratio() >= target => format!("≥ {:.0} %: met", target * 100.0),
            Some(target) => format!("≥ {:.0} %: **missed**", target * 100.0),
        }
    }

    fn cpu(&self, side: Side) -> String {
        cpu(self.runs(side))
    }

    /// The lowest and highest 1-minute load seen at the start of a run.
    fn loads(&self) -> String {
        let loads: Vec<f64> = self
            .queuey
            .iter()
            .chain(&self.lapin)
            .filter_map(|m| m.load)
            .collect();
        if loads.is_empty() {
            return "n/a".to_owned();
        }
        let low = loads.iter().copied().fold(f64::INFINITY, f64::min);
        let high = loads.iter().copied().fold(0.0, f64::max);
        format!("{low:.2}–{high:.2}")
    }
}

/// One table: throughput, ratio and target, then CPU use, for each row. A
/// row's baseline is lapin unless its label names another (apalis-amqp).
pub(crate) fn table(title: &str, results: &[RowResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### {title}\n");
    let _ = writeln!(
        out,
        "| operation | jobs/run | queuey jobs/s, median (min–max) | baseline jobs/s, median (min–max) | queuey/baseline | target | jobs lost, queuey / baseline |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|---|--:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} / {} |",
            r.row.label,
            thousands(r.row.jobs as f64),
            r.rates(Side::Queuey),
            r.rates(Side::Lapin),
            percent(r.ratio()),
            r.target(),
            r.lost_cell(Side::Queuey),
            r.lost_cell(Side::Lapin),
        );
    }
    let _ = writeln!(
        out,
        "\nCPU during the runs, median, in % of one core (client = this process, other = \
         everything else on the machine); the client's CPU time per job, median; and the \
         1-minute load at the start of the runs:\n"
    );
    let _ = writeln!(
        out,
        "| operation | queuey: client / broker / other | baseline: client / broker / other | client CPU per job, queuey / baseline | load |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} / {} | {} |",
            r.row.label,
            r.cpu(Side::Queuey),
            r.cpu(Side::Lapin),
            cpu_per_job(r.runs(Side::Queuey)),
            cpu_per_job(r.runs(Side::Lapin)),
            r.loads()
        );
    }
    out
}

/// "12 345 (11 900–12 800)": the median jobs/s of `runs` and the range.
/// The jobs lost over `runs`, and those stranded in a hold when there are
/// any: "0", or "0 (+20000 stranded)".
pub(crate) fn lost(runs: &[Measured]) -> String {
    let lost: usize = runs.iter().map(|m| m.lost).sum();
    match runs.iter().map(|m| m.stranded).sum::<usize>() {
        0 => lost.to_string(),
        stranded => format!("{lost} (+{stranded} stranded)"),
    }
}

pub(crate) fn rates(runs: &[Measured]) -> String {
    let rates: Vec<f64> = runs.iter().map(Measured::rate).collect();
    let low = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let high = rates.iter().copied().fold(0.0, f64::max);
    format!(
        "{} ({}–{})",
        thousands(median(rates)),
        thousands(low),
        thousands(high)
    )
}

/// The median CPU use of `runs`: "client / broker / other".
pub(crate) fn cpu(runs: &[Measured]) -> String {
    let of = |f: fn(&CpuUse) -> Option<f64>| {
        let values: Vec<f64> = runs.iter().filter_map(|m| f(&m.cpu)).collect();
        if values.is_empty() {
            "n/a".to_owned()
        } else {
            format!("{:.0}", median(values))
        }
    };
    format!(
        "{} / {} / {}",
        of(|c| Some(c.client)),
        of(|c| c.broker),
        of(|c| Some(c.other))
    )
}

/// The median CPU time this process spent per job over `runs`: "23.4 µs".
pub(crate) fn cpu_per_job(runs: &[Measured]) -> String {
    let per_job: Vec<f64> = runs
        .iter()
        .filter(|m| m.jobs > 0)
        .map(|m| m.cpu.client / 100.0 * m.elapsed.as_secs_f64() / m.jobs as f64 * 1e6)
        .collect();
    if per_job.is_empty() {
        "n/a".to_owned()
    } else {
        format!("{:.1} µs", median(per_job))
    }
}

pub(crate) fn percent(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{:.1} %", ratio * 100.0)
    } else {
        "–".to_owned()
    }
}

pub(crate) use crate::figures::{median, thousands};
