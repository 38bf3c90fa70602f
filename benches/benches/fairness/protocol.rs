//! What a worker process tells the parent: one line of text per report on
//! its stdout, so that a report is never split and a stray line (a panic
//! message) is easy to tell apart.
//!
//! - `ready`: the worker consumes;
//! - `late TRIAL MICROS`: the timed job of `TRIAL` started `MICROS` after
//!   it was enqueued;
//! - `second UNIX_SECOND TENANT=STARTS ...`: jobs started in that second of
//!   the shared wall clock, by tenant. A second may come in several lines
//!   (a start counted after its second was sent); the parent adds them up.

use std::fmt::Write as _;

/// One report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    Ready,
    Late {
        trial: u32,
        micros: u64,
    },
    Second {
        second: u64,
        starts: Vec<(String, u64)>,
    },
}

impl Report {
    /// The report as its line (without the newline).
    pub(crate) fn line(&self) -> String {
        match self {
            Report::Ready => "ready".to_owned(),
            Report::Late { trial, micros } => format!("late {trial} {micros}"),
            Report::Second { second, starts } => {
                let mut line = format!("second {second}");
                for (tenant, n) in starts {
                    let _ = write!(line, " {tenant}={n}");
                }
                line
            }
        }
    }

    /// The report a line carries, if it is one.
    pub(crate) fn parse(line: &str) -> Option<Report> {
        let mut words = line.split_whitespace();
        match words.next()? {
            "ready" => Some(Report::Ready),
            "late" => Some(Report::Late {
                trial: words.next()?.parse().ok()?,
                micros: words.next()?.parse().ok()?,
            }),
            "second" => {
                let second = words.next()?.parse().ok()?;
                let starts = words
                    .map(|w| {
                        let (tenant, n) = w.split_once('=')?;
                        Some((tenant.to_owned(), n.parse().ok()?))
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(Report::Second { second, starts })
            }
            _ => None,
        }
    }
}
