//! Unique jobs: at most one job of a key waiting at a time.
//!
//! A claim is taken in a [`Store`](crate::store::Store) before the job is
//! published, under the job's id for its window; the worker gives it back
//! once the job is done for good (acknowledged or dead-lettered), and a
//! process dying in between leaves it to expire. This module alone names,
//! claims and releases the keys. Rules:
//!
//! - Every window goes through [`check_window`] before a claim.
//! - Keys live in two namespaces that cannot meet:
//!   `queuey:unique:{queue}:{type}:caller:{key}` (a caller's key) and
//!   `queuey:unique:{queue}:{type}:payload:{digest}`.
//! - A worker gives back only a key it recomputes from the job it ran
//!   (queue, type, payload, the type's [`Job::unique`](crate::Job::unique));
//!   the key a message names is a claim to compare, never one to remove.
//! - Keys are never logged, only their [`digest`].
//! - A failing store lets the job go without a claim (fail open), counted in
//!   [`UNIQUE_UNCHECKED_TOTAL`](crate::store::UNIQUE_UNCHECKED_TOTAL).

use std::fmt;
use std::time::Duration;

use serde_json::value::RawValue;
use uuid::Uuid;

use crate::store::{Inserted, Store, StoreError, UNIQUE_UNCHECKED_TOTAL, bounded, check_window};
use crate::{Envelope, Error};

/// The start of every unique key.
const PREFIX: &str = "queuey:unique:";

/// Which jobs count as the same, and for how long.
///
/// Declare it on the job type (`#[job(unique(window = "10m"))]`, or
/// [`Job::unique`](crate::Job::unique)) or per enqueue with
/// [`EnqueueOptions::unique`](crate::EnqueueOptions::unique). Enqueueing the
/// same key again while the first job waits, runs or is held, within its
/// window, is answered [`Error::Duplicate`] and not published. A window of
/// zero or over [`MAX_WINDOW`](crate::store::MAX_WINDOW) (365 days) is
/// refused with [`Error::InvalidConfig`] (see [`check_window`]).
///
/// When the job is done for good the worker gives its key back only if it
/// belongs to the job (computed again from it, or a caller's
/// [`key`](Unique::key) of the job's own queue and type) and still holds
/// the job's id; another queue's or type's key is never given back.
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
#[derive(Clone, PartialEq, Eq)]
pub struct Unique {
    key: Key,
    window: Duration,
}

#[derive(Clone, PartialEq, Eq)]
enum Key {
    /// The job's JSON, as encoded.
    Payload,
    /// A key of the caller's.
    Given(String),
}

impl Unique {
    /// Jobs of the same type whose JSON (as serde encodes it, fields in
    /// declaration order) is the same are the same. A `HashMap` encodes in
    /// no fixed order; give such a job a [`key`](Unique::key) instead.
    pub fn payload(window: Duration) -> Unique {
        Unique {
            key: Key::Payload,
            window,
        }
    }

    /// Jobs of the same type with this key are the same (a tenant, an
    /// account, a document id). Any string is a key of its own: it never
    /// meets a [`payload`](Unique::payload) key, whatever it holds.
    pub fn key(key: impl Into<String>, window: Duration) -> Unique {
        Unique {
            key: Key::Given(key.into()),
            window,
        }
    }

    /// How long the claim lasts at most: after it, a waiting job no longer
    /// blocks a new one, and a dead process's claim is gone.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The window, checked by [`check_window`], or the error an enqueue of
    /// a `job_type` job for `queue` answers.
    pub(crate) fn checked_window(&self, queue: &str, job_type: &str) -> Result<Duration, Error> {
        check_window(self.window).map_err(|error| {
            Error::invalid_config(format!(
                "the unique window of a `{job_type}` job for queue `{queue}` is refused: {error}"
            ))
        })
    }

    /// The store key of a `job_type` job on `queue` with this payload.
    pub(crate) fn store_key(&self, queue: &str, job_type: &str, payload: &RawValue) -> String {
        match &self.key {
            Key::Given(key) => format!("{PREFIX}{queue}:{job_type}:caller:{key}"),
            Key::Payload => payload_key(queue, job_type, payload),
        }
    }

    /// The key producers before the `caller:` namespace gave a caller's key,
    /// to give their claims back; `None` for a payload key or one that reads
    /// like a namespaced key (it could name another job's).
    fn legacy_store_key(&self, queue: &str, job_type: &str) -> Option<String> {
        match &self.key {
            Key::Given(key) if !key.starts_with("payload:") && !key.starts_with("caller:") => {
                Some(format!("{PREFIX}{queue}:{job_type}:{key}"))
            }
            _ => None,
        }
    }
}

/// The key of a job unique by payload.
fn payload_key(queue: &str, job_type: &str, payload: &RawValue) -> String {
    let digest = Uuid::new_v5(&Uuid::NAMESPACE_OID, payload.get().as_bytes());
    format!("{PREFIX}{queue}:{job_type}:payload:{}", digest.simple())
}

/// A short digest of a store key for logs (8 hex digits of a SHA-1 UUID):
/// equal keys match, and the key (maybe a caller's data) never shows.
pub(crate) fn digest(key: &str) -> String {
    let mut hex = Uuid::new_v5(&Uuid::NAMESPACE_OID, key.as_bytes())
        .simple()
        .to_string();
    hex.truncate(8);
    hex
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The key is this job's now: release it if the job is not published.
    Taken,
    /// The key was this job's already (enqueued again after an uncertain
    /// publish): publish, and on failure leave the claim alone.
    Ours,
    /// The store could not be asked; the job goes without a claim.
    Unchecked,
}

/// The job a claim is for, as logs and metrics name it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimFor<'a> {
    pub(crate) queue: &'a str,
    pub(crate) job_type: &'a str,
    pub(crate) job_id: Uuid,
}

/// Claims `key` for the job for `window` (checked already), or answers the
/// holder as [`Error::Duplicate`]; a failing store gives [`Claim::Unchecked`].
pub(crate) async fn claim(
    store: &dyn Store,
    timeout: Duration,
    key: &str,
    job: ClaimFor<'_>,
    window: Duration,
) -> Result<Claim, Error> {
    let id = job.job_id.to_string();
    match bounded(timeout, store.insert(key, &id, window)).await {
        Ok(Inserted::New) => Ok(Claim::Taken),
        Ok(Inserted::Exists(held)) if held == id => Ok(Claim::Ours),
        Ok(Inserted::Exists(held)) => Err(Error::Duplicate {
            existing_id: held.parse().unwrap_or(Uuid::nil()),
        }),
        Err(error) => {
            unchecked(key, job, &error);
            Ok(Claim::Unchecked)
        }
    }
}

/// Gives `key` back if `job_id` still holds it; a failing store leaves it to
/// expire with its window.
pub(crate) async fn give_back(store: &dyn Store, timeout: Duration, key: &str, job_id: Uuid) {
    if let Err(error) = bounded(timeout, store.remove(key, &job_id.to_string())).await {
        tracing::warn!(
            key_digest = %digest(key),
            %job_id,
            reason = error.kind(),
            %error,
            "could not release a unique job's key; it expires with its window"
        );
    }
}

/// Gives back the key a job done for good names, if it belongs to the job on
/// `queue` (the logical queue): a caller's key of the job's own queue and
/// type, or one computed again from the job, `declared` being what each
/// handler of its type declares for this payload. The store removes it only
/// while it holds the job's id; a key the job cannot account for is logged
/// and left to expire. Answers whether the key was recomputed (and so asked
/// to be removed).
pub async fn release(
    store: &dyn Store,
    timeout: Duration,
    envelope: &Envelope,
    queue: &str,
    declared: &[Option<Unique>],
) -> bool {
    let Some(named) = envelope.unique_key.as_deref() else {
        return false;
    };
    let job_type = envelope.job_type.as_str();
    let payload = &*envelope.payload;
    let own_caller_key = named
        .strip_prefix(&format!("{PREFIX}{queue}:{job_type}:caller:"))
        .is_some_and(|key| !key.is_empty());
    let recomputed = own_caller_key
        || payload_key(queue, job_type, payload) == named
        || declared.iter().flatten().any(|unique| {
            unique.store_key(queue, job_type, payload) == named
                || unique.legacy_store_key(queue, job_type).as_deref() == Some(named)
        });
    if !recomputed {
        tracing::warn!(
            queue,
            job_type,
            job_id = %envelope.job_id,
            key_digest = %digest(named),
            "a job names a unique key it does not compute to; the key is not given back \
             and expires with its window"
        );
        return false;
    }
    give_back(store, timeout, named, envelope.job_id).await;
    true
}

fn unchecked(key: &str, job: ClaimFor<'_>, error: &StoreError) {
    metrics::counter!(
        UNIQUE_UNCHECKED_TOTAL,
        "queue" => job.queue.to_owned(),
        "job_type" => job.job_type.to_owned(),
        "reason" => error.kind(),
    )
    .increment(1);
    let what = match error {
        StoreError::Refused(_) => {
            "the store refused the uniqueness check (it answers, but not to this call): \
             the job is enqueued without it"
        }
        _ => "the store did not answer: the job is enqueued without its uniqueness check",
    };
    tracing::warn!(
        queue = job.queue,
        job_type = job.job_type,
        job_id = %job.job_id,
        key_digest = %digest(key),
        reason = error.kind(),
        %error,
        "{what}"
    );
}

impl fmt::Display for Unique {
    /// Names the kind of key and the window; a caller's key shows as its
    /// digest only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Key::Payload => write!(f, "unique by payload for {:?}", self.window),
            Key::Given(key) => write!(
                f,
                "unique by a key (digest {}) for {:?}",
                digest(key),
                self.window
            ),
        }
    }
}

impl fmt::Debug for Unique {
    /// As [`Display`](fmt::Display): the caller's key is not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = match &self.key {
            Key::Payload => "payload".to_owned(),
            Key::Given(key) => format!("caller (digest {})", digest(key)),
        };
        f.debug_struct("Unique")
            .field("key", &key)
            .field("window", &self.window)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;
    use crate::store::MemoryStore;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    fn job(id: Uuid) -> ClaimFor<'static> {
        ClaimFor {
            queue: "app.q",
            job_type: "rebuild",
            job_id: id,
        }
    }

    fn envelope(key: Option<&str>, payload: &str, id: Uuid) -> Envelope {
        let mut envelope = Envelope::new("rebuild", "app.q", raw(payload));
        envelope.job_id = id;
        envelope.unique_key = key.map(str::to_owned);
        envelope
    }

    #[test]
    fn keys_name_the_queue_the_type_and_the_key_or_a_digest_of_the_payload() {
        let minute = Duration::from_secs(60);
        let given = Unique::key("tenant-7", minute).store_key("app.q", "rebuild", &raw("{}"));
        assert_eq!(given, "queuey:unique:app.q:rebuild:caller:tenant-7");
        let a = Unique::payload(minute).store_key("app.q", "rebuild", &raw(r#"{"t":7}"#));
        let b = Unique::payload(minute).store_key("app.q", "rebuild", &raw(r#"{"t":7}"#));
        let c = Unique::payload(minute).store_key("app.q", "rebuild", &raw(r#"{"t":8}"#));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.starts_with("queuey:unique:app.q:rebuild:payload:"), "{a}");
    }

    #[test]
    fn a_caller_key_never_meets_a_payload_key() {
        let minute = Duration::from_secs(60);
        let payload = raw(r#"{"t":7}"#);
        let by_payload = Unique::payload(minute).store_key("app.q", "rebuild", &payload);
        let tail = by_payload.rsplit_once(":payload:").unwrap().1;
        let forged = Unique::key(format!("payload:{tail}"), minute);
        assert_ne!(forged.store_key("app.q", "rebuild", &payload), by_payload);
    }

    #[test]
    fn neither_display_nor_debug_shows_a_caller_key() {
        let unique = Unique::key("alice@example.com", Duration::from_secs(60));
        let shown = format!("{unique} {unique:?}");
        assert!(!shown.contains("alice"), "{shown}");
        assert!(shown.contains(&digest("alice@example.com")), "{shown}");
        assert_eq!(digest("k").len(), 8);
        assert_eq!(digest("k"), digest("k"));
        assert_ne!(digest("k"), digest("l"));
    }

    #[test]
    fn windows_out_of_range_are_refused_with_the_job_named() {
        for window in [Duration::ZERO, Duration::MAX] {
            let error = Unique::payload(window)
                .checked_window("app.q", "rebuild")
                .unwrap_err();
            assert!(matches!(error, Error::InvalidConfig(_)), "{error}");
            assert!(error.to_string().contains("`rebuild` job"), "{error}");
        }
        let hour = Duration::from_secs(3_600);
        assert_eq!(
            Unique::key("k", hour)
                .checked_window("app.q", "rebuild")
                .unwrap(),
            hour
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_is_taken_once_and_is_ours_again_for_the_same_job() {
        let store = MemoryStore::new();
        let t = Duration::from_secs(1);
        let first = Uuid::new_v4();
        let window = Duration::from_secs(60);
        assert_eq!(
            claim(&store, t, "k", job(first), window).await.unwrap(),
            Claim::Taken
        );
        assert_eq!(
            claim(&store, t, "k", job(first), window).await.unwrap(),
            Claim::Ours
        );
        let other = claim(&store, t, "k", job(Uuid::new_v4()), window).await;
        assert!(matches!(other, Err(Error::Duplicate { existing_id }) if existing_id == first));
        give_back(&store, t, "k", Uuid::new_v4()).await;
        assert!(
            claim(&store, t, "k", job(Uuid::new_v4()), window)
                .await
                .is_err()
        );
        give_back(&store, t, "k", first).await;
        assert_eq!(
            claim(&store, t, "k", job(Uuid::new_v4()), window)
                .await
                .unwrap(),
            Claim::Taken
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_gives_back_only_a_key_it_computes_from_the_job() {
        let store = MemoryStore::new();
        let t = Duration::from_secs(1);
        let window = Duration::from_secs(60);
        let id = Uuid::new_v4();
        let declared = [Some(Unique::key("tenant-7", window))];
        // Another job's key, held under this job's id: only a message that
        // names it, not one that computes to it.
        let victim = "queuey:unique:app.q:other:caller:tenant-9";
        store.insert(victim, &id.to_string(), window).await.unwrap();
        let forged = envelope(Some(victim), "{}", id);
        assert!(!release(&store, t, &forged, "app.q", &declared).await);
        assert_eq!(store.get(victim).await.unwrap(), Some(id.to_string()));
        // Its own key, recomputed from the job type's declaration.
        let own = "queuey:unique:app.q:rebuild:caller:tenant-7";
        store.insert(own, &id.to_string(), window).await.unwrap();
        assert!(
            release(
                &store,
                t,
                &envelope(Some(own), "{}", id),
                "app.q",
                &declared
            )
            .await
        );
        assert_eq!(store.get(own).await.unwrap(), None);
        // A payload key is computed from the payload alone.
        let payload = Unique::payload(window).store_key("app.q", "rebuild", &raw("[1]"));
        store
            .insert(&payload, &id.to_string(), window)
            .await
            .unwrap();
        assert!(
            release(
                &store,
                t,
                &envelope(Some(&payload), "[1]", id),
                "app.q",
                &[]
            )
            .await
        );
        assert_eq!(store.get(&payload).await.unwrap(), None);
        // The same payload key named by a job with another payload is not.
        store
            .insert(&payload, &id.to_string(), window)
            .await
            .unwrap();
        assert!(
            !release(
                &store,
                t,
                &envelope(Some(&payload), "[2]", id),
                "app.q",
                &[]
            )
            .await
        );
        assert!(store.get(&payload).await.unwrap().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn keys_of_the_form_before_the_caller_namespace_are_still_given_back() {
        let store = MemoryStore::new();
        let t = Duration::from_secs(1);
        let window = Duration::from_secs(60);
        let id = Uuid::new_v4();
        let old = "queuey:unique:app.q:rebuild:tenant-7";
        store.insert(old, &id.to_string(), window).await.unwrap();
        let declared = [Some(Unique::key("tenant-7", window))];
        assert!(
            release(
                &store,
                t,
                &envelope(Some(old), "{}", id),
                "app.q",
                &declared
            )
            .await
        );
        assert_eq!(store.get(old).await.unwrap(), None);
        // An old-form caller key that reads like a payload key is not.
        let tricky = [Some(Unique::key("payload:abc", window))];
        let named = "queuey:unique:app.q:rebuild:payload:abc";
        store.insert(named, &id.to_string(), window).await.unwrap();
        assert!(
            !release(
                &store,
                t,
                &envelope(Some(named), "{}", id),
                "app.q",
                &tricky
            )
            .await
        );
        assert!(store.get(named).await.unwrap().is_some());
    }

    /// A store that answers every call with `error`.
    #[derive(Debug)]
    struct Failing(fn() -> StoreError);

    impl Store for Failing {
        fn insert<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Duration,
        ) -> futures::future::BoxFuture<'a, Result<Inserted, StoreError>> {
            Box::pin(std::future::ready(Err((self.0)())))
        }
        fn get<'a>(
            &'a self,
            _: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<Option<String>, StoreError>> {
            Box::pin(std::future::ready(Err((self.0)())))
        }
        fn set<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Duration,
        ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
            Box::pin(std::future::ready(Err((self.0)())))
        }
        fn extend<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Duration,
        ) -> futures::future::BoxFuture<'a, Result<bool, StoreError>> {
            Box::pin(std::future::ready(Err((self.0)())))
        }
        fn remove<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<bool, StoreError>> {
            Box::pin(std::future::ready(Err((self.0)())))
        }
    }

    #[test]
    fn a_claim_that_goes_unchecked_is_counted_with_its_cause() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            runtime.block_on(async {
                let t = Duration::from_secs(1);
                let window = Duration::from_secs(60);
                let refused = Failing(|| StoreError::refused("ERR invalid expire time"));
                let gone = Failing(|| StoreError::unavailable("connection refused"));
                for store in [&refused, &refused, &gone] {
                    let claimed = claim(store, t, "k", job(Uuid::new_v4()), window).await;
                    assert_eq!(claimed.unwrap(), Claim::Unchecked);
                }
            });
        });
        let counted: Vec<(String, u64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == UNIQUE_UNCHECKED_TOTAL)
            .map(|(key, _, _, value)| {
                let reason = key
                    .key()
                    .labels()
                    .find(|l| l.key() == "reason")
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default();
                let DebugValue::Counter(n) = value else {
                    panic!("{value:?}")
                };
                (reason, n)
            })
            .collect();
        let mut counted = counted;
        counted.sort();
        assert_eq!(
            counted,
            vec![("refused".to_owned(), 2), ("unavailable".to_owned(), 1)]
        );
    }
}
