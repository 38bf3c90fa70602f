//! The parent: sets up the servers, runs every row of every system in a
//! child process of its own, run by run, with the CPU each used, then
//! prints the table.

use std::collections::BTreeMap;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::child::{self, CHILD, Child};
use crate::cpu::{self, ServerProcesses, TICKS_PER_SECOND};
use crate::report::{self, Measure, Record, Results};
use crate::servers::{Database, RedisServer};
use crate::settings::{
    Config, MEMORY_JOBS, MEMORY_PAYLOAD, PAYLOAD, PRODUCERS, RETRY_DELAY_MS, SLOTS, Server, Target,
    Variant,
};
use crate::side::{BoxError, Outcome, Promise, Row, Settings};

/// The longest one child run may take before it is killed.
const CHILD_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// The parent's `main`.
pub(crate) fn main() -> ExitCode {
    let config = match Config::read() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("peers: {e}");
            return ExitCode::from(2);
        }
    };
    let load = cpu::load();
    if let Some(load) = load
        && load > config.max_load
    {
        eprintln!(
            "peers: the 1-minute load is {load:.2}, above {:.2} (QUEUEY_PEER_MAX_LOAD): the \
             figures would measure the other work on this machine; try again when it is quiet",
            config.max_load
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("peers: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(config))
}

/// The private servers of the whole bench run.
struct Servers {
    everysec: Option<RedisServer>,
    always: Option<RedisServer>,
    broker: ServerProcesses,
}

impl Servers {
    fn start(config: &Config) -> Result<Servers, BoxError> {
        let (everysec, always) = if config.uses(Server::Redis) {
            (
                Some(RedisServer::start(Variant::AofEverysec)?),
                Some(RedisServer::start(Variant::AofAlways)?),
            )
        } else {
            (None, None)
        };
        let port = config
            .amqp_url
            .parse::<lapin::uri::AMQPUri>()
            .map_or(5672, |uri| uri.authority.port);
        Ok(Servers {
            everysec,
            always,
            broker: cpu::broker_process(port),
        })
    }

    fn redis(&self, variant: Variant) -> Option<&RedisServer> {
        match variant {
            Variant::AofEverysec => self.everysec.as_ref(),
            Variant::AofAlways => self.always.as_ref(),
            Variant::Only => None,
        }
    }
}

async fn run(config: Config) -> ExitCode {
    let servers = match Servers::start(&config) {
        Ok(servers) => servers,
        Err(e) => {
            eprintln!("peers: {e}");
            return ExitCode::FAILURE;
        }
    };
    report::print_header(&config, &servers_line(&servers));
    let mut results = Results::default();
    let stopped = tokio::select! {
        () = run_all(&config, &servers, &mut results) => None,
        signal = interrupted() => Some(signal),
    };
    // The child of the run in progress was killed with its future.
    if let Some(signal) = stopped {
        println!("\nStopped by {signal}; the figures so far:\n");
    }
    report::print(&config, &results);
    drop(servers);
    match stopped {
        Some(_) => ExitCode::from(130),
        None => ExitCode::SUCCESS,
    }
}

fn servers_line(servers: &Servers) -> String {
    let mut parts = Vec::new();
    match servers.broker {
        ServerProcesses::Pid(pid) => parts.push(format!("RabbitMQ node pid {pid}")),
        _ => parts.push("RabbitMQ node not visible here: no broker CPU figure".to_owned()),
    }
    for redis in [&servers.everysec, &servers.always].into_iter().flatten() {
        parts.push(format!(
            "private redis-server {} (appendfsync {}, no snapshots)",
            redis.url(),
            redis.fsync()
        ));
    }
    parts.join("; ")
}

/// The measures to run, in order: the Latency row at 50 % needs each
/// system's Completions figure (and its Enqueue figure, when that row
/// runs), so Completions runs whenever Latency does.
fn measures(config: &Config) -> Vec<Measure> {
    let wants = |row| config.rows.contains(&row);
    let mut measures = Vec::new();
    if wants(Row::Enqueue) {
        measures.push(Measure::Enqueue);
    }
    if wants(Row::Completions) || wants(Row::Latency) {
        measures.push(Measure::Completions);
    }
    if wants(Row::Latency) {
        measures.push(Measure::LatencyHalf);
        measures.push(Measure::LatencyCommon);
    }
    if wants(Row::Retry) {
        measures.push(Measure::Retry);
    }
    if wants(Row::Memory) {
        measures.push(Measure::Memory);
    }
    measures
}

async fn run_all(config: &Config, servers: &Servers, results: &mut Results) {
    let targets = config.targets();
    for measure in measures(config) {
        println!("\n## {}\n", measure.title(config.common_rate));
        // The rate of each system at 50 %, fixed before its first run.
        let half_rates: BTreeMap<Target, Option<f64>> = targets
            .iter()
            .map(|&t| (t, results.sustained(t).map(|r| r / 2.0)))
            .collect();
        for run in 1..=config.runs {
            println!(
                "run {run} of {}, load (1 min) {}",
                config.runs,
                cpu::load().map_or("n/a".to_owned(), |l| format!("{l:.2}"))
            );
            for &target in &targets {
                let row = measure.row();
                if let Promise::Lacks(why) = child::promise(target.system, row) {
                    results.lacks(target, measure, why);
                    continue;
                }
                let rate = match measure {
                    Measure::LatencyCommon => Some(config.common_rate),
                    Measure::LatencyHalf => match half_rates.get(&target).copied().flatten() {
                        Some(rate) => Some(rate),
                        None => {
                            results.skipped(
                                target,
                                measure,
                                "no Completions figure to take 50 % of",
                            );
                            continue;
                        }
                    },
                    _ => None,
                };
                match run_one(config, servers, target, measure, rate).await {
                    Ok(record) => {
                        println!("- {target}: {}", record.summary(measure));
                        results.add(target, measure, run, record);
                    }
                    Err(e) => {
                        println!("- {target}: failed: {e}");
                        results.failed(target, measure, run, e.to_string());
                    }
                }
            }
        }
    }
}

/// One child run of `target` on `measure`, with the CPU it and its server
/// used.
async fn run_one(
    config: &Config,
    servers: &Servers,
    target: Target,
    measure: Measure,
    rate: Option<f64>,
) -> Result<Record, BoxError> {
    let redis = servers.redis(target.variant);
    let database = match target.system.server() {
        Server::Postgres => Some(Database::create(&config.postgres_url)?),
        _ => None,
    };
    let server = match target.system.server() {
        Server::RabbitMq => servers.broker.clone(),
        Server::Redis => redis.map_or(ServerProcesses::Unknown, RedisServer::process),
        Server::Postgres => ServerProcesses::Named("postgres"),
    };
    let settings = child_settings(
        config,
        config.jobs_of(target.system),
        measure,
        rate,
        redis.map(RedisServer::url).unwrap_or_default(),
        database
            .as_ref()
            .map(|d| d.url().to_owned())
            .unwrap_or_default(),
    );
    let child = Child {
        system: target.system.name().to_owned(),
        row: measure.row(),
        settings,
    };
    let ran = spawn(&child, &server).await;
    // The run's database goes, and the Redis server is emptied, whatever
    // the child did.
    drop(database);
    let flushed = redis.map_or(Ok(()), RedisServer::flush);
    let record = ran?;
    flushed?;
    Ok(Record { rate, ..record })
}

/// The settings of a child run of `measure`.
fn child_settings(
    config: &Config,
    system_jobs: usize,
    measure: Measure,
    rate: Option<f64>,
    redis_url: String,
    postgres_url: String,
) -> Settings {
    let (jobs, slots, payload_bytes) = match measure {
        Measure::Memory => (MEMORY_JOBS, MEMORY_JOBS, MEMORY_PAYLOAD),
        Measure::LatencyHalf | Measure::LatencyCommon => (
            rate.map_or(system_jobs, |r| config.latency_jobs(r, system_jobs)),
            SLOTS,
            PAYLOAD,
        ),
        Measure::Enqueue | Measure::Completions | Measure::Retry => (system_jobs, SLOTS, PAYLOAD),
    };
    Settings {
        jobs,
        producers: PRODUCERS,
        slots,
        payload_bytes,
        rate,
        retry_delay_ms: RETRY_DELAY_MS,
        amqp_url: config.amqp_url.clone(),
        redis_url,
        postgres_url,
    }
}

/// Runs `child` as a process of its own; its CPU time once reaped and the
/// server's over the same span.
async fn spawn(child: &Child, server: &ServerProcesses) -> Result<Record, BoxError> {
    let json = serde_json::to_string(child)?;
    let before = (cpu::reaped_children_ticks(), server.ticks());
    let started = Instant::now();
    let process = tokio::process::Command::new(std::env::current_exe()?)
        .env(CHILD, json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let output = tokio::time::timeout(CHILD_TIMEOUT, process.wait_with_output())
        .await
        .map_err(|_| format!("the child run took over {CHILD_TIMEOUT:?} and was killed"))??;
    let wall = started.elapsed();
    let after = (cpu::reaped_children_ticks(), server.ticks());
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!("the child run failed ({})", output.status).into());
    }
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("the child run printed no outcome")?;
    let outcome: Outcome = serde_json::from_str(last)
        .map_err(|e| format!("the child's last line is not an outcome ({e}): `{last}`"))?;
    let spent = |(a, b): (Option<u64>, Option<u64>)| Some(b?.saturating_sub(a?));
    Ok(Record {
        outcome,
        client_ticks: spent((before.0, after.0)),
        server_ticks: spent((before.1, after.1)),
        wall,
        rate: None,
    })
}

/// CPU ticks in µs.
pub(crate) fn ticks_to_us(ticks: u64) -> f64 {
    ticks as f64 * 1e6 / TICKS_PER_SECOND as f64
}

/// Resolves on Ctrl-C or SIGTERM, so that an interrupted bench still
/// kills its child, stops its servers and drops its database.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match terminate.as_mut() {
            Some(terminate) => terminate.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = terminated => "SIGTERM",
    }
}
