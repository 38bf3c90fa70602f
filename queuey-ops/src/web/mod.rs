//! The web dashboard (`queuey web`): server-rendered pages over the same
//! operations as the command line (routes in `pages`). A sharded queue is
//! one row of the index and one page, with a row per shard. Every change is
//! a POST carrying the page's CSRF token, and previews first.
//!
//! # Exposure rules
//!
//! - **Listening.** Localhost by default; elsewhere [`serve`] wants a token
//!   (at least [`MIN_TOKEN_LEN`] characters) or basic auth (not empty);
//!   [`serve_unchecked`] is for a dashboard behind an authenticating proxy.
//! - **Host and Origin** (`exposure`): `421` for a request that does not
//!   name the dashboard, `403` for a change from another origin.
//! - **CSRF** (`session`): every form carries a token bound to the
//!   `queuey_session` cookie and to the credential.
//! - **Queues.** Only [`WebConfig::queues`] and their shards (`404` for
//!   others); none given: every queue with a dead-letter queue. With queues
//!   given, `/schedules` and `/workers` show only theirs, and `/job/cancel`
//!   cancels only a job the heartbeats show running on one of them.
//! - **Headers** (`headers`) on every answer; cookies `HttpOnly`,
//!   `SameSite=Strict`, and `Secure` behind an `https://` public host.

mod auth;
mod chart;
mod exposure;
mod headers;
mod html;
mod pages;
mod public_host;
mod sampler;
mod session;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;

pub(crate) use auth::Auth;
pub(crate) use public_host::PublicHost;

use crate::amqp::{Amqp, redact_url};
use crate::error::{OpsError, Result};
use crate::fleet::{Fleet, History};
use crate::mgmt::Management;
use crate::tls::TlsFiles;
use crate::topology::TopologySpec;
use exposure::{Exposure, LocalAddr};
use session::Sessions;

/// What the dashboard serves and how; `Debug` masks every secret.
#[derive(Clone)]
pub(crate) struct WebConfig {
    pub(crate) amqp_url: String,
    /// Default: found from the AMQP URL.
    pub(crate) mgmt_base: Option<String>,
    pub(crate) tls: TlsFiles,
    /// The work queues shown (with their shards); empty: every queue that
    /// has a dead-letter queue.
    pub(crate) queues: Vec<String>,
    /// The queue set the topology section checks against (default: queuey's
    /// defaults for each queue shown).
    pub(crate) topology: Option<TopologySpec>,
    pub(crate) dead_suffix: String,
    pub(crate) deferred_suffix: String,
    pub(crate) auth: Auth,
    /// Names it answers to besides localhost and its listening address.
    pub(crate) public_hosts: Vec<PublicHost>,
    /// Where purges write their exports.
    pub(crate) export_dir: PathBuf,
    pub(crate) control_stream: String,
    /// Whom it trusts on the fleet plane besides its own user.
    pub(crate) trust: crate::fleet::Trust,
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("amqp_url", &redact_url(&self.amqp_url))
            .field("mgmt_base", &self.mgmt_base.as_deref().map(redact_url))
            .field("tls", &self.tls)
            .field("queues", &self.queues)
            .field("topology", &self.topology)
            .field("dead_suffix", &self.dead_suffix)
            .field("deferred_suffix", &self.deferred_suffix)
            .field("auth", &self.auth)
            .field("public_hosts", &self.public_hosts)
            .field("export_dir", &self.export_dir)
            .field("control_stream", &self.control_stream)
            .field("trust", &self.trust)
            .finish()
    }
}

/// The state every handler shares.
pub(crate) struct App {
    pub(crate) config: WebConfig,
    pub(crate) sessions: Sessions,
    pub(crate) exposure: Exposure,
    pub(crate) amqp: Amqp,
    pub(crate) mgmt: Management,
    pub(crate) fleet: Fleet,
    /// What the fleet did, sampled from the heartbeats by `sampler`.
    pub(crate) history: Arc<History>,
    sampler: tokio::task::AbortHandle,
}

impl Drop for App {
    fn drop(&mut self) {
        self.sampler.abort();
    }
}

/// The dashboard's router, connected to the broker, for a server listening
/// on `listen` (the Host check needs it); refuses invalid credentials.
pub(crate) async fn router(config: WebConfig, listen: SocketAddr) -> Result<Router> {
    config.auth.validate()?;
    crate::check_suffixes(
        &config.dead_suffix,
        &config.deferred_suffix,
        crate::DEFAULT_SUSPECT_SUFFIX,
    )?;
    let mgmt =
        Management::for_amqp_url_tls(&config.amqp_url, config.mgmt_base.as_deref(), &config.tls)?;
    let sessions = Sessions::new(&config.auth)?;
    let exposure = Exposure {
        listen,
        public: config.public_hosts.clone(),
    };
    let name = format!("queuey-web-{}", std::process::id());
    let amqp = Amqp::connect_tls(&config.amqp_url, &name, &config.tls).await?;
    let fleet = Fleet::connect_with(
        &config.amqp_url,
        &config.tls,
        &format!("{name}-control"),
        &config.control_stream,
        &config.trust,
    )
    .await?;
    let history = Arc::new(History::new());
    let sampler = tokio::spawn(sampler::run(fleet.clone(), Arc::clone(&history))).abort_handle();
    let app = Arc::new(App {
        config,
        sessions,
        exposure,
        amqp,
        mgmt,
        fleet,
        history,
        sampler,
    });
    // Outermost last: headers on every answer, then the Host and Origin
    // checks, then authentication, then the session.
    let routes = pages::routes()
        .layer(from_fn_with_state(app.clone(), session::attach))
        .layer(from_fn_with_state(app.clone(), auth::require))
        .layer(from_fn_with_state(app.clone(), exposure::check));
    Ok(headers::layer(routes).with_state(app))
}

/// Serves the dashboard on `listener`; refuses invalid credentials and an
/// unauthenticated address beyond localhost before connecting.
pub(crate) async fn serve(listener: tokio::net::TcpListener, config: WebConfig) -> Result<()> {
    let local = listener.local_addr().ok();
    if config.auth == Auth::None && local.is_some_and(|a| !a.ip().is_loopback()) {
        return Err(OpsError::Invalid(
            "the dashboard listens beyond localhost without authentication; give --token or \
             --basic-auth (or --insecure-no-auth if something in front of it authenticates)"
                .into(),
        ));
    }
    serve_unchecked(listener, config).await
}

/// [`serve`] allowing an unauthenticated non-loopback address (behind an
/// authenticating proxy).
pub(crate) async fn serve_unchecked(
    listener: tokio::net::TcpListener,
    config: WebConfig,
) -> Result<()> {
    let io = |e| OpsError::io("the dashboard's socket", e);
    let app = router(config, listener.local_addr().map_err(io)?).await?;
    let service = app.into_make_service_with_connect_info::<LocalAddr>();
    axum::serve(listener, service).await.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_masks_every_secret() {
        let mut config = WebConfig::new("amqp://ops:amqp-secret@rabbit:5672/%2f");
        config.mgmt_base = Some("http://ops:mgmt-secret@rabbit:15672".into());
        config.auth = Auth::Token("token-secret-0123456789".into());
        let text = format!("{config:?}");
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains("amqp://ops:***@rabbit:5672/%2f"), "{text}");

        config.auth = Auth::Basic {
            user: "ops".into(),
            password: "basic-secret".into(),
        };
        let text = format!("{config:?}");
        assert!(!text.contains("secret"), "{text}");

        let mgmt = Management::for_amqp_url(
            "amqp://ops:amqp-secret@rabbit:5672/%2f",
            Some("http://ops:base-secret@rabbit:15672"),
        )
        .unwrap();
        let text = format!("{mgmt:?}");
        assert!(!text.contains("secret") && text.contains("ops"), "{text}");
    }
}
