//! The RabbitMQ management HTTP API (needed to list queues and read their
//! arguments and policies): the library's client with the tool's errors,
//! and the answers only the tool reads.

use queuey_rabbitmq::management::{self as api, Client, Endpoint};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{OpsError, Result};
use crate::tls::TlsFiles;

pub(crate) use queuey_rabbitmq::management::QueueInfo;

impl From<api::Error> for OpsError {
    fn from(error: api::Error) -> Self {
        match error {
            api::Error::Unreachable { base, detail } => {
                OpsError::ManagementMissing { url: base, detail }
            }
            api::Error::Status {
                status, path, body, ..
            } => OpsError::Management { status, path, body },
            api::Error::Unexpected { base, path, detail } => OpsError::ManagementMissing {
                url: base,
                detail: format!("the answer to {path} is not the one expected ({detail})"),
            },
            other => OpsError::Invalid(other.to_string()),
        }
    }
}

/// A client of one broker's management API, scoped to one vhost.
#[derive(Debug, Clone)]
pub(crate) struct Management {
    api: Client,
}

impl Management {
    /// A client for the broker `amqp_url` names, at `base` when given.
    pub(crate) fn for_amqp_url_tls(
        amqp_url: &str,
        base: Option<&str>,
        tls: &TlsFiles,
    ) -> Result<Self> {
        let endpoint = Endpoint::new(amqp_url, base).map_err(api::Error::from)?;
        let api = Client::new(endpoint, &tls.amqp()?)?;
        Ok(Management { api })
    }

    /// The base URL, without credentials.
    pub(crate) fn base(&self) -> &str {
        self.api.endpoint().base()
    }

    pub(crate) fn vhost(&self) -> &str {
        self.api.endpoint().vhost()
    }

    fn path(&self, collection: &str, names: &[&str]) -> String {
        self.api.endpoint().vhost_path(collection, names)
    }

    /// `GET {base}/api/{path}` as JSON; `Ok(None)` on 404.
    pub(crate) async fn get(&self, path: &str) -> Result<Option<Value>> {
        Ok(self.api.get(path).await?)
    }

    /// A list at `path`; empty when there is none.
    async fn list(&self, path: &str) -> Result<Vec<Value>> {
        Ok(match self.get(path).await? {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// The queues of the vhost whose names match `regex` (all when `None`).
    pub(crate) async fn queues(&self, regex: Option<&str>) -> Result<Vec<QueueInfo>> {
        Ok(self.api.queues(regex).await?)
    }

    pub(crate) async fn queue(&self, name: &str) -> Result<Option<QueueInfo>> {
        Ok(self.api.queue(name).await?)
    }

    pub(crate) async fn consumers(&self) -> Result<Vec<Value>> {
        self.list(&self.path("consumers", &[])).await
    }

    pub(crate) async fn connections(&self) -> Result<Vec<Value>> {
        self.list(&self.path("vhosts", &["connections"])).await
    }

    /// Sets the policy `name` of this vhost.
    pub(crate) async fn put_policy(&self, name: &str, policy: &Value) -> Result<()> {
        Ok(self
            .api
            .put(&self.path("policies", &[name]), policy)
            .await?)
    }

    pub(crate) async fn overview(&self) -> Result<Value> {
        Ok(self.get("overview").await?.unwrap_or(Value::Null))
    }

    pub(crate) async fn nodes(&self) -> Result<Vec<Value>> {
        self.list("nodes").await
    }

    pub(crate) async fn vhost_info(&self) -> Result<Option<Value>> {
        self.get(&self.path("vhosts", &[])).await
    }

    /// The broker's deprecated features; `None` before RabbitMQ 3.13.
    pub(crate) async fn deprecated_features(&self) -> Result<Option<Vec<DeprecatedFeature>>> {
        match self.get("deprecated-features").await? {
            Some(list) => Ok(Some(serde_json::from_value(list).map_err(|e| {
                OpsError::Invalid(format!(
                    "the management API's list of deprecated features is not one: {e}"
                ))
            })?)),
            None => Ok(None),
        }
    }
}

/// A deprecated feature of the broker and its state (`permitted` or `denied`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub(crate) struct DeprecatedFeature {
    pub(crate) name: String,
    pub(crate) state: String,
}

impl DeprecatedFeature {
    pub(crate) fn is_denied(&self) -> bool {
        self.state == "denied"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Management {
        /// The user the API is called as.
        pub(crate) fn user(&self) -> &str {
            self.api.endpoint().user()
        }

        /// Removes the policy `name` of this vhost; `Ok` when it was not there.
        pub(crate) async fn delete_policy(&self, name: &str) -> Result<()> {
            self.api.delete(&self.path("policies", &[name])).await?;
            Ok(())
        }
    }

    #[test]
    fn the_management_client_follows_the_amqp_url() {
        let m = Management::for_amqp_url("amqp://ops:p%40ss@rabbit.local:5672/%2f", None).unwrap();
        assert_eq!(
            (m.base(), m.user(), m.vhost()),
            ("http://rabbit.local:15672", "ops", "/")
        );
        let m = Management::for_amqp_url("amqp://h/prod", Some("https://mgmt:443/")).unwrap();
        assert_eq!(
            (m.base(), m.vhost(), m.user()),
            ("https://mgmt", "prod", "guest")
        );
        let m = Management::for_amqp_url("amqps://ops:pw@rabbit.local/%2f", None).unwrap();
        assert_eq!(m.base(), "https://rabbit.local:15671");
    }

    #[test]
    fn credentials_in_the_management_url_are_used_and_never_shown() {
        let m = Management::for_amqp_url(
            "amqp://guest:guest@h/%2f",
            Some("http://admin:SECRETPASS@127.0.0.1:15672/"),
        )
        .unwrap();
        assert_eq!((m.base(), m.user()), ("http://127.0.0.1:15672", "admin"));
        assert!(!format!("{m:?}").contains("SECRETPASS"));
        let bad = Management::for_amqp_url("amqp://h/%2f", Some("ht tp://u:SECRETPASS@h"))
            .unwrap_err()
            .to_string();
        assert!(!bad.contains("SECRETPASS"), "{bad}");
    }

    #[test]
    fn plain_http_to_another_host_is_refused_when_amqp_is_encrypted() {
        let refused =
            Management::for_amqp_url("amqps://u:p@rabbit/%2f", Some("http://rabbit:15672"))
                .unwrap_err()
                .to_string();
        assert!(refused.contains("https://"), "{refused}");
        assert!(!refused.contains("  "), "{refused}");
        // This machine, or plaintext AMQP anyway: allowed.
        Management::for_amqp_url("amqps://u:p@rabbit/%2f", Some("http://127.0.0.1:15672")).unwrap();
        Management::for_amqp_url("amqp://u:p@rabbit/%2f", Some("http://rabbit:15672")).unwrap();
        let ftp = Management::for_amqp_url("amqp://h/%2f", Some("ftp://h")).unwrap_err();
        assert!(ftp.to_string().contains("ftp"), "{ftp}");
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let files = TlsFiles {
            ca: vec!["/nonexistent/ca.pem".into()],
            ..TlsFiles::default()
        };
        let error =
            Management::for_amqp_url_tls("amqps://u:p@rabbit/%2f", None, &files).unwrap_err();
        assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
    }

    #[tokio::test]
    async fn an_api_that_is_not_there_says_how_to_enable_it() {
        let m = Management::for_amqp_url("amqp://h/%2f", Some("http://127.0.0.1:9")).unwrap();
        let missing = m.overview().await.unwrap_err();
        assert!(
            matches!(missing, OpsError::ManagementMissing { .. }),
            "{missing:?}"
        );
        assert!(
            missing.to_string().contains("rabbitmq-plugins enable"),
            "{missing}"
        );
    }
}
