//! The figures of a mode over its window, and the table of every mode.

use std::time::{Duration, Instant};

use crate::figures::thousands;
use crate::settings::Mode;
use crate::tally::{Counts, Start};

/// The sliding window the rates are checked over.
const SECOND: Duration = Duration::from_secs(1);

/// The measured span of a mode: from its first enqueue to the end of its
/// offered load.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Window {
    fn holds(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }

    fn seconds(&self) -> f64 {
        self.end
            .saturating_duration_since(self.start)
            .as_secs_f64()
            .max(1e-9)
    }
}

/// One mode's row.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) mode: Mode,
    pub(crate) offered: u64,
    /// The counters at the window's end.
    pub(crate) counts: Counts,
    /// The most calls the partner admitted, and the most starts, of one
    /// host in any one-second window.
    pub(crate) most_admitted: usize,
    pub(crate) most_starts: usize,
    /// Starts in the window per host per second.
    pub(crate) start_rate: f64,
    /// Dead letters at the end; `None` if they could not be counted.
    pub(crate) dead: Option<u32>,
    pub(crate) load_start: String,
    pub(crate) load_end: String,
}

impl Row {
    /// The row from what was recorded: `admitted` and `starts` by host.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        mode: Mode,
        window: Window,
        offered: u64,
        counts: Counts,
        admitted: &[Vec<Instant>],
        starts: &[Vec<Start>],
        hosts: usize,
        loads: (String, String),
    ) -> Row {
        let in_window = |times: &mut dyn Iterator<Item = Instant>| -> Vec<Instant> {
            times.filter(|at| window.holds(*at)).collect()
        };
        let most_admitted = admitted
            .iter()
            .map(|host| most_in_a_second(in_window(&mut host.iter().copied())))
            .max()
            .unwrap_or(0);
        let start_times: Vec<Vec<Instant>> = starts
            .iter()
            .map(|host| in_window(&mut host.iter().map(|s| s.at)))
            .collect();
        let most_starts = start_times
            .iter()
            .map(|host| most_in_a_second(host.clone()))
            .max()
            .unwrap_or(0);
        let started: usize = start_times.iter().map(Vec::len).sum();
        Row {
            mode,
            offered,
            counts,
            most_admitted,
            most_starts,
            start_rate: started as f64 / hosts.max(1) as f64 / window.seconds(),
            dead: None,
            load_start: loads.0,
            load_end: loads.1,
        }
    }

    /// Deliveries per finished job, the headline.
    pub(crate) fn per_finished(&self) -> f64 {
        self.counts.deliveries as f64 / self.counts.finished.max(1) as f64
    }
}

/// The waits from enqueue to start of the starts in `window`: their mean
/// and the longest, in seconds.
pub(crate) fn waits(starts: &[Vec<Start>], window: Window) -> (f64, f64) {
    let waits: Vec<f64> = starts
        .iter()
        .flatten()
        .filter(|s| window.holds(s.at))
        .map(|s| s.waited_us as f64 / 1e6)
        .collect();
    let mean = waits.iter().sum::<f64>() / waits.len().max(1) as f64;
    let longest = waits.iter().copied().fold(0.0, f64::max);
    (mean, longest)
}

/// The `429`s of `refusals` in `window`, by minute of the window (the
/// last minute may be shorter), or `None` for none.
pub(crate) fn refusals_by_minute(refusals: &[Instant], window: Window) -> Option<Vec<u64>> {
    let minutes = (window.seconds() / 60.0).ceil().max(1.0) as usize;
    let mut counts = vec![0; minutes];
    let mut any = false;
    for at in refusals.iter().filter(|at| window.holds(**at)) {
        let minute = (at.duration_since(window.start).as_secs() / 60) as usize;
        if let Some(count) = counts.get_mut(minute.min(minutes - 1)) {
            *count += 1;
            any = true;
        }
    }
    any.then_some(counts)
}

/// The most of `times` in any half-open one-second window `[t, t + 1 s)`.
fn most_in_a_second(mut times: Vec<Instant>) -> usize {
    times.sort_unstable();
    let mut most = 0;
    let mut first = 0;
    for (last, at) in times.iter().enumerate() {
        while *at >= times[first] + SECOND {
            first += 1;
        }
        most = most.max(last + 1 - first);
    }
    most
}

/// Prints the table, one row per mode.
pub(crate) fn print(rows: &[Row]) {
    println!("## Results\n");
    println!(
        "| mode | offered | finished | deliveries | deliveries / finished | 429s | most admitted \
         / host / 1 s | most starts / host / 1 s | starts / s / host | dead-lettered | load (1 \
         min) start → end |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {:.2} | {} | {} | {} | {:.2} | {} | {} → {} |",
            row.mode,
            thousands(row.offered as f64),
            thousands(row.counts.finished as f64),
            thousands(row.counts.deliveries as f64),
            row.per_finished(),
            thousands(row.counts.refused as f64),
            row.most_admitted,
            row.most_starts,
            row.start_rate,
            row.dead.map_or("n/a".to_owned(), |d| d.to_string()),
            row.load_start,
            row.load_end,
        );
    }
    println!();
}
