//! The management API as the backend's [`HoldCensus`]: what its pruner asks
//! before deleting a hold, since AMQP does not count the jobs a quorum hold
//! keeps past their delay.
//!
//! Each question is one `GET /api/queues/{vhost}/{hold}?columns=name,messages`.
//! An API that cannot be read answers "cannot tell", which keeps the hold;
//! the watchdog already says at INFO when the API cannot be read.

use std::time::Duration;

use futures::future::BoxFuture;
use queuey_core::Error;
use tokio::sync::OnceCell;

use super::api::Api;
use super::endpoint::Endpoint;
use crate::census::HoldCensus;

/// How long one question may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A census over one virtual host's management API; its HTTP client is
/// built on the first question.
pub(crate) struct ApiCensus {
    endpoint: Endpoint,
    api: OnceCell<Option<Api>>,
}

impl ApiCensus {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        ApiCensus {
            endpoint,
            api: OnceCell::new(),
        }
    }
}

impl HoldCensus for ApiCensus {
    fn jobs<'a>(&'a self, hold: &'a str) -> BoxFuture<'a, Result<Option<u64>, Error>> {
        Box::pin(async move {
            let api = self
                .api
                .get_or_init(|| async {
                    Api::new(self.endpoint.clone(), TIMEOUT)
                        .inspect_err(|why| {
                            tracing::debug!("holds are not counted for pruning: {why}")
                        })
                        .ok()
                })
                .await;
            let Some(api) = api else {
                return Ok(None);
            };
            match api.messages(hold).await {
                Ok(jobs) => Ok(jobs),
                Err(why) => {
                    tracing::debug!(hold = %hold, "cannot count the jobs of a hold for pruning: {why}");
                    Ok(None)
                }
            }
        })
    }
}
