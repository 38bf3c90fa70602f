//! The systems compared, the variants they run in, and what the parent does,
//! read from the environment.

use std::fmt;

use crate::side::Row;

/// A job system in the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum System {
    Queuey,
    /// queuey on a queue without priority levels (`max_priority(0)`), as
    /// plain as the other RabbitMQ sides' queues.
    QueueyFifo,
    Lapin,
    ApalisAmqp,
    ApalisRedis,
    Bullmq,
    ApalisPostgres,
    Awa,
}

/// The server a system keeps its jobs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Server {
    RabbitMq,
    Redis,
    Postgres,
}

impl System {
    /// Every system, in the order of the table.
    pub(crate) const ALL: [System; 8] = [
        System::Queuey,
        System::QueueyFifo,
        System::Lapin,
        System::ApalisAmqp,
        System::ApalisRedis,
        System::Bullmq,
        System::ApalisPostgres,
        System::Awa,
    ];

    /// The name `QUEUEY_PEER_SYSTEMS` and the child process use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            System::Queuey => "queuey",
            System::QueueyFifo => "queuey-fifo",
            System::Lapin => "lapin",
            System::ApalisAmqp => "apalis-amqp",
            System::ApalisRedis => "apalis-redis",
            System::Bullmq => "bullmq",
            System::ApalisPostgres => "apalis-postgres",
            System::Awa => "awa",
        }
    }

    /// How the table names it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            System::Queuey => "queuey",
            System::QueueyFifo => "queuey, no priorities",
            System::Lapin => "lapin 4 by hand",
            System::ApalisAmqp => "apalis-amqp 1",
            System::ApalisRedis => "apalis-redis 1",
            System::Bullmq => "bullmq-official 1.4",
            System::ApalisPostgres => "apalis-postgres 1",
            System::Awa => "awa 0.6",
        }
    }

    pub(crate) fn server(self) -> Server {
        match self {
            System::Queuey | System::QueueyFifo | System::Lapin | System::ApalisAmqp => {
                Server::RabbitMq
            }
            System::ApalisRedis | System::Bullmq => Server::Redis,
            System::ApalisPostgres | System::Awa => Server::Postgres,
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<System> {
        System::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The variants this system runs in: one per durability setting of its
    /// server that the comparison covers.
    pub(crate) fn variants(self) -> &'static [Variant] {
        match self.server() {
            Server::Redis => &[Variant::AofEverysec, Variant::AofAlways],
            Server::RabbitMq | Server::Postgres => &[Variant::Only],
        }
    }
}

/// How the server of a run is set up, where a system has more than one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Variant {
    /// The one setup of its server.
    Only,
    /// Redis with `appendfsync everysec`.
    AofEverysec,
    /// Redis with `appendfsync always`.
    AofAlways,
}

impl Variant {
    /// The words after the system's label, if any.
    pub(crate) fn label(self) -> Option<&'static str> {
        match self {
            Variant::Only => None,
            Variant::AofEverysec => Some("AOF everysec"),
            Variant::AofAlways => Some("AOF always"),
        }
    }
}

/// One line of the table: a system in one variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Target {
    pub(crate) system: System,
    pub(crate) variant: Variant,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.variant.label() {
            Some(variant) => write!(f, "{}, {variant}", self.system.label()),
            None => f.write_str(self.system.label()),
        }
    }
}

/// The name `QUEUEY_PEER_ROWS` uses for `row`.
pub(crate) fn row_name(row: Row) -> &'static str {
    match row {
        Row::Enqueue => "enqueue",
        Row::Completions => "completions",
        Row::Latency => "latency",
        Row::Retry => "retry",
        Row::Memory => "memory",
    }
}

/// Every row, in the order they run: the Latency rows need each system's
/// Completions figure.
pub(crate) const ROWS: [Row; 5] = [
    Row::Enqueue,
    Row::Completions,
    Row::Latency,
    Row::Retry,
    Row::Memory,
];

/// What the parent does, from the environment.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Runs of every row for every system, interleaved.
    pub(crate) runs: usize,
    /// Jobs of each run (the Memory row: [`MEMORY_JOBS`]).
    pub(crate) jobs: usize,
    /// Jobs of each run of a PostgreSQL system, whose rates are tens to
    /// hundreds of times lower: the same count would take hours.
    pub(crate) postgres_jobs: usize,
    pub(crate) systems: Vec<System>,
    pub(crate) rows: Vec<Row>,
    /// The Latency row's rate common to all systems, jobs/s.
    pub(crate) common_rate: f64,
    /// The longest a Latency run offers jobs, in seconds: it takes at most
    /// `rate × latency_secs` jobs.
    pub(crate) latency_secs: f64,
    /// No run starts while the 1-minute load is above this.
    pub(crate) max_load: f64,
    pub(crate) amqp_url: String,
    /// The PostgreSQL server, with the database to connect to when making
    /// and dropping each run's database.
    pub(crate) postgres_url: String,
}

/// Jobs of the Memory row, in flight at once.
pub(crate) const MEMORY_JOBS: usize = 1_000;
/// Padding of each job of the Memory row, bytes.
pub(crate) const MEMORY_PAYLOAD: usize = 20_000;
/// Padding of every other job, bytes.
pub(crate) const PAYLOAD: usize = 100;
/// Producers of the Enqueue row (and of the untimed enqueues before the
/// other rows).
pub(crate) const PRODUCERS: usize = 64;
/// Job slots of the worker.
pub(crate) const SLOTS: usize = 100;
/// The Retry row's delay before the second attempt.
pub(crate) const RETRY_DELAY_MS: u64 = 1_000;

impl Config {
    pub(crate) fn read() -> Result<Config, String> {
        let systems = list("QUEUEY_PEER_SYSTEMS", |name| {
            System::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = System::ALL.iter().map(|s| s.name()).collect();
                format!("unknown system `{name}` (known: {})", known.join(", "))
            })
        })?
        .unwrap_or_else(|| System::ALL.to_vec());
        let rows = list("QUEUEY_PEER_ROWS", |name| {
            ROWS.into_iter()
                .find(|&row| row_name(row) == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = ROWS.iter().map(|&r| row_name(r)).collect();
                    format!("unknown row `{name}` (known: {})", known.join(", "))
                })
        })?
        .unwrap_or_else(|| ROWS.to_vec());
        // In the order they run, each once.
        let rows = ROWS.into_iter().filter(|r| rows.contains(r)).collect();
        let systems = System::ALL
            .into_iter()
            .filter(|s| systems.contains(s))
            .collect();
        Ok(Config {
            runs: count("QUEUEY_PEER_RUNS", 3)?,
            jobs: count("QUEUEY_PEER_JOBS", 20_000)?,
            postgres_jobs: count("QUEUEY_PEER_POSTGRES_JOBS", 2_000)?,
            systems,
            rows,
            common_rate: positive("QUEUEY_PEER_COMMON_RATE", 500.0)?,
            latency_secs: positive("QUEUEY_PEER_LATENCY_SECS", 10.0)?,
            max_load: positive("QUEUEY_PEER_MAX_LOAD", 1.0)?,
            amqp_url: std::env::var("AMQP_URL")
                .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned()),
            postgres_url: std::env::var("QUEUEY_PEER_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned()),
        })
    }

    /// The table's lines: every selected system in each of its variants.
    pub(crate) fn targets(&self) -> Vec<Target> {
        self.systems
            .iter()
            .flat_map(|&system| {
                system
                    .variants()
                    .iter()
                    .map(move |&variant| Target { system, variant })
            })
            .collect()
    }

    /// Whether any selected system keeps its jobs in `server`.
    pub(crate) fn uses(&self, server: Server) -> bool {
        self.systems.iter().any(|s| s.server() == server)
    }

    /// Jobs of each run of `system` (but the Memory row's).
    pub(crate) fn jobs_of(&self, system: System) -> usize {
        match system.server() {
            Server::Postgres => self.postgres_jobs,
            Server::RabbitMq | Server::Redis => self.jobs,
        }
    }

    /// Jobs of a Latency run at `rate`, of a system that runs `jobs`.
    pub(crate) fn latency_jobs(&self, rate: f64, jobs: usize) -> usize {
        let capped = (rate * self.latency_secs).ceil();
        (capped as usize).clamp(1, jobs)
    }
}

/// A comma-separated list from `name`, each item read by `read`; `None`
/// when unset or blank.
fn list<T>(name: &str, read: impl Fn(&str) -> Result<T, String>) -> Result<Option<Vec<T>>, String> {
    let Ok(value) = std::env::var(name) else {
        return Ok(None);
    };
    let items: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Ok(None);
    }
    items
        .into_iter()
        .map(|item| read(&item.to_ascii_lowercase()).map_err(|e| format!("{name}: {e}")))
        .collect::<Result<Vec<T>, String>>()
        .map(Some)
}

/// A positive integer from `name`, else `default`.
fn count(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name} must be a positive integer, got `{value}`")),
        },
    }
}

/// A positive number from `name`, else `default`.
fn positive(name: &str, default: f64) -> Result<f64, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(value) => match value.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
            _ => Err(format!("{name} must be a positive number, got `{value}`")),
        },
    }
}
