//! The parent's side of the fleet: the worker processes it starts, what
//! they report, and their end (stdin closed, then killed if they linger).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use crate::protocol::Report;
use crate::{BenchResult, Settings, child};

/// How long a worker may take to stop once its stdin is closed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// What the workers reported so far.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    ready: usize,
    /// Workers whose stdout ended.
    gone: Vec<usize>,
    /// Each timed job's wait, by trial.
    pub(crate) late: BTreeMap<u32, u64>,
    /// Starts by worker, second and tenant.
    starts: HashMap<(usize, u64, String), u64>,
}

impl Tally {
    /// Starts in the seconds `seconds` by tenant, over all workers
    /// (`worker` None) or one.
    pub(crate) fn starts(&self, seconds: &Range<u64>, worker: Option<usize>) -> HashMap<&str, u64> {
        let mut by_tenant: HashMap<&str, u64> = HashMap::new();
        for ((w, second, tenant), n) in &self.starts {
            if seconds.contains(second) && worker.is_none_or(|only| only == *w) {
                *by_tenant.entry(tenant.as_str()).or_default() += n;
            }
        }
        by_tenant
    }

    fn note(&mut self, worker: usize, report: Report) {
        match report {
            Report::Ready => self.ready += 1,
            Report::Late { trial, micros } => {
                self.late.insert(trial, micros);
            }
            Report::Second { second, starts } => {
                for (tenant, n) in starts {
                    *self.starts.entry((worker, second, tenant)).or_default() += n;
                }
            }
        }
    }
}

struct Member {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: JoinHandle<()>,
}

/// The worker processes.
pub(crate) struct Fleet {
    members: Vec<Member>,
    tally: Arc<Mutex<Tally>>,
}

impl Fleet {
    /// Starts `settings.workers` copies of this binary as workers of
    /// `queue`, with the tenants' `weights` (`tenant=weight,...`).
    pub(crate) fn start(settings: &Settings, queue: &str, weights: &str) -> BenchResult<Fleet> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this benchmark's binary to start workers: {e}"))?;
        let tally = Arc::new(Mutex::new(Tally::default()));
        let mut fleet = Fleet {
            members: Vec::new(),
            tally,
        };
        for index in 0..settings.workers {
            let mut child = Command::new(&exe)
                .env(child::CHILD, index.to_string())
                .env(child::QUEUE, queue)
                .env(child::WEIGHTS, weights)
                .env("AMQP_URL", &settings.url)
                .env("QUEUEY_BENCH_FAIR_SHARDS", settings.shards.to_string())
                .env("QUEUEY_BENCH_SLOTS", settings.slots.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                // A parent that fails before `stop` still ends them.
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start worker {index}: {e}"))?;
            let stdin = child.stdin.take();
            let stdout = child
                .stdout
                .take()
                .ok_or("a worker without a stdout pipe")?;
            let reader = tokio::spawn(read(index, stdout, Arc::clone(&fleet.tally)));
            fleet.members.push(Member {
                child,
                stdin,
                reader,
            });
        }
        Ok(fleet)
    }

    /// The reports so far.
    pub(crate) fn tally(&self) -> MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many workers there are.
    pub(crate) fn workers(&self) -> usize {
        self.members.len()
    }

    /// The workers' process ids.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.child.id()).collect()
    }

    /// Fails when a worker went away.
    pub(crate) fn check(&self) -> BenchResult<()> {
        match self.tally().gone.first() {
            Some(worker) => {
                Err(format!("worker {worker} ended early (see its message above)").into())
            }
            None => Ok(()),
        }
    }

    /// Waits until every worker consumes.
    pub(crate) async fn ready(&self, timeout: Duration) -> BenchResult<()> {
        let started = Instant::now();
        while self.tally().ready < self.members.len() {
            self.check()?;
            if started.elapsed() > timeout {
                return Err(format!("the workers were not ready within {timeout:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Closes every worker's stdin and awaits its end, killing one that
    /// does not stop in time. Returns what went wrong, if anything.
    pub(crate) async fn stop(mut self) -> Vec<String> {
        for member in &mut self.members {
            member.stdin.take();
        }
        let mut problems = Vec::new();
        for (index, member) in self.members.iter_mut().enumerate() {
            match stop_one(&mut member.child).await {
                Ok(status) if status.success() => {}
                Ok(status) => problems.push(format!("worker {index} ended with {status}")),
                Err(e) => problems.push(format!("worker {index}: {e}")),
            }
            let _ = (&mut member.reader).await;
        }
        problems
    }
}

/// Awaits `child`'s end for [`STOP_TIMEOUT`], then kills it.
async fn stop_one(child: &mut Child) -> std::io::Result<ExitStatus> {
    match tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            child.start_kill()?;
            child.wait().await
        }
    }
}

/// Reads worker `index`'s reports into `tally` until its stdout ends;
/// a line that is no report (a panic message) is shown as it is.
async fn read(index: usize, stdout: ChildStdout, tally: Arc<Mutex<Tally>>) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match Report::parse(&line) {
            Some(report) => tally
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .note(index, report),
            None => eprintln!("worker {index}: {line}"),
        }
    }
    tally
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .gone
        .push(index);
}
