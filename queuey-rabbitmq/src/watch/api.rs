//! Reading the quorum holds' statistics from the management API: one
//! `GET /api/queues/{vhost}` per read, with only the columns the rule needs.
//!
//! Every failure is a [`ReadError`] whose text says what to check and
//! quotes no password (the credentials travel in a header, never in the
//! URL, and every error text is scrubbed of the password besides).

use std::fmt;
use std::time::Duration;

use queuey_core::__private::root_cause;
use serde_json::Value;

use super::endpoint::Endpoint;
use super::stall::Sample;

/// Why the management API could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// Nothing answered, or not in time.
    Unreachable { base: String, detail: String },
    /// The API answered with an error status.
    Refused { base: String, status: u16 },
    /// What answered is not the management API.
    Unexpected { base: String, detail: String },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Unreachable { base, detail } => write!(
                f,
                "the management API at {base} cannot be reached ({detail}): enable the \
                 rabbitmq_management plugin, or give its address with \
                 RabbitMqOptions::management_url"
            ),
            ReadError::Refused { base, status: 401 } => write!(
                f,
                "the management API at {base} refused the credentials (401): the user needs \
                 a management tag such as `monitoring`, or give another user in \
                 RabbitMqOptions::management_url"
            ),
            ReadError::Refused { base, status } => write!(
                f,
                "the management API at {base} answered {status} to the queue listing"
            ),
            ReadError::Unexpected { base, detail } => write!(
                f,
                "what answers at {base} is not the management API: {detail}"
            ),
        }
    }
}

/// A client of one virtual host's management API.
pub(crate) struct Api {
    http: reqwest::Client,
    endpoint: Endpoint,
}

impl Api {
    /// A client whose every request is bounded by `timeout`.
    pub(crate) fn new(endpoint: Endpoint, timeout: Duration) -> Result<Api, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| format!("the HTTP client cannot be built: {}", root_cause(&e)))?;
        Ok(Api { http, endpoint })
    }

    /// The base URL, without credentials.
    pub(crate) fn base(&self) -> &str {
        &self.endpoint.base
    }

    /// Every queue of the virtual host that has statistics, by name.
    pub(crate) async fn read(&self) -> Result<Vec<(String, Sample)>, ReadError> {
        let body = self
            .get(&self.endpoint.queues_url())
            .await?
            .ok_or_else(|| ReadError::Refused {
                base: self.endpoint.base.clone(),
                status: 404,
            })?;
        listing(&body).map_err(|detail| ReadError::Unexpected {
            base: self.endpoint.base.clone(),
            detail,
        })
    }

    /// Every job `queue` holds by its statistics (`messages`: those a
    /// quorum hold keeps past their delay included); `None` when the queue
    /// does not exist or has no statistics yet.
    pub(crate) async fn messages(&self, queue: &str) -> Result<Option<u64>, ReadError> {
        let Some(body) = self.get(&self.endpoint.queue_url(queue)).await? else {
            return Ok(None);
        };
        let value: Value = serde_json::from_slice(&body).map_err(|e| ReadError::Unexpected {
            base: self.endpoint.base.clone(),
            detail: format!("the answer is not JSON ({e})"),
        })?;
        Ok(value.get("messages").and_then(Value::as_u64))
    }

    /// The body at `url`, `None` for a 404.
    async fn get(&self, url: &str) -> Result<Option<bytes::Bytes>, ReadError> {
        let base = &self.endpoint.base;
        let unreachable = |e: reqwest::Error| ReadError::Unreachable {
            base: base.clone(),
            detail: self.scrub(root_cause(&e)),
        };
        let response = self
            .http
            .get(url)
            .basic_auth(&self.endpoint.user, Some(&self.endpoint.password))
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(ReadError::Refused {
                base: base.clone(),
                status: status.as_u16(),
            });
        }
        response.bytes().await.map(Some).map_err(unreachable)
    }

    /// `text` without the password.
    fn scrub(&self, text: String) -> String {
        if self.endpoint.password.is_empty() {
            text
        } else {
            text.replace(&self.endpoint.password, "***")
        }
    }
}

/// The queues of a listing that carry statistics (a queue has none until
/// the broker's first statistics emission after it was declared).
pub(crate) fn listing(body: &[u8]) -> Result<Vec<(String, Sample)>, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
    let Value::Array(queues) = value else {
        return Err("the answer is not a list of queues".to_owned());
    };
    let number = |queue: &Value, key: &str| queue.get(key).and_then(Value::as_u64);
    Ok(queues
        .iter()
        .filter_map(|queue| {
            let name = queue.get("name")?.as_str()?;
            let messages = number(queue, "messages")?;
            let ready = number(queue, "messages_ready")?;
            let unacked = number(queue, "messages_unacknowledged").unwrap_or(0);
            let published = queue
                .get("message_stats")
                .and_then(|stats| number(stats, "publish"));
            Some((
                name.to_owned(),
                Sample {
                    releasing: messages.saturating_sub(ready.saturating_add(unacked)),
                    messages,
                    published,
                },
            ))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_gives_each_queue_its_releasing_figure() {
        let body = br#"[
            {"name":"q.deferred.quorum.1000","messages":12,"messages_ready":2,
             "messages_unacknowledged":0,"message_stats":{"publish":40}},
            {"name":"q","messages":3,"messages_ready":3,"messages_unacknowledged":0,
             "message_stats":[]},
            {"name":"fresh.deferred.quorum.5000"},
            {"name":"odd","messages":1,"messages_ready":4,"messages_unacknowledged":0}
        ]"#;
        let read = listing(body).unwrap();
        assert_eq!(
            read,
            vec![
                (
                    "q.deferred.quorum.1000".to_owned(),
                    Sample {
                        releasing: 10,
                        messages: 12,
                        published: Some(40)
                    }
                ),
                (
                    "q".to_owned(),
                    Sample {
                        releasing: 0,
                        messages: 3,
                        published: None
                    }
                ),
                (
                    "odd".to_owned(),
                    Sample {
                        releasing: 0,
                        messages: 1,
                        published: None
                    }
                ),
            ]
        );
    }

    #[test]
    fn what_is_not_a_listing_is_an_error() {
        assert!(listing(b"<html>login</html>").is_err());
        assert!(listing(br#"{"error":"not_authorised"}"#).is_err());
    }

    #[test]
    fn errors_say_what_to_check() {
        let base = "http://rabbit:15672".to_owned();
        let unreachable = ReadError::Unreachable {
            base: base.clone(),
            detail: "connection refused".into(),
        };
        assert!(unreachable.to_string().contains("rabbitmq_management"));
        let refused = ReadError::Refused { base, status: 401 };
        assert!(refused.to_string().contains("monitoring"), "{refused}");
    }
}
