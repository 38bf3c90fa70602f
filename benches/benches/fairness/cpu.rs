//! Who used the CPU during a measured window: the broker (when it runs on
//! this machine), the worker processes, this process, and the machine, from
//! `/proc`. On a small shared machine these tell a slow fleet (CPU bound)
//! from a fair one.

use std::time::Instant;

use crate::system::{TICKS_PER_SECOND, broker_pid, machine_busy_ticks, process_ticks};

/// CPU counters at one instant, in ticks.
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    at: Instant,
    broker_pid: Option<u32>,
    worker_pids: Vec<u32>,
    broker: Option<u64>,
    workers: u64,
    parent: u64,
    machine: u64,
}

impl Mark {
    /// The counters now, with the workers `worker_pids`.
    pub(crate) fn now(worker_pids: Vec<u32>) -> Mark {
        let broker_pid = broker_pid();
        Mark::of(broker_pid, worker_pids)
    }

    fn of(broker_pid: Option<u32>, worker_pids: Vec<u32>) -> Mark {
        Mark {
            at: Instant::now(),
            broker: broker_pid.and_then(|p| process_ticks(&p.to_string())),
            workers: worker_pids
                .iter()
                .filter_map(|p| process_ticks(&p.to_string()))
                .sum(),
            parent: process_ticks("self").unwrap_or(0),
            machine: machine_busy_ticks().unwrap_or(0),
            broker_pid,
            worker_pids,
        }
    }

    /// What was used since this mark, in percent of one core:
    /// `broker 95 %, workers 60 %, ...`.
    pub(crate) fn used(&self) -> String {
        let end = Mark::of(self.broker_pid, self.worker_pids.clone());
        let wall = end.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let percent = |a: u64, b: u64| b.saturating_sub(a) as f64 / TICKS_PER_SECOND / wall * 100.0;
        let broker = match (self.broker, end.broker) {
            (Some(a), Some(b)) => format!("{:.0} %", percent(a, b)),
            _ => "n/a".to_owned(),
        };
        format!(
            "broker {broker}, workers {:.0} %, this process {:.0} %, whole machine {:.0} % \
             (of one core)",
            percent(self.workers, end.workers),
            percent(self.parent, end.parent),
            percent(self.machine, end.machine),
        )
    }
}
