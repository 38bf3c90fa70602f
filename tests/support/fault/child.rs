//! Worker processes for the worker-crash scenario: started from the test
//! binary (or the soak example) itself, killed with SIGKILL mid-job.
//!
//! A child appends each job number it handled to a ledger file of its own
//! before acknowledging it, so the parent can count handlings across kills.
//! Given a poison job's number, a child kills itself with SIGKILL when it
//! starts that job (a job that crashes its worker), after writing it to the
//! ledger.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey::prelude::*;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use super::once;
use super::scenario::Numbered;

/// Jobs a worker process runs at once.
pub(crate) const CONCURRENCY: usize = 8;

/// The worker processes of one run; at most one lives at a time.
pub(crate) struct Children {
    program: PathBuf,
    args: Vec<String>,
    url: String,
    queue: String,
    dir: PathBuf,
    env: Vec<(String, String)>,
    current: Option<Child>,
    started: u32,
}

impl Children {
    /// Children run `program args` with the broker URL, queue and ledger
    /// file in their environment.
    pub(crate) fn new(program: PathBuf, args: Vec<String>, url: &str, queue: &str) -> Children {
        let dir = std::env::temp_dir().join(format!(
            "queuey-fault-children-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("the children's directory");
        Children {
            program,
            args,
            url: url.to_owned(),
            queue: queue.to_owned(),
            dir,
            env: Vec::new(),
            current: None,
            started: 0,
        }
    }

    /// Sets one more environment variable for every child started later.
    pub(crate) fn env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// Starts the next worker process.
    pub(crate) fn spawn(&mut self) {
        self.started += 1;
        let ledger = self.dir.join(format!("ledger-{}", self.started));
        let log = std::fs::File::create(self.dir.join(format!("log-{}", self.started)))
            .expect("a child's log file");
        let child = Command::new(&self.program)
            .args(&self.args)
            .env("QUEUEY_FAULT_CHILD_URL", &self.url)
            .env("QUEUEY_FAULT_QUEUE", &self.queue)
            .env("QUEUEY_FAULT_LEDGER", &ledger)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("a worker process starts");
        self.current = Some(child);
    }

    /// Kills the current worker process with SIGKILL and reaps it.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.current.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the current worker process has ended by itself (it is then
    /// reaped); `false` when none runs.
    pub(crate) fn exited(&mut self) -> bool {
        let ended = self
            .current
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))));
        if ended {
            self.current = None;
        }
        ended
    }

    /// What the worker processes started so far wrote to stdout and stderr.
    pub(crate) fn logs(&self) -> Vec<String> {
        (1..=self.started)
            .filter_map(|i| std::fs::read_to_string(self.dir.join(format!("log-{i}"))).ok())
            .collect()
    }

    /// The ledger files written so far.
    pub(crate) fn ledgers(&self) -> Vec<String> {
        (1..=self.started)
            .filter_map(|i| std::fs::read_to_string(self.dir.join(format!("ledger-{i}"))).ok())
            .collect()
    }

    /// How many worker processes were started.
    pub(crate) fn started(&self) -> u32 {
        self.started
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether this process was started as a worker child.
pub(crate) fn is_child() -> bool {
    std::env::var_os("QUEUEY_FAULT_LEDGER").is_some()
}

/// The body of a worker child: consumes the parent's queue until killed.
/// Each job takes about 2 ms, so that kills land mid-job. The job numbered
/// `QUEUEY_FAULT_POISON`, if set, kills the process instead (and the others
/// then take 50 ms). With a store's URL in [`once::STORE_URL`], the worker
/// handles each job once.
pub(crate) async fn child_worker<J: Numbered>() {
    let url = std::env::var("QUEUEY_FAULT_CHILD_URL").expect("QUEUEY_FAULT_CHILD_URL");
    let path = std::env::var("QUEUEY_FAULT_LEDGER").expect("QUEUEY_FAULT_LEDGER");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("the ledger file");
    let file = Arc::new(Mutex::new(file));
    let poison: Option<u32> = std::env::var("QUEUEY_FAULT_POISON")
        .ok()
        .map(|n| n.parse().expect("QUEUEY_FAULT_POISON is a job number"));
    // Beside a poison job, the other jobs take long enough to still be at
    // work when it kills the process (spawning `kill` takes a few
    // milliseconds), so that some come back with it.
    let pause = Duration::from_millis(if poison.is_some() { 50 } else { 2 });
    // A control stream of the test's own (see `control_stream`), never the
    // shared broker's `queuey.control`.
    let queue = std::env::var("QUEUEY_FAULT_QUEUE").expect("QUEUEY_FAULT_QUEUE");
    let options = on_control_stream(
        RabbitMqOptions::default()
            .connection_name(format!("queuey-fault-child-{}", std::process::id())),
        &control_stream(&queue),
    );
    let backend = Arc::new(
        RabbitMqBackend::with_options(&url, options)
            .await
            .expect("the worker process connects"),
    );
    let handler = handler_fn(move |job: J, _ctx: JobContext| {
        let file = Arc::clone(&file);
        async move {
            let line = format!("{}\n", job.number());
            if poison == Some(job.number()) {
                file.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .write_all(line.as_bytes())
                    .expect("the ledger takes a line");
                eprintln!("job {} is poison: the worker kills itself", job.number());
                // SIGKILL, as an out-of-memory kill would: no unwinding,
                // no core file, the connection dies with the process.
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &std::process::id().to_string()])
                    .status();
                std::process::abort();
            }
            tokio::time::sleep(pause).await;
            file.lock()
                .unwrap_or_else(|p| p.into_inner())
                .write_all(line.as_bytes())
                .expect("the ledger takes a line");
            Ok::<(), JobError>(())
        }
    });
    let store = match std::env::var(once::STORE_URL) {
        Ok(url) => Some(once::store(&url).await),
        Err(_) => None,
    };
    let worker = once::worker(
        backend,
        handler,
        store,
        CONCURRENCY,
        queuey::worker::DEFAULT_SHUTDOWN_TIMEOUT,
    )
    .await;
    let result = worker.run().await;
    eprintln!("the worker process's run ended: {result:?}");
}

/// The control stream of the worker processes of `queue`; a test on a
/// shared broker tracks it (and its `.workers` stream) for deletion.
pub(crate) fn control_stream(queue: &str) -> String {
    format!("{queue}.control")
}

/// `options` on the control stream `stream` (without the `fleet` feature
/// there is none).
#[cfg(feature = "fleet")]
pub(crate) fn on_control_stream(options: RabbitMqOptions, stream: &str) -> RabbitMqOptions {
    options.control_stream(stream)
}

/// `options` as they are: without the `fleet` feature there is no control
/// stream.
#[cfg(not(feature = "fleet"))]
pub(crate) fn on_control_stream(options: RabbitMqOptions, _stream: &str) -> RabbitMqOptions {
    options
}
