//! `queuey web`.

use crate::out::errln;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::topology::TopologySpec;
use crate::web::{self, Auth, PublicHost, WebConfig};
use crate::{OpsError, Result};
use clap::Args;

use super::Global;

/// What `queuey web --help` says about exposure, after the options.
const EXPOSURE: &str = "\
Exposure rules:
  Host     Requests must name the dashboard: localhost, 127.0.0.1, [::1] or the
           address they arrived on, with the listening port (no port only on
           port 80), or a --public-host name. Others get 421 (DNS rebinding).
  Origin   A POST whose Origin is not the dashboard's own, or whose
           Sec-Fetch-Site is cross-site or same-site, gets 403. A client that
           sends neither header passes on Host and the CSRF token. Origin
           null passes only with Sec-Fetch-Site same-origin (browsers send
           it for the dashboard's own forms: Referrer-Policy no-referrer).
  CSRF     Every form carries a token bound to the browser's session cookie;
           a script that posts keeps the queuey_session cookie of the page.
  Queues   With --queue, other queues get 404.
  Headers  Content-Security-Policy (frame-ancestors 'none'), X-Frame-Options
           DENY, Referrer-Policy no-referrer, X-Content-Type-Options nosniff,
           Cache-Control no-store, on every answer.
  Cookies  HttpOnly, SameSite=Strict; Secure on requests that name a
           --public-host given as https://NAME (a TLS-terminating proxy).";

#[derive(Debug, Args)]
#[command(after_long_help = EXPOSURE)]
pub(crate) struct WebArgs {
    /// Address to listen on; anything but localhost needs --token or --basic-auth.
    /// The dashboard answers to localhost, 127.0.0.1, [::1] and this address on
    /// this port, and to the --public-host names.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Another name clients reach the dashboard by (repeatable): NAME[:PORT]
    /// (without a port: port 80), or https://NAME[:PORT] behind a TLS-terminating
    /// proxy (without a port: 443; cookies then get Secure). Other names get 421.
    #[arg(long = "public-host", value_name = "NAME[:PORT]")]
    public_hosts: Vec<PublicHost>,
    /// Work queues the dashboard may show and change (repeatable); others get 404
    /// [default: every queue with a dead-letter queue].
    #[arg(long = "queue", value_name = "QUEUE")]
    queues: Vec<String>,
    /// A queue-set file to check the topology against.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Require this token (`Authorization: Bearer …`, or `?token=…` once, then a
    /// cookie): at least 16 printable ASCII characters, e.g. `openssl rand -hex 16`.
    #[arg(
        long,
        env = "QUEUEY_WEB_TOKEN",
        hide_env_values = true,
        conflicts_with = "basic_auth"
    )]
    token: Option<String>,
    /// Require HTTP basic auth as USER:PASSWORD, neither empty.
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

pub(crate) async fn run(global: &Global, args: WebArgs) -> Result<bool> {
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
    auth.validate()?;
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
        tls: global.tls(),
        queues: args.queues,
        topology,
        dead_suffix: global.dead_suffix.clone(),
        deferred_suffix: global.deferred_suffix.clone(),
        auth,
        public_hosts: args.public_hosts,
        export_dir: args.export_dir,
        control_stream: global.control_stream.clone(),
        trust: global.trust(),
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| OpsError::Invalid(format!("cannot listen on {}: {e}", args.listen)))?;
    errln!(
        "queuey dashboard on http://{}/ (Ctrl-C stops it)",
        args.listen
    );
    let serving = if args.insecure_no_auth {
        web::serve_unchecked(listener, config).await
    } else {
        web::serve(listener, config).await
    };
    serving.map(|()| false)
}
