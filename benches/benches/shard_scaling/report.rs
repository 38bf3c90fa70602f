//! The tables: throughput by shard count with its ratio to one shard, CPU
//! per job on each node, and what the CPU figures predict.

use std::fmt::Write as _;

use crate::measure::{Layout, Phase, Run};

/// CPU each node's VM uses when idle, in seconds per second, measured
/// before the runs and taken off every phase's count.
#[derive(Debug, Clone)]
pub(crate) struct Idle(pub(crate) Vec<f64>);

/// Which phase of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Enqueue,
    Consume,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Enqueue => "enqueue",
            Which::Consume => "consume",
        }
    }

    fn of(self, run: &Run) -> &Phase {
        match self {
            Which::Enqueue => &run.enqueue,
            Which::Consume => &run.consume,
        }
    }
}

/// CPU per job of one phase, in microseconds: each node (idle use taken
/// off), this process, the kernel's interrupt work, everything else.
#[derive(Debug, Clone)]
struct PerJob {
    nodes: Vec<f64>,
    client: f64,
    interrupts: f64,
    other: f64,
}

impl PerJob {
    fn of(phase: &Phase, idle: &Idle) -> PerJob {
        let wall = phase.used.wall.as_secs_f64();
        let per_job = |seconds: f64| seconds * 1e6 / phase.jobs as f64;
        let nodes = phase
            .used
            .nodes
            .iter()
            .enumerate()
            .map(|(i, used)| {
                let idle = idle.0.get(i).copied().unwrap_or(0.0) * wall;
                per_job((used.unwrap_or(f64::NAN) - idle).max(0.0))
            })
            .collect();
        PerJob {
            nodes,
            client: per_job(phase.used.client),
            interrupts: per_job(phase.used.interrupts),
            other: per_job(phase.used.other),
        }
    }

    fn brokers(&self) -> f64 {
        self.nodes.iter().sum()
    }

    /// What one job costs the machine: every node, the client and the
    /// kernel's interrupt work (not other processes).
    fn total(&self) -> f64 {
        self.brokers() + self.client + self.interrupts
    }

    /// The busiest node and its CPU per job.
    fn busiest(&self) -> (usize, f64) {
        self.nodes
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, 0.0),
                |best, (i, c)| if c > best.1 { (i, c) } else { best },
            )
    }
}

/// The medians over `runs` (all of one shard count) of one phase.
#[derive(Debug, Clone)]
struct Row {
    layout: Layout,
    leaders: String,
    rates: Vec<f64>,
    per_job: PerJob,
}

impl Row {
    fn of(runs: &[&Run], which: Which, idle: &Idle) -> Row {
        let per_job: Vec<PerJob> = runs.iter().map(|r| PerJob::of(which.of(r), idle)).collect();
        let nodes = per_job.first().map_or(0, |p| p.nodes.len());
        let median_of = |f: &dyn Fn(&PerJob) -> f64| median(per_job.iter().map(f).collect());
        Row {
            layout: runs[0].layout,
            leaders: leaders(runs[0]),
            rates: runs.iter().map(|r| which.of(r).rate()).collect(),
            per_job: PerJob {
                nodes: (0..nodes).map(|i| median_of(&|p| p.nodes[i])).collect(),
                client: median_of(&|p| p.client),
                interrupts: median_of(&|p| p.interrupts),
                other: median_of(&|p| p.other),
            },
        }
    }

    fn rate(&self) -> f64 {
        median(self.rates.clone())
    }

    fn rates(&self) -> String {
        let low = self.rates.iter().copied().fold(f64::INFINITY, f64::min);
        let high = self.rates.iter().copied().fold(0.0, f64::max);
        format!(
            "{} ({}–{})",
            thousands(self.rate()),
            thousands(low),
            thousands(high)
        )
    }
}

/// The leader of an unsharded queue ("n1"), or of each shard in order
/// ("n2 n3 n2 n3").
fn leaders(run: &Run) -> String {
    run.leaders
        .iter()
        .map(|l| l.map_or_else(|| "?".to_owned(), |i| format!("n{}", i + 1)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every table, from every run, by layout in the order of the first round.
pub(crate) fn tables(runs: &[Run], idle: &Idle, cores: usize) -> String {
    let mut layouts: Vec<Layout> = Vec::new();
    for run in runs {
        if !layouts.contains(&run.layout) {
            layouts.push(run.layout);
        }
    }
    let of = |which| -> Vec<Row> {
        layouts
            .iter()
            .map(|&layout| {
                let runs: Vec<&Run> = runs.iter().filter(|r| r.layout == layout).collect();
                Row::of(&runs, which, idle)
            })
            .collect()
    };
    let (enqueue, consume) = (of(Which::Enqueue), of(Which::Consume));
    // The unsharded queue declared by the clients: the usual case.
    let one = Layout {
        shards: 1,
        declared_on: None,
    };
    let base = |rows: &[Row]| rows.iter().find(|r| r.layout == one).map(Row::rate);
    let ratio = |rate: f64, base: Option<f64>| {
        base.filter(|b| *b > 0.0)
            .map_or("–".to_owned(), |b| format!("{:.2}×", rate / b))
    };

    let mut out = String::new();
    let _ = writeln!(out, "### Throughput by shards\n");
    let _ = writeln!(
        out,
        "| shards | leaders | enqueue jobs/s, median (min–max) | × 1 shard | consume jobs/s, median (min–max) | × 1 shard |"
    );
    let _ = writeln!(out, "|--:|---|--:|--:|--:|--:|");
    for (e, c) in enqueue.iter().zip(&consume) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            e.layout.label(),
            e.leaders,
            e.rates(),
            ratio(e.rate(), base(&enqueue)),
            c.rates(),
            ratio(c.rate(), base(&consume)),
        );
    }

    let nodes = enqueue.first().map_or(0, |r| r.per_job.nodes.len());
    let heads: String = (1..=nodes).map(|i| format!(" n{i} |")).collect();
    let _ = writeln!(
        out,
        "\n### CPU per job, µs (medians; each node's idle use taken off)\n"
    );
    let _ = writeln!(
        out,
        "| shards | phase |{heads} all nodes | client | interrupts | all | other processes |"
    );
    let _ = writeln!(out, "|--:|---|{}--:|--:|--:|--:|--:|", "--:|".repeat(nodes));
    for (rows, which) in [(&enqueue, Which::Enqueue), (&consume, Which::Consume)] {
        for row in rows {
            let cells: String = row
                .per_job
                .nodes
                .iter()
                .map(|c| format!(" {c:.0} |"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} |{cells} {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                row.layout.label(),
                which.name(),
                row.per_job.brokers(),
                row.per_job.client,
                row.per_job.interrupts,
                row.per_job.total(),
                row.per_job.other
            );
        }
    }

    let _ = writeln!(
        out,
        "\n### What the CPU figures predict\n\n\
         Here every node, the client and the kernel share {cores} cores: jobs/s ≤ {cores} cores \
         / (all of them per job). On nodes of their own with k cores each, the busiest node \
         binds: jobs/s ≤ k / (its CPU per job); the last column is k = 1.\n"
    );
    let _ = writeln!(
        out,
        "| shards | phase | measured jobs/s | {cores} cores / all | busiest node | 1 core per node: 1 / busiest |"
    );
    let _ = writeln!(out, "|--:|---|--:|--:|---|--:|");
    for (rows, which) in [(&enqueue, Which::Enqueue), (&consume, Which::Consume)] {
        for row in rows {
            let p = &row.per_job;
            let shared = cores as f64 * 1e6 / p.total();
            let (node, busiest) = p.busiest();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | n{} ({busiest:.0} µs) | {} |",
                row.layout.label(),
                which.name(),
                thousands(row.rate()),
                thousands(shared),
                node + 1,
                thousands(1e6 / busiest),
            );
        }
    }
    out
}

pub(crate) use crate::figures::{median, thousands};
