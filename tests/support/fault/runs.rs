//! The run ledger of the per-key limits scenario: a worker process writes
//! a line when a job's handler starts and one when it ends, with
//! wall-clock instants (microseconds since the Unix epoch, the clock the
//! Redis store reads too); the test merges the processes' ledgers into
//! runs and measures them per key.
//!
//! Lines: `R` (the worker is built), `S RUN KEY JOB ATTEMPT DEFERRALS
//! ASKED START` (a handler starts; `ASKED` is when the limit layer began
//! to ask the store for this run's turn and slot) and `E RUN END` (it
//! ended). `RUN` numbers the runs of one process. A line cut short by a
//! kill is ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::fleet::ProcessLedger;

/// Wall-clock microseconds since the Unix epoch.
pub(crate) fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

/// `duration` in whole microseconds.
pub(crate) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// A worker process's side: appends lines to its ledger file, each with
/// one write (the file is opened for appending, so a kill leaves whole
/// lines and at most one cut short).
pub(crate) struct Writer {
    file: Mutex<std::fs::File>,
    next: AtomicU64,
}

/// What a run's start line says besides its instant.
#[derive(Debug, Clone)]
pub(crate) struct Start {
    pub(crate) key: String,
    pub(crate) job: u32,
    pub(crate) attempt: u32,
    pub(crate) deferrals: u32,
    pub(crate) asked_us: u64,
}

impl Writer {
    /// Opens (creates) the ledger file at `path`.
    pub(crate) fn open(path: &str) -> Writer {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the ledger file");
        Writer {
            file: Mutex::new(file),
            next: AtomicU64::new(1),
        }
    }

    fn line(&self, line: &str) {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(line.as_bytes())
            .expect("the ledger takes a line");
    }

    /// The worker is built and about to consume.
    pub(crate) fn ready(&self) {
        self.line("R\n");
    }

    /// A handler starts now; answers the run's number for [`Self::ended`].
    pub(crate) fn started(&self, start: &Start) -> u64 {
        let run = self.next.fetch_add(1, Ordering::Relaxed);
        self.line(&format!(
            "S {run} {} {} {} {} {} {}\n",
            start.key,
            start.job,
            start.attempt,
            start.deferrals,
            start.asked_us,
            now_us()
        ));
        run
    }

    /// Run `run`'s handler ends now.
    pub(crate) fn ended(&self, run: u64) {
        self.line(&format!("E {run} {}\n", now_us()));
    }
}

/// The whole lines of a ledger (a last line cut short by a kill is not).
fn whole_lines(text: &str) -> impl Iterator<Item = &str> {
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete.lines()
}

/// Whether the worker that writes `text` is built.
pub(crate) fn is_ready(text: &str) -> bool {
    whole_lines(text).any(|line| line == "R")
}

/// Handlers started and not ended in `text`.
pub(crate) fn open_runs(text: &str) -> usize {
    let (mut started, mut ended) = (0, 0);
    for line in whole_lines(text) {
        match line.as_bytes().first() {
            Some(b'S') => started += 1,
            Some(b'E') => ended += 1,
            _ => {}
        }
    }
    started - ended.min(started)
}

/// One handler run, from a process's ledger.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// The process's place in the fleet's ledgers.
    pub(crate) process: usize,
    /// Whether its process was killed by the test.
    pub(crate) killed: bool,
    pub(crate) key: String,
    pub(crate) job: u32,
    pub(crate) attempt: u32,
    pub(crate) deferrals: u32,
    pub(crate) asked_us: u64,
    pub(crate) start_us: u64,
    /// `None`: cut short (its process was killed mid-run).
    pub(crate) end_us: Option<u64>,
}

/// The runs of every process of a fleet.
pub(crate) fn parse(ledgers: &[ProcessLedger]) -> Vec<Run> {
    let mut runs = Vec::new();
    for (process, ledger) in ledgers.iter().enumerate() {
        let mut mine: BTreeMap<u64, Run> = BTreeMap::new();
        for line in whole_lines(&ledger.text) {
            let fields: Vec<&str> = line.split(' ').collect();
            let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
            match fields.first() {
                Some(&"S") if fields.len() == 8 => {
                    let (Some(run), Some(job), Some(attempt), Some(deferrals)) =
                        (number(1), number(3), number(4), number(5))
                    else {
                        panic!("a malformed ledger line: {line}");
                    };
                    let (Some(asked_us), Some(start_us)) = (number(6), number(7)) else {
                        panic!("a malformed ledger line: {line}");
                    };
                    mine.insert(
                        run,
                        Run {
                            process,
                            killed: ledger.killed,
                            key: fields[2].to_owned(),
                            job: u32::try_from(job).expect("a job number"),
                            attempt: u32::try_from(attempt).expect("an attempt"),
                            deferrals: u32::try_from(deferrals).expect("a deferral count"),
                            asked_us,
                            start_us,
                            end_us: None,
                        },
                    );
                }
                Some(&"E") => {
                    let (Some(run), Some(end)) = (number(1), number(2)) else {
                        panic!("a malformed ledger line: {line}");
                    };
                    mine.get_mut(&run).expect("an end after its start").end_us = Some(end);
                }
                Some(&"R") => {}
                _ => panic!("a malformed ledger line: {line}"),
            }
        }
        runs.extend(mine.into_values());
    }
    runs.sort_by_key(|run| run.start_us);
    runs
}

/// Until when `run` counts as running: its end; for a run cut short by a
/// kill, until its running slot's lease ran out (it was taken after the
/// layer began to ask, and these jobs end before their first renewal). A
/// later run of the same job waits for that slot too: a job holds one slot
/// at most.
pub(crate) fn running_until(run: &Run, lease: Duration) -> u64 {
    run.end_us
        .unwrap_or_else(|| (run.asked_us + micros(lease)).max(run.start_us))
}

/// The most of something per key, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Peak {
    pub(crate) count: usize,
    /// When it was first reached (µs since the epoch).
    pub(crate) at_us: u64,
}

/// How many runs of each key run (see [`running_until`]) from each
/// instant on where that changes, in order.
pub(crate) fn running(runs: &[Run], lease: Duration) -> BTreeMap<String, Vec<(u64, usize)>> {
    let mut events: BTreeMap<&str, Vec<(u64, i8)>> = BTreeMap::new();
    for run in runs {
        let until = running_until(run, lease);
        let key = events.entry(run.key.as_str()).or_default();
        key.push((run.start_us, 1));
        key.push((until, -1));
    }
    events
        .into_iter()
        .map(|(key, mut events)| {
            // An end before a start at the same instant: a slot is freed
            // before the next job takes it.
            events.sort_unstable();
            let mut now = 0usize;
            let steps = events
                .into_iter()
                .map(|(at_us, change)| {
                    now = if change > 0 { now + 1 } else { now - 1 };
                    (at_us, now)
                })
                .collect();
            (key.to_owned(), steps)
        })
        .collect()
}

/// The most runs of each key running at once (see [`running_until`]).
pub(crate) fn most_at_once(runs: &[Run], lease: Duration) -> BTreeMap<String, Peak> {
    running(runs, lease)
        .into_iter()
        .map(|(key, steps)| {
            let mut peak = Peak { count: 0, at_us: 0 };
            for (at_us, count) in steps {
                if count > peak.count {
                    peak = Peak { count, at_us };
                }
            }
            (key, peak)
        })
        .collect()
}

/// The most runs of `key` running at once within `from_us..to_us`.
pub(crate) fn most_between(
    runs: &[Run],
    lease: Duration,
    key: &str,
    from_us: u64,
    to_us: u64,
) -> usize {
    let steps = running(runs, lease).remove(key).unwrap_or_default();
    // The count in force at `from_us`, then every count set before `to_us`.
    let at_from = steps
        .iter()
        .take_while(|(at_us, _)| *at_us <= from_us)
        .last()
        .map_or(0, |&(_, count)| count);
    steps
        .iter()
        .filter(|(at_us, _)| (from_us..to_us).contains(at_us))
        .map(|&(_, count)| count)
        .fold(at_from, usize::max)
}

/// The most starts of each key within any `window` (a window opening at
/// `at_us` holds the starts in `at_us..at_us + window`).
pub(crate) fn busiest_window(runs: &[Run], window: Duration) -> BTreeMap<String, Peak> {
    let mut starts: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for run in runs {
        starts
            .entry(run.key.as_str())
            .or_default()
            .push(run.start_us);
    }
    let window = micros(window);
    starts
        .into_iter()
        .map(|(key, mut starts)| {
            starts.sort_unstable();
            let mut peak = Peak { count: 0, at_us: 0 };
            let mut last = 0;
            for (first, &from) in starts.iter().enumerate() {
                while last < starts.len() && starts[last] < from + window {
                    last += 1;
                }
                if last - first > peak.count {
                    peak = Peak {
                        count: last - first,
                        at_us: from,
                    };
                }
            }
            (key.to_owned(), peak)
        })
        .collect()
}

/// The jobs in `0..jobs` no run of which ended.
pub(crate) fn lost(runs: &[Run], jobs: u32) -> Vec<u32> {
    let done: BTreeSet<u32> = runs
        .iter()
        .filter(|run| run.end_us.is_some())
        .map(|run| run.job)
        .collect();
    (0..jobs).filter(|job| !done.contains(job)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(killed: bool, text: &str) -> ProcessLedger {
        ProcessLedger {
            member: 0,
            generation: 1,
            killed,
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_cut_short_run_holds_its_slot_until_its_lease_ends() {
        let lease = Duration::from_secs(3);
        let runs = parse(&[
            ledger(
                true,
                "R\nS 1 k 7 1 0 900 1000\nS 2 k 8 1 0 950 1000\nE 2 1200\nS 3 k 9 1 0 1000 1100\nS 4 k",
            ),
            ledger(
                false,
                "R\nS 1 k 9 1 0 2000 2500\nE 1 2600\nS 2 k 10 1 1 2600 2700\n",
            ),
        ]);
        assert_eq!(runs.len(), 5);
        let run = |job: u32| runs.iter().find(|r| r.job == job).unwrap();
        // Job 7 never ran again: until its lease, from when it asked.
        assert_eq!(running_until(run(7), lease), 3_000_900);
        // Job 9 ran again at 2500, on a slot of its own: the first run's
        // slot stays leased.
        assert_eq!(running_until(run(9), lease), 3_001_000);
        assert_eq!(running_until(run(8), lease), 1200);
        let peaks = most_at_once(&runs, lease);
        assert_eq!(
            peaks["k"],
            Peak {
                count: 3,
                at_us: 1100
            }
        );
        assert_eq!(
            busiest_window(&runs, Duration::from_micros(200))["k"].count,
            3
        );
        assert_eq!(lost(&runs, 11), vec![0, 1, 2, 3, 4, 5, 6, 7, 10]);
        assert_eq!(open_runs("R\nS 1 k 7 1 0 900 1000\nS 2 k"), 1);
        assert!(is_ready("R\nS 1"));
        assert!(!is_ready("R"));
    }
}
