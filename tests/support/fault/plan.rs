//! What a scenario injects, and how hard: the fault, the number of jobs,
//! the pace of injections.

use std::time::Duration;

/// The fault a scenario injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Nothing: the baseline.
    None,
    /// The broker closes the producer's and the worker's connections.
    Close,
    /// The proxy resets every connection (RST).
    Reset,
    /// The proxy stops forwarding for a while without closing anything.
    BlackHole,
    /// `rabbitmqctl stop_app`, a pause, `start_app` (private node).
    StopApp,
    /// The broker's VM is killed with SIGKILL and started again (private node).
    Kill9,
    /// The worker process is killed with SIGKILL mid-job and started again.
    WorkerCrash,
    /// The store of the idempotency layer (a private `redis-server`) is
    /// killed with SIGKILL and started again, empty.
    StoreKill,
}

impl Fault {
    pub(crate) const ALL: [Fault; 8] = [
        Fault::None,
        Fault::Close,
        Fault::Reset,
        Fault::BlackHole,
        Fault::StopApp,
        Fault::Kill9,
        Fault::WorkerCrash,
        Fault::StoreKill,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Close => "close",
            Fault::Reset => "reset",
            Fault::BlackHole => "black-hole",
            Fault::StopApp => "stop-app",
            Fault::Kill9 => "kill-9",
            Fault::WorkerCrash => "worker-crash",
            Fault::StoreKill => "store-kill",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// What one injection does, for reports.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Fault::None => "no fault",
            Fault::Close => "broker closes both connections",
            Fault::Reset => "TCP reset of every connection (proxy)",
            Fault::BlackHole => "black hole, nothing forwarded nor closed (proxy)",
            Fault::StopApp => "stop_app, 2 s, start_app (private node)",
            Fault::Kill9 => "broker kill -9, restart (private node)",
            Fault::WorkerCrash => "worker process kill -9 mid-job, started again",
            Fault::StoreKill => "Redis kill -9, restarted empty 1 s later (private server)",
        }
    }

    /// Whether the scenario needs a broker of its own.
    pub(crate) fn needs_private_node(self) -> bool {
        matches!(self, Fault::StopApp | Fault::Kill9)
    }
}

/// How a scenario runs.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) fault: Fault,
    pub(crate) jobs: u32,
    /// Publishing is spread over at least this long, so that faults land
    /// while jobs flow.
    pub(crate) spread: Duration,
    /// When the first injection comes.
    pub(crate) first: Duration,
    /// Time between the starts of two injections.
    pub(crate) every: Duration,
    /// At most this many injections.
    pub(crate) max_faults: u32,
    /// How long one black hole or one broker outage lasts.
    pub(crate) outage: Duration,
    /// Heartbeat of both backends.
    pub(crate) heartbeat: Duration,
    /// Jobs in flight in the producer and in the worker.
    pub(crate) concurrency: usize,
    /// Bound on the whole run.
    pub(crate) deadline: Duration,
    /// Every job fails its first attempt and comes back through a hold
    /// queue (1 s), so that faults land while jobs wait in holds and move
    /// back to the work queue.
    pub(crate) through_holds: bool,
    /// The hold queues the backends use.
    pub(crate) holds: queuey::rabbitmq::HoldQueues,
    /// The worker handles each job once: the idempotency layer on a
    /// private Redis.
    pub(crate) once: bool,
}

impl Plan {
    /// The CI size: a few thousand jobs, faults spread over ten-odd seconds.
    pub(crate) fn ci(fault: Fault) -> Plan {
        let mut plan = Plan::soak(fault, 3_000);
        plan.deadline = Duration::from_secs(150);
        plan.max_faults = match fault {
            Fault::BlackHole => 1,
            // Two outages, however long a loaded machine takes to publish.
            Fault::StopApp | Fault::Kill9 | Fault::StoreKill => 2,
            _ => u32::MAX,
        };
        plan.spread = match fault {
            Fault::None => Duration::ZERO,
            // Two outages: at 3 s and at 15 s.
            Fault::StopApp | Fault::Kill9 => Duration::from_secs(17),
            Fault::BlackHole | Fault::Close => Duration::from_secs(12),
            _ => Duration::from_secs(9),
        };
        plan
    }

    /// `jobs` jobs as fast as they go, faults until every job is confirmed.
    pub(crate) fn soak(fault: Fault, jobs: u32) -> Plan {
        // A black hole of 20 s, then 10 s of calm before the next; a broker
        // down for 2 s (plus its restart), then up for several seconds: the
        // backend's reconnection backoff grows to 5 s while it is down.
        let (first, every, outage) = match fault {
            Fault::BlackHole => (
                Duration::from_secs(2),
                Duration::from_secs(30),
                Duration::from_secs(20),
            ),
            Fault::StopApp | Fault::Kill9 => (
                Duration::from_secs(3),
                Duration::from_secs(12),
                Duration::from_secs(2),
            ),
            Fault::StoreKill => (
                Duration::from_secs(2),
                Duration::from_secs(4),
                Duration::from_secs(1),
            ),
            _ => (
                Duration::from_millis(1_500),
                Duration::from_millis(1_500),
                Duration::ZERO,
            ),
        };
        Plan {
            fault,
            jobs,
            spread: Duration::ZERO,
            first,
            every,
            max_faults: u32::MAX,
            outage,
            heartbeat: if fault == Fault::BlackHole {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(10)
            },
            concurrency: 32,
            deadline: Duration::from_secs(1_800),
            through_holds: false,
            holds: queuey::rabbitmq::HoldQueues::default(),
            once: fault == Fault::StoreKill,
        }
    }

    /// The same plan with a worker that handles each job once, on
    /// `jobs` jobs.
    pub(crate) fn once(mut self, jobs: u32) -> Plan {
        self.once = true;
        self.jobs = jobs;
        self
    }

    /// The same plan with every job going through a hold queue once, in
    /// hold queues of the kind `holds`.
    pub(crate) fn through_holds(mut self, holds: queuey::rabbitmq::HoldQueues) -> Plan {
        self.through_holds = true;
        self.holds = holds;
        self
    }
}
