//! CPU time of each node's Erlang VM, of this process, of the kernel's
//! interrupt work and of the whole machine, read from `/proc` before and
//! after each measured phase.

use std::time::{Duration, Instant};

#[path = "../broker_throughput/system.rs"]
#[allow(dead_code)]
pub(crate) mod system;

use system::{TICKS_PER_SECOND, machine_busy_ticks, process_ticks};

/// CPU counters at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    at: Instant,
    /// Each node's VM, by node index (`None`: its pid or stat unreadable).
    nodes: Vec<Option<u64>>,
    client: Option<u64>,
    interrupts: Option<u64>,
    machine: Option<u64>,
}

/// CPU used between two samples, in seconds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Used {
    pub(crate) wall: Duration,
    /// Each node's VM, by node index.
    pub(crate) nodes: Vec<Option<f64>>,
    /// This process: the producer or the worker, and the benchmark.
    pub(crate) client: f64,
    /// The kernel's interrupt work (hard and soft), charged to no process:
    /// mostly moving the loopback traffic between the clients and the
    /// nodes, and between the nodes.
    pub(crate) interrupts: f64,
    /// Everything else on the machine (other processes).
    pub(crate) other: f64,
}

impl Sample {
    /// The counters now, for the VMs `pids` (by node index).
    pub(crate) fn now(pids: &[Option<u32>]) -> Sample {
        Sample {
            at: Instant::now(),
            nodes: pids
                .iter()
                .map(|pid| pid.and_then(|p| process_ticks(&p.to_string())))
                .collect(),
            client: process_ticks("self"),
            interrupts: interrupt_ticks(),
            machine: machine_busy_ticks(),
        }
    }

    /// What was used from `self` until `end`.
    pub(crate) fn until(&self, end: &Sample) -> Used {
        let seconds = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / TICKS_PER_SECOND),
            _ => None,
        };
        let nodes: Vec<Option<f64>> = self
            .nodes
            .iter()
            .zip(&end.nodes)
            .map(|(&a, &b)| seconds(a, b))
            .collect();
        let client = seconds(self.client, end.client).unwrap_or(0.0);
        let interrupts = seconds(self.interrupts, end.interrupts).unwrap_or(0.0);
        let machine = seconds(self.machine, end.machine).unwrap_or(0.0);
        let brokers: f64 = nodes.iter().flatten().sum();
        Used {
            wall: end.at.duration_since(self.at),
            nodes,
            client,
            interrupts,
            other: (machine - client - brokers - interrupts).max(0.0),
        }
    }
}

/// Hard and soft interrupt time of all cores together, from the first line
/// of `/proc/stat` (fields irq and softirq).
fn interrupt_ticks() -> Option<u64> {
    let values = system::all_cores_ticks()?;
    Some(values.get(5)? + values.get(6)?)
}
