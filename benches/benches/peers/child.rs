//! A child run: this binary started again by the parent with [`CHILD`] set
//! to what to run. It runs one row of one system's side and prints the
//! [`Outcome`] as one line of JSON, the last line of its stdout; anything
//! else goes to stderr.

use std::io::Write;
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use crate::queuey_side::Levels;
use crate::settings::System;
use crate::side::{BoxError, Outcome, Promise, Row, Settings};
use crate::{
    apalis_amqp_side, apalis_postgres_side, apalis_redis_side, awa_side, bullmq_side, lapin_side,
    queuey_side,
};

/// Set to the JSON of a [`Child`]: this process is a child run.
pub(crate) const CHILD: &str = "QUEUEY_PEER_CHILD";

/// What one child process runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Child {
    /// The system's name ([`System::name`]).
    pub(crate) system: String,
    pub(crate) row: Row,
    pub(crate) settings: Settings,
}

/// What `system` promises on `row`.
pub(crate) fn promise(system: System, row: Row) -> Promise {
    match system {
        System::Queuey => queuey_side::promise(row, Levels::Default),
        System::QueueyFifo => queuey_side::promise(row, Levels::None),
        System::Lapin => lapin_side::promise(row),
        System::ApalisAmqp => apalis_amqp_side::promise(row),
        System::ApalisRedis => apalis_redis_side::promise(row),
        System::Bullmq => bullmq_side::promise(row),
        System::ApalisPostgres => apalis_postgres_side::promise(row),
        System::Awa => awa_side::promise(row),
    }
}

/// Runs `row` on `system`'s side.
async fn run(system: System, row: Row, settings: &Settings) -> Result<Outcome, BoxError> {
    match system {
        System::Queuey => queuey_side::run(row, settings, Levels::Default).await,
        System::QueueyFifo => queuey_side::run(row, settings, Levels::None).await,
        System::Lapin => lapin_side::run(row, settings).await,
        System::ApalisAmqp => apalis_amqp_side::run(row, settings).await,
        System::ApalisRedis => apalis_redis_side::run(row, settings).await,
        System::Bullmq => bullmq_side::run(row, settings).await,
        System::ApalisPostgres => apalis_postgres_side::run(row, settings).await,
        System::Awa => awa_side::run(row, settings).await,
    }
}

/// The child's `main`: `json` is the value of [`CHILD`].
pub(crate) fn main(json: &str) -> ExitCode {
    match run_child(json) {
        Ok(outcome) => {
            let mut out = std::io::stdout().lock();
            let printed = serde_json::to_string(&outcome)
                .map_err(BoxError::from)
                .and_then(|line| Ok(writeln!(out, "{line}").and_then(|()| out.flush())?));
            match printed {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("peers child: cannot print the outcome: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("peers child: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_child(json: &str) -> Result<Outcome, BoxError> {
    let child: Child =
        serde_json::from_str(json).map_err(|e| format!("{CHILD} does not read: {e}"))?;
    let system = System::from_name(&child.system)
        .ok_or_else(|| format!("{CHILD} names an unknown system `{}`", child.system))?;
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(system, child.row, &child.settings))
}
