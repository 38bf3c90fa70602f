//! Total-queue accounting (after Jepsen's checker): which job numbers the
//! producer had confirmed, which the workers handled and how often.
//!
//! - lost = confirmed − handled (must be empty);
//! - unexpected = handled − attempted (must be empty);
//! - duplicates = handlings past the first (reported: at-least-once
//!   allows them; a worker that handles each job once must have none,
//!   except for jobs cut short by a kill of their worker process, which
//!   are never repeated within one process);
//! - recovered = handled although their enqueue never returned `Ok`.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Mutex;

/// What one run saw. Shared between the producer and in-process workers;
/// worker processes write their handlings to files, read with
/// [`Ledger::record_file`].
#[derive(Default)]
pub(crate) struct Ledger {
    inner: Mutex<Books>,
}

#[derive(Default)]
struct Books {
    attempted: u32,
    confirmed: BTreeSet<u32>,
    handled: HashMap<u32, u32>,
    /// Handlings past a job's first within one worker process's file.
    repeated_in_a_process: u64,
}

impl Ledger {
    /// Job numbers `0..n` were (or will be) passed to `enqueue`.
    pub(crate) fn attempted(&self, n: u32) {
        self.books().attempted = n;
    }

    /// `enqueue` of job `n` returned `Ok`.
    pub(crate) fn confirmed(&self, n: u32) {
        self.books().confirmed.insert(n);
    }

    /// A worker handled job `n` (before acknowledging it).
    pub(crate) fn handled(&self, n: u32) {
        *self.books().handled.entry(n).or_default() += 1;
    }

    /// Handlings a worker process appended to a file, one number a line
    /// (a line cut short by a kill is ignored).
    pub(crate) fn record_file(&self, text: &str) {
        let mut books = self.books();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        let mut seen = BTreeSet::new();
        for line in complete.lines() {
            if let Ok(n) = line.trim().parse::<u32>() {
                *books.handled.entry(n).or_default() += 1;
                if !seen.insert(n) {
                    books.repeated_in_a_process += 1;
                }
            }
        }
    }

    /// Forgets every handling (before reading the worker processes' files
    /// again from the start).
    pub(crate) fn reset_handled(&self) {
        let mut books = self.books();
        books.handled.clear();
        books.repeated_in_a_process = 0;
    }

    /// How many confirmed jobs have been handled at least once.
    pub(crate) fn confirmed_handled(&self) -> (usize, usize) {
        let books = self.books();
        let done = books
            .confirmed
            .iter()
            .filter(|n| books.handled.contains_key(n))
            .count();
        (done, books.confirmed.len())
    }

    /// How many times job `n` was handled.
    pub(crate) fn times_handled(&self, n: u32) -> u32 {
        self.books().handled.get(&n).copied().unwrap_or(0)
    }

    /// Handlings so far, duplicates included.
    pub(crate) fn handlings(&self) -> u64 {
        self.books().handled.values().map(|&c| u64::from(c)).sum()
    }

    /// The verdict.
    pub(crate) fn check(&self) -> Check {
        let books = self.books();
        let lost: Vec<u32> = books
            .confirmed
            .iter()
            .copied()
            .filter(|n| !books.handled.contains_key(n))
            .collect();
        let mut unexpected: Vec<u32> = books
            .handled
            .keys()
            .copied()
            .filter(|&n| n >= books.attempted)
            .collect();
        unexpected.sort_unstable();
        let duplicated = books.handled.values().filter(|&&c| c > 1).count();
        let extra_runs = books.handled.values().map(|&c| u64::from(c - 1)).sum();
        let runs = books.handled.values().map(|&c| u64::from(c)).sum();
        let recovered = books
            .handled
            .keys()
            .filter(|n| !books.confirmed.contains(n))
            .count();
        Check {
            attempted: books.attempted,
            confirmed: books.confirmed.len(),
            handled: books.handled.len(),
            lost,
            unexpected,
            duplicated,
            extra_runs,
            runs,
            repeated_in_a_process: books.repeated_in_a_process,
            recovered,
        }
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The checker's verdict on one run.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub(crate) attempted: u32,
    pub(crate) confirmed: usize,
    /// Distinct jobs handled.
    pub(crate) handled: usize,
    pub(crate) lost: Vec<u32>,
    pub(crate) unexpected: Vec<u32>,
    /// Jobs handled more than once.
    pub(crate) duplicated: usize,
    /// Handlings past each job's first.
    pub(crate) extra_runs: u64,
    /// Handler runs in all, duplicates included.
    pub(crate) runs: u64,
    /// Handlings past a job's first within one worker process (worker
    /// processes only).
    pub(crate) repeated_in_a_process: u64,
    /// Jobs handled although their enqueue was never confirmed.
    pub(crate) recovered: usize,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<u32> = self.lost.iter().copied().take(20).collect();
        write!(
            f,
            "attempted {}, confirmed {}, handled {} in {} handler runs, lost {} {shown:?}, \
             unexpected {}, duplicated {} ({} extra runs, {} within one process), recovered {}",
            self.attempted,
            self.confirmed,
            self.handled,
            self.runs,
            self.lost.len(),
            self.unexpected.len(),
            self.duplicated,
            self.extra_runs,
            self.repeated_in_a_process,
            self.recovered
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_counts_lost_duplicated_unexpected_and_recovered() {
        let ledger = Ledger::default();
        ledger.attempted(4);
        for n in [0, 1, 2] {
            ledger.confirmed(n);
        }
        ledger.handled(0);
        ledger.handled(0);
        ledger.record_file("2\n3\n9\n1");
        ledger.record_file("3\n2\n3\n");
        let check = ledger.check();
        // 1 is cut short (no newline): not counted.
        assert_eq!(check.lost, vec![1]);
        assert_eq!(check.unexpected, vec![9]);
        // 0 and 2 twice, 3 three times (twice in the second file).
        assert_eq!(check.duplicated, 3);
        assert_eq!(check.extra_runs, 4);
        assert_eq!(check.runs, 8);
        assert_eq!(check.repeated_in_a_process, 1);
        // 3 was handled though never confirmed; 9 too.
        assert_eq!(check.recovered, 2);
        assert_eq!(ledger.confirmed_handled(), (2, 3));
    }
}
