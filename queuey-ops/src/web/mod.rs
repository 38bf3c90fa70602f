//! The web dashboard (`queuey web`): server-rendered pages over the same
//! operations as the command line.
//!
//! - `/`: every queuey queue with its ready, unacked, dead and held counts
//!   and rates;
//! - `/queue/{q}`: dead letters grouped by fingerprint with redrive and purge
//!   (each a preview first, then a confirmation), the latest dead letters,
//!   the hold census and the topology problems of that queue;
//! - `/queue/{q}/dead/{id}`: one dead letter in full.
//!
//! Every change is a POST carrying the page's CSRF token, and shows what it
//! would do before it does it. The server listens on localhost unless told
//! otherwise; bound elsewhere it wants a token or basic auth (see [`Auth`]).

mod auth;
mod html;
mod pages;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

pub use auth::Auth;

use crate::amqp::Amqp;
use crate::error::{OpsError, Result};
use crate::mgmt::Management;
use crate::topology::TopologySpec;

/// What the dashboard serves and how.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// The broker's AMQP URL.
    pub amqp_url: String,
    /// The management API base URL (default: the AMQP host, port 15672).
    pub mgmt_base: Option<String>,
    /// The work queues to show; empty: every queue that has a dead-letter queue.
    pub queues: Vec<String>,
    /// The queue set the topology section checks against (default: queuey's
    /// defaults for each queue shown).
    pub topology: Option<TopologySpec>,
    /// Suffix of dead-letter queues.
    pub dead_suffix: String,
    /// Suffix of hold queues.
    pub deferred_suffix: String,
    /// How requests authenticate.
    pub auth: Auth,
    /// Where purges write their exports.
    pub export_dir: PathBuf,
}

impl WebConfig {
    /// A dashboard for the broker at `amqp_url` with every default.
    pub fn new(amqp_url: impl Into<String>) -> Self {
        WebConfig {
            amqp_url: amqp_url.into(),
            mgmt_base: None,
            queues: Vec::new(),
            topology: None,
            dead_suffix: crate::DEFAULT_DEAD_SUFFIX.to_owned(),
            deferred_suffix: crate::DEFAULT_DEFERRED_SUFFIX.to_owned(),
            auth: Auth::None,
            export_dir: PathBuf::from("."),
        }
    }
}

/// The state every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) config: WebConfig,
    pub(crate) auth: Auth,
    pub(crate) csrf: String,
    pub(crate) amqp: Amqp,
    pub(crate) mgmt: Management,
}

/// The dashboard's router, connected to the broker.
pub async fn router(config: WebConfig) -> Result<Router> {
    let mgmt = Management::for_amqp_url(&config.amqp_url, config.mgmt_base.as_deref())?;
    let name = format!("queuey-web-{}", std::process::id());
    let amqp = Amqp::connect(&config.amqp_url, &name).await?;
    let csrf = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let app = Arc::new(App {
        auth: config.auth.clone(),
        config,
        csrf,
        amqp,
        mgmt,
    });
    Ok(Router::new()
        .route("/", get(pages::index))
        .route("/queue/{queue}", get(pages::queue))
        .route("/queue/{queue}/dead/{id}", get(pages::show))
        .route("/queue/{queue}/redrive", post(pages::redrive))
        .route("/queue/{queue}/purge", post(pages::purge))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require,
        ))
        .with_state(app))
}

/// Serves the dashboard on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, config: WebConfig) -> Result<()> {
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

/// Like [`serve`], without refusing an unauthenticated non-loopback
/// address: for a dashboard behind a proxy that authenticates.
pub async fn serve_unchecked(listener: tokio::net::TcpListener, config: WebConfig) -> Result<()> {
    let app = router(config).await?;
    axum::serve(listener, app)
        .await
        .map_err(|e| OpsError::io("the dashboard's socket", e))
}
