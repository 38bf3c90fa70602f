//! `queuey web`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use queuey_ops::topology::TopologySpec;
use queuey_ops::web::{self, Auth, WebConfig};
use queuey_ops::{OpsError, Result};

use super::Global;

#[derive(Debug, Args)]
pub(crate) struct WebArgs {
    /// Address to listen on; anything but localhost needs --token or --basic-auth.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Work queues to show (repeatable) [default: every queue with a dead-letter queue].
    #[arg(long = "queue", value_name = "QUEUE")]
    queues: Vec<String>,
    /// A queue-set file to check the topology against.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Require this token (`Authorization: Bearer …`, or `?token=…` once).
    #[arg(
        long,
        env = "QUEUEY_WEB_TOKEN",
        hide_env_values = true,
        conflicts_with = "basic_auth"
    )]
    token: Option<String>,
    /// Require HTTP basic auth as USER:PASSWORD.
    #[arg(
        long,
        env = "QUEUEY_WEB_BASIC_AUTH",
        hide_env_values = true,
        value_name = "USER:PASSWORD"
    )]
    basic_auth: Option<String>,
    /// Allow listening beyond localhost without authentication.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Directory purges write their exports to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    export_dir: PathBuf,
}

pub(crate) async fn run(global: &Global, args: WebArgs) -> Result<ExitCode> {
    let auth = match (&args.token, &args.basic_auth) {
        (Some(token), _) => Auth::Token(token.clone()),
        (None, Some(pair)) => {
            let (user, password) = pair
                .split_once(':')
                .ok_or_else(|| OpsError::Invalid("--basic-auth takes USER:PASSWORD".into()))?;
            Auth::Basic {
                user: user.to_owned(),
                password: password.to_owned(),
            }
        }
        (None, None) => Auth::None,
    };
    if auth == Auth::None && !args.listen.ip().is_loopback() && !args.insecure_no_auth {
        return Err(OpsError::Invalid(format!(
            "{} is not a loopback address: give --token or --basic-auth, or --insecure-no-auth if \
             something in front of the dashboard authenticates",
            args.listen
        )));
    }
    let topology = args
        .config
        .as_deref()
        .map(TopologySpec::from_file)
        .transpose()?;
    let config = WebConfig {
        amqp_url: global.url.clone(),
        mgmt_base: global.mgmt_url.clone(),
        queues: args.queues,
        topology,
        dead_suffix: global.dead_suffix.clone(),
        deferred_suffix: global.deferred_suffix.clone(),
        auth,
        export_dir: args.export_dir,
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| OpsError::Invalid(format!("cannot listen on {}: {e}", args.listen)))?;
    eprintln!(
        "queuey dashboard on http://{}/ (Ctrl-C stops it)",
        args.listen
    );
    let serving = if args.insecure_no_auth {
        web::serve_unchecked(listener, config).await
    } else {
        web::serve(listener, config).await
    };
    serving.map(|()| ExitCode::SUCCESS)
}
