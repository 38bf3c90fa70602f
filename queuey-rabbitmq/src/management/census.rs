//! The management API as the backend's [`HoldCensus`]: what its pruner asks
//! before deleting a hold, since AMQP does not count the jobs a quorum hold
//! keeps past their delay.
//!
//! Each question is one `GET /api/queues/{vhost}/{hold}`. An API that
//! cannot be read answers "cannot tell", which keeps the hold: said once at
//! INFO (and why), then at DEBUG, and at INFO again once it can be read.

use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use queuey_core::Error;
use tokio::sync::OnceCell;

use super::client::Client;
use super::endpoint::Endpoint;
use crate::TlsOptions;
use crate::census::HoldCensus;

/// A census over one virtual host's management API; its HTTP client is
/// built on the first question (loading the platform's roots takes a
/// moment that the backend's start need not wait for).
pub(crate) struct ApiCensus {
    endpoint: Endpoint,
    tls: TlsOptions,
    api: OnceCell<Option<Client>>,
    /// Whether the last question went unanswered (said at INFO once).
    failing: AtomicBool,
}

impl ApiCensus {
    pub(crate) fn new(endpoint: Endpoint, tls: TlsOptions) -> Self {
        ApiCensus {
            endpoint,
            tls,
            api: OnceCell::new(),
            failing: AtomicBool::new(false),
        }
    }

    /// Says that holds are not counted, at INFO the first time in a row.
    fn cannot_count(&self, hold: &str, why: &dyn std::fmt::Display) {
        if self.failing.swap(true, Ordering::Relaxed) {
            tracing::debug!(hold = %hold, "cannot count the jobs of a hold for pruning: {why}");
        } else {
            tracing::info!(
                hold = %hold,
                "quorum holds are kept, not pruned, while their jobs cannot be counted: {why}"
            );
        }
    }
}

impl HoldCensus for ApiCensus {
    fn jobs<'a>(&'a self, hold: &'a str) -> BoxFuture<'a, Result<Option<u64>, Error>> {
        Box::pin(async move {
            let api = self
                .api
                .get_or_init(|| async {
                    Client::new(self.endpoint.clone(), &self.tls)
                        .inspect_err(|why| self.cannot_count(hold, why))
                        .ok()
                })
                .await;
            let Some(api) = api else {
                return Ok(None);
            };
            match api.queue(hold).await {
                Ok(info) => {
                    if self.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!("the management API counts the jobs of quorum holds again");
                    }
                    Ok(info.and_then(|info| info.messages))
                }
                Err(why) => {
                    self.cannot_count(hold, &why);
                    Ok(None)
                }
            }
        })
    }
}
