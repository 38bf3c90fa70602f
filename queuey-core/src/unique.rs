//! Unique jobs: at most one job of a key waiting at a time.
//!
//! The claim is taken in a [`Store`](crate::store::Store) before the job is
//! published, under the job's id and for the job's window; the worker gives
//! it back once the job is done for good (acknowledged or dead-lettered).
//! A process that dies between the two leaves the claim to expire with its
//! window. This module is the one place that names the keys, claims and
//! releases them.

use std::fmt;
use std::time::Duration;

use serde_json::value::RawValue;
use uuid::Uuid;

use crate::Error;
use crate::store::{Inserted, Store, StoreError, bounded};

/// Which jobs count as the same, and for how long.
///
/// Declare it on the job type (`#[job(unique(window = "10m"))]`, or
/// [`Job::unique`](crate::Job::unique) by hand) or per enqueue with
/// [`EnqueueOptions::unique`](crate::EnqueueOptions::unique). A second
/// enqueue of the same key while the first job waits (or runs, or is held
/// for a retry) and its window lasts is answered
/// [`Error::Duplicate`] and not published.
///
/// ```
/// use std::time::Duration;
/// use queuey_core::Unique;
///
/// let by_payload = Unique::payload(Duration::from_secs(600));
/// let by_tenant = Unique::key("tenant-7", Duration::from_secs(600));
/// assert_eq!(by_tenant.window(), Duration::from_secs(600));
/// # let _ = by_payload;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unique {
    key: Key,
    window: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    /// The job's JSON, as encoded.
    Payload,
    /// A key of the caller's.
    Given(String),
}

impl Unique {
    /// Jobs of the same type whose JSON is the same are the same.
    ///
    /// The JSON is the job as serde encodes it: fields in declaration
    /// order, so equal structs give equal keys. A job holding a `HashMap`
    /// encodes its entries in no fixed order; give such a job a
    /// [`key`](Unique::key) instead.
    pub fn payload(window: Duration) -> Unique {
        Unique {
            key: Key::Payload,
            window,
        }
    }

    /// Jobs of the same type with this key are the same (a tenant, an
    /// account, a document id).
    pub fn key(key: impl Into<String>, window: Duration) -> Unique {
        Unique {
            key: Key::Given(key.into()),
            window,
        }
    }

    /// How long the claim lasts at most: a job still waiting after its
    /// window no longer blocks a new one, and a claim left by a process that
    /// died is gone after it.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The store key of a job of type `job_type` on `queue` with this
    /// payload: the caller's key as given, the payload as a digest of it.
    pub(crate) fn store_key(&self, queue: &str, job_type: &str, payload: &RawValue) -> String {
        match &self.key {
            Key::Given(key) => format!("queuey:unique:{queue}:{job_type}:{key}"),
            Key::Payload => {
                let digest = Uuid::new_v5(&Uuid::NAMESPACE_OID, payload.get().as_bytes());
                format!(
                    "queuey:unique:{queue}:{job_type}:payload:{}",
                    digest.simple()
                )
            }
        }
    }
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The key is this job's now: release it if the job is not published.
    Taken,
    /// The key was this job's already (the same job enqueued again, say
    /// after an uncertain publish): publish, but leave the claim alone on
    /// failure, as the first try may have reached the broker.
    Ours,
    /// The store could not be asked; the job goes without a claim.
    Unchecked,
}

/// Claims `key` for `job_id` for `window`, or answers the job that holds
/// it as [`Error::Duplicate`].
pub(crate) async fn claim(
    store: &dyn Store,
    timeout: Duration,
    key: &str,
    job_id: Uuid,
    window: Duration,
) -> Result<Claim, Error> {
    let id = job_id.to_string();
    match bounded(timeout, store.insert(key, &id, window)).await {
        Ok(Inserted::New) => Ok(Claim::Taken),
        Ok(Inserted::Exists(held)) if held == id => Ok(Claim::Ours),
        Ok(Inserted::Exists(held)) => Err(Error::Duplicate {
            existing_id: held.parse().unwrap_or(Uuid::nil()),
        }),
        Err(error) => {
            unchecked(key, &error);
            Ok(Claim::Unchecked)
        }
    }
}

/// Gives `key` back if `job_id` still holds it. A store that cannot be
/// asked leaves the key to expire with its window.
pub async fn release(store: &dyn Store, timeout: Duration, key: &str, job_id: Uuid) {
    match bounded(timeout, store.remove(key, &job_id.to_string())).await {
        Ok(_) => {}
        Err(error) => tracing::warn!(
            key,
            %job_id,
            %error,
            "could not release a unique job's key; it expires with its window"
        ),
    }
}

fn unchecked(key: &str, error: &StoreError) {
    tracing::warn!(
        key,
        %error,
        "the store did not answer: the job is enqueued without its uniqueness check"
    );
}

impl fmt::Display for Unique {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Key::Payload => write!(f, "unique by payload for {:?}", self.window),
            Key::Given(key) => write!(f, "unique by key {key:?} for {:?}", self.window),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn keys_name_the_queue_the_type_and_the_key_or_a_digest_of_the_payload() {
        let minute = Duration::from_secs(60);
        let given = Unique::key("tenant-7", minute).store_key("app.q", "rebuild", &raw("{}"));
        assert_eq!(given, "queuey:unique:app.q:rebuild:tenant-7");
        let a = Unique::payload(minute).store_key("app.q", "rebuild", &raw(r#"{"t":7}"#));
        let b = Unique::payload(minute).store_key("app.q", "rebuild", &raw(r#"{"t":7}"#));
        let c = Unique::payload(minute).store_key("app.q", "rebuild", &raw(r#"{"t":8}"#));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.starts_with("queuey:unique:app.q:rebuild:payload:"), "{a}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_is_taken_once_and_is_ours_again_for_the_same_job() {
        let store = MemoryStore::new();
        let t = Duration::from_secs(1);
        let first = Uuid::new_v4();
        let window = Duration::from_secs(60);
        assert_eq!(
            claim(&store, t, "k", first, window).await.unwrap(),
            Claim::Taken
        );
        assert_eq!(
            claim(&store, t, "k", first, window).await.unwrap(),
            Claim::Ours
        );
        let other = claim(&store, t, "k", Uuid::new_v4(), window).await;
        assert!(matches!(other, Err(Error::Duplicate { existing_id }) if existing_id == first));
        release(&store, t, "k", Uuid::new_v4()).await;
        assert!(claim(&store, t, "k", Uuid::new_v4(), window).await.is_err());
        release(&store, t, "k", first).await;
        assert_eq!(
            claim(&store, t, "k", Uuid::new_v4(), window).await.unwrap(),
            Claim::Taken
        );
    }
}
