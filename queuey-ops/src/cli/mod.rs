//! Command-line arguments and what each command prints.

mod dead;
mod doctor;
mod holds;
mod job;
mod queue;
mod queues;
mod schedules;
mod table;
mod topology;
mod web;
mod workers;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::dead::DeadQueues;
use crate::fleet::Fleet;
use crate::mgmt::Management;
use crate::out::{errln, outln};
use crate::{Amqp, Result, TlsFiles};
use clap::{Args, Parser, Subcommand};

/// The broker URL used when neither `--url` nor `AMQP_URL` is given.
const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// Exit code when a check found a problem or a run stopped early.
const EXIT_PROBLEM: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "queuey",
    version,
    about = "Operate queuey job queues on RabbitMQ: dead letters, hold queues, workers, pauses, cancellations, topology and health",
    long_about = "Operate queuey job queues on RabbitMQ: dead letters, hold queues, topology and \
                  health.\n\nQUEUE is always the work queue's name (`emails`); its dead-letter \
                  queue (`emails.dead`) and hold queues (`emails.deferred.quorum.<ms>`, or \
                  `emails.deferred.<ms>` with classic holds) follow from the suffixes. A sharded queue's name covers its lane and every shard (`emails.s0`, \
                  `emails.s1`, …, found by passive declares up to the first missing one), each \
                  with its own dead-letter and hold queues; a shard's own name (`emails.s2`) \
                  covers that shard alone. Every command that changes something previews by default and acts \
                  only with --yes.",
    after_help = "Exit codes: 0 ok, 1 error, 2 bad usage, 3 a check found problems or a run stopped early."
)]
pub(crate) struct Cli {
    #[command(flatten, next_help_heading = "Global options")]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// The broker's AMQP URL; the password is never printed [default: the local broker as guest]
    #[arg(long, env = "AMQP_URL", default_value = DEFAULT_URL, hide_env_values = true, hide_default_value = true, global = true)]
    pub(crate) url: String,
    /// The management API's base URL [default: http://HOST:15672 with the AMQP credentials]
    #[arg(long, env = "QUEUEY_MGMT_URL", hide_env_values = true, global = true)]
    pub(crate) mgmt_url: Option<String>,
    /// Suffix of dead-letter queues (not empty, and not the same as another suffix).
    #[arg(long, default_value = crate::DEFAULT_DEAD_SUFFIX, global = true)]
    pub(crate) dead_suffix: String,
    /// Suffix of hold queues (before `.quorum.<ms>`, or `.<ms>` for classic holds; not empty,
    /// and not the same as another suffix).
    #[arg(long, default_value = crate::DEFAULT_DEFERRED_SUFFIX, global = true)]
    pub(crate) deferred_suffix: String,
    /// Suffix of the poison guard's suspect queues (not empty, and not the same as another suffix).
    #[arg(long, default_value = crate::DEFAULT_SUSPECT_SUFFIX, global = true)]
    pub(crate) suspect_suffix: String,
    /// A PEM file of CA certificates to trust besides the platform's roots,
    /// for amqps:// and the https management API (repeatable).
    #[arg(
        long = "tls-ca",
        value_name = "FILE",
        env = "QUEUEY_TLS_CA",
        global = true
    )]
    pub(crate) tls_ca: Vec<PathBuf>,
    /// A PEM client certificate (mutual TLS); with no password in --url the
    /// broker authenticates by it alone (EXTERNAL).
    #[arg(long, value_name = "FILE", env = "QUEUEY_TLS_CERT", global = true)]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", env = "QUEUEY_TLS_KEY", global = true)]
    pub(crate) tls_key: Option<PathBuf>,
    /// The name to verify the broker's certificate against, instead of the
    /// host of --url.
    #[arg(
        long,
        value_name = "NAME",
        env = "QUEUEY_TLS_SERVER_NAME",
        global = true
    )]
    pub(crate) tls_server_name: Option<String>,
    /// The control stream the fleet's processes use (`RabbitMqOptions::control_stream`);
    /// their heartbeats are in the stream of that name with `.workers` added.
    #[arg(long, env = "QUEUEY_CONTROL_STREAM", default_value = queuey_rabbitmq::topology::CONTROL_STREAM, global = true)]
    pub(crate) control_stream: String,
    /// A RabbitMQ user the fleet's workers log in as, whose heartbeats and
    /// schedule states count (repeatable; the tool's own user always counts).
    #[arg(
        long = "worker-user",
        value_name = "USER",
        env = "QUEUEY_WORKER_USERS",
        value_delimiter = ',',
        global = true
    )]
    pub(crate) worker_users: Vec<String>,
    /// A RabbitMQ user of another operator, whose commands count when the
    /// tool reads the fleet's state (repeatable; the tool's own user always
    /// counts).
    #[arg(
        long = "operator-user",
        value_name = "USER",
        env = "QUEUEY_OPERATOR_USERS",
        value_delimiter = ',',
        global = true
    )]
    pub(crate) operator_users: Vec<String>,
    /// The RabbitMQ user a client certificate logs in as, when --url names
    /// none: what the tool signs its commands with.
    #[arg(
        long,
        value_name = "USER",
        env = "QUEUEY_AUTHENTICATED_USER",
        global = true
    )]
    pub(crate) authenticated_user: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

impl Global {
    /// Runs `f` on a new AMQP connection named after `what`, then closes it.
    pub(crate) async fn with_amqp<T>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(&Amqp) -> Result<T>,
    ) -> Result<T> {
        let name = format!("queuey-cli-{what}-{}", std::process::id());
        let amqp = Amqp::connect_tls(&self.url, &name, &self.tls()).await?;
        let out = f(&amqp).await;
        amqp.close().await;
        out
    }

    /// Runs `f` on the fleet's control plane (a connection of its own),
    /// then closes it.
    pub(crate) async fn with_fleet<T>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(&Fleet) -> Result<T>,
    ) -> Result<T> {
        let name = format!("queuey-cli-{what}-control-{}", std::process::id());
        let fleet = Fleet::connect_with(
            &self.url,
            &self.tls(),
            &name,
            &self.control_stream,
            &self.trust(),
        )
        .await?;
        let out = f(&fleet).await;
        fleet.close().await;
        out
    }

    /// Runs `f` on the dead-letter queues QUEUE stands for (its own, and
    /// each of its shards' when it is sharded), over a connection named
    /// after `what`; returns them with what `f` returned.
    pub(crate) async fn with_dead_queues<T>(
        &self,
        what: &str,
        queue: &str,
        f: impl AsyncFnOnce(&Amqp, &DeadQueues) -> Result<T>,
    ) -> Result<(DeadQueues, T)> {
        self.with_amqp(what, async |amqp| {
            let queues = DeadQueues::discover(amqp, queue, &self.dead_suffix).await?;
            let out = f(amqp, &queues).await?;
            Ok((queues, out))
        })
        .await
    }

    /// Whom the tool trusts on the fleet plane besides itself.
    pub(crate) fn trust(&self) -> crate::fleet::Trust {
        crate::fleet::Trust {
            control_senders: self.operator_users.clone(),
            worker_senders: self.worker_users.clone(),
            authenticated_user: self.authenticated_user.clone(),
        }
    }

    pub(crate) fn management(&self) -> Result<Management> {
        Management::for_amqp_url_tls(&self.url, self.mgmt_url.as_deref(), &self.tls())
    }

    /// The certificate files, for both connections.
    pub(crate) fn tls(&self) -> TlsFiles {
        TlsFiles {
            ca: self.tls_ca.clone(),
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            server_name: self.tls_server_name.clone(),
        }
    }

    /// What removes from a text, before it is printed, the passwords of
    /// the URLs the tool was given (the AMQP URL's and the management
    /// URL's, in each of their written forms).
    pub(crate) fn scrubber(&self) -> impl Fn(&str) -> String + use<> {
        let urls: Vec<String> = std::iter::once(&self.url)
            .chain(&self.mgmt_url)
            .cloned()
            .collect();
        move |text| {
            urls.iter()
                .fold(text.to_owned(), |text, url| crate::amqp::scrub(&text, url))
        }
    }

    /// Prints `value` as JSON with `--json`, else what `text` prints.
    pub(crate) fn print<T: serde::Serialize>(&self, value: &T, text: impl FnOnce()) {
        if self.json {
            print_json(value);
        } else {
            text();
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Dead letters: list, group, show, redrive, purge with an export, import.
    #[command(subcommand)]
    Dead(dead::DeadCommand),
    /// Hold queues of a work queue: delay, jobs waiting, consumers, lease, release times,
    /// quorum holds that stopped releasing; `holds prune` deletes the empty ones.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Holds(holds::HoldsArgs),
    /// Schedules of periodic jobs: whether the fleet has a leader, who waits, last and next tick.
    Schedules(schedules::SchedulesArgs),
    /// Compare the broker's queues with a queue set, or declare what is missing.
    #[command(subcommand)]
    Topology(topology::TopologyCommand),
    /// Check connectivity, credentials, heartbeat, broker version, plugins and alarms.
    Doctor,
    /// Serve the web dashboard (localhost by default).
    Web(web::WebArgs),
    /// The running workers: host, queues, connection, and the jobs each runs right now.
    Workers(workers::WorkersArgs),
    /// Each work queue on one line: jobs ready, unacknowledged, consumers, paused, dead letters.
    ///
    /// Without QUEUE, the fleet's queues as the dashboard's overview lists
    /// them: those its workers report consuming in their heartbeats, or
    /// every queue that has its dead-letter queue when no worker is heard
    /// from (or with --all). A sharded queue is one line, its lane's and
    /// every shard's counts summed. Counts are the management API's
    /// statistics (no message is read) and can lag a few seconds; PAUSED is
    /// the fleet's control state, as `queuey queue paused` reads it.
    Queues(queues::QueuesArgs),
    /// Pause or resume a queue on every worker, or list the paused ones.
    #[command(subcommand)]
    Queue(queue::QueueCommand),
    /// Find a job by its id (`job show`), or cancel jobs wherever they wait.
    #[command(subcommand)]
    Job(job::JobCommand),
}

/// Runs a command; each answers whether it found a problem or stopped
/// early ([`EXIT_PROBLEM`]).
pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    let Cli { global, command } = cli;
    crate::check_suffixes(
        &global.dead_suffix,
        &global.deferred_suffix,
        &global.suspect_suffix,
    )?;
    let problem = match command {
        Command::Dead(cmd) => dead::run(&global, cmd).await,
        Command::Holds(args) => holds::run(&global, args).await,
        Command::Schedules(args) => schedules::run(&global, args).await,
        Command::Topology(cmd) => topology::run(&global, cmd).await,
        Command::Doctor => doctor::run(&global).await,
        Command::Web(args) => web::run(&global, args).await,
        Command::Workers(args) => workers::run(&global, args).await,
        Command::Queues(args) => queues::run(&global, args).await,
        Command::Queue(cmd) => queue::run(&global, cmd).await,
        Command::Job(cmd) => job::run(&global, cmd).await,
    }?;
    Ok(if problem {
        ExitCode::from(EXIT_PROBLEM)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints `value` as pretty JSON, every terminal control character escaped.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => outln!("{}", crate::escape::json(&text)),
        Err(e) => errln!("error: cannot print JSON: {e}"),
    }
}
