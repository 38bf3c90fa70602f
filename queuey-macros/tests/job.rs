//! Behaviour of `#[derive(Job)]`: queue binding, names and retry policies.

use std::time::Duration;

use futures::StreamExt;
use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::{Backoff, Job, Producer, Queues, RetryPolicy};
use serde::{Deserialize, Serialize};

mod sets {
    #[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
    #[queues(prefix = "app")]
    pub(crate) enum AppQueues {
        Emails,
        #[queue(retry(max_attempts = 2, backoff = "none"))]
        Webhooks,
    }
}

use sets::AppQueues;

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(queue = AppQueues::Emails)]
struct SendEmail {
    to: String,
}

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(queue = crate::sets::AppQueues::Webhooks, name = "call_webhook")]
struct CallWebhook {
    url: String,
}

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(
    queue = AppQueues::Webhooks,
    retry(max_attempts = 7, base = "100ms", factor = 1.5, max = "10s", jitter = false)
)]
enum Hook {
    Created { id: u64 },
    Deleted,
}

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(queue = AppQueues::Emails, retry(backoff = "fixed", delay = "45s"))]
struct Digest;

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(queue = AppQueues::Emails, retry(backoff = "none", max_attempts = 1))]
struct Once;

#[test]
fn queue_and_set() {
    assert_eq!(SendEmail::QUEUE, AppQueues::Emails);
    assert_eq!(CallWebhook::QUEUE, AppQueues::Webhooks);
    assert_eq!(Hook::QUEUE, AppQueues::Webhooks);
    assert_eq!(SendEmail::QUEUE.name(), "app.emails");
    fn set_of<J: Job<Queues = AppQueues>>() {}
    set_of::<SendEmail>();
    set_of::<CallWebhook>();
    set_of::<Hook>();
}

#[test]
fn names() {
    assert_eq!(SendEmail::NAME, "SendEmail");
    assert_eq!(CallWebhook::NAME, "call_webhook");
    assert_eq!(Hook::NAME, "Hook");
    assert_eq!(Digest::NAME, "Digest");
}

/// The same job before and after its type was renamed from `SendReceipt`
/// to `EmailReceipt`.
mod before_the_rename {
    #[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
    #[job(queue = crate::AppQueues::Emails)]
    pub(crate) struct SendReceipt {
        pub(crate) to: String,
    }
}

mod after_the_rename {
    #[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
    #[job(queue = crate::AppQueues::Emails)]
    pub(crate) struct EmailReceipt {
        pub(crate) to: String,
    }

    /// Renamed too, with the old name kept.
    #[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
    #[job(queue = crate::AppQueues::Emails, name = "SendReceipt")]
    pub(crate) struct EmailReceiptNamed {
        pub(crate) to: String,
    }
}

#[tokio::test]
async fn renaming_a_type_without_a_name_changes_the_name_its_jobs_carry() {
    use after_the_rename::{EmailReceipt, EmailReceiptNamed};
    use before_the_rename::SendReceipt;

    // The default name is the type's: a rename changes it, so jobs queued
    // before it no longer match the handler of the renamed type.
    assert_eq!(SendReceipt::NAME, "SendReceipt");
    assert_eq!(EmailReceipt::NAME, "EmailReceipt");
    // `name` keeps it whatever the type is called.
    assert_eq!(EmailReceiptNamed::NAME, SendReceipt::NAME);

    let backend = std::sync::Arc::new(MemoryBackend::new());
    let producer = Producer::<AppQueues, _>::new(backend.clone())
        .await
        .unwrap();
    producer
        .enqueue(&SendReceipt {
            to: "a@example.com".into(),
        })
        .await
        .unwrap();
    let mut deliveries = backend.consume(&AppQueues::Emails.config()).await.unwrap();
    let delivery = deliveries.next().await.unwrap().unwrap();
    assert_eq!(delivery.envelope().job_type, "SendReceipt");
    assert_ne!(delivery.envelope().job_type, EmailReceipt::NAME);
    assert_eq!(delivery.envelope().job_type, EmailReceiptNamed::NAME);
    let job: EmailReceiptNamed = delivery.envelope().payload_as().unwrap();
    assert_eq!(job.to, "a@example.com");
    delivery.ack().await.unwrap();
}

#[test]
fn retry_policies_equal_the_hand_built_ones() {
    assert_eq!(SendEmail::retry_policy(), None);
    // A job without its own policy does not inherit the queue's here: the
    // worker falls back to the queue's policy itself.
    assert_eq!(CallWebhook::retry_policy(), None);
    assert_eq!(
        Hook::retry_policy(),
        Some(
            RetryPolicy::new(
                7,
                Backoff::exponential(Duration::from_millis(100), 1.5, Duration::from_secs(10))
                    .unwrap()
                    .without_jitter()
            )
            .unwrap()
        )
    );
    assert_eq!(
        Digest::retry_policy(),
        Some(RetryPolicy::new(5, Backoff::fixed(Duration::from_secs(45)).unwrap()).unwrap())
    );
    assert_eq!(Once::retry_policy(), Some(RetryPolicy::never()));
}

#[tokio::test]
async fn enqueued_envelopes_carry_the_name_and_queue() {
    let backend = std::sync::Arc::new(MemoryBackend::new());
    let producer = Producer::<AppQueues, _>::new(backend.clone())
        .await
        .unwrap();
    producer
        .enqueue(&CallWebhook {
            url: "https://example.invalid/hook".into(),
        })
        .await
        .unwrap();
    producer.enqueue(&Hook::Created { id: 3 }).await.unwrap();
    producer.enqueue(&Hook::Deleted).await.unwrap();
    assert_eq!(backend.ready_count("app.webhooks"), 3);
    assert_eq!(backend.ready_count("app.emails"), 0);

    let mut deliveries = backend
        .consume(&AppQueues::Webhooks.config())
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let delivery = deliveries.next().await.unwrap().unwrap();
        let envelope = delivery.envelope();
        assert_eq!(envelope.queue, "app.webhooks");
        seen.push(envelope.job_type.clone());
        delivery.ack().await.unwrap();
    }
    seen.sort();
    assert_eq!(seen, ["Hook", "Hook", "call_webhook"]);
}

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(queue = AppQueues::Emails, unique(window = "10m"))]
struct DailyDigest {
    user: u32,
}

#[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
#[job(queue = AppQueues::Emails, unique(window = "90s", key = Self::user_key))]
struct Reminder {
    user: u32,
    text: String,
}

impl Reminder {
    fn user_key(&self) -> u32 {
        self.user
    }
}

#[test]
fn unique_jobs_declare_their_key_and_window() {
    use queuey_core::Unique;
    assert_eq!(
        DailyDigest { user: 1 }.unique(),
        Some(Unique::payload(Duration::from_secs(600)))
    );
    assert_eq!(
        Reminder {
            user: 7,
            text: "hi".into()
        }
        .unique(),
        Some(Unique::key("7", Duration::from_secs(90)))
    );
    assert_eq!(SendEmail { to: "a".into() }.unique(), None);
}
