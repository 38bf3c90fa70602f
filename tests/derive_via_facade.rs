//! The derives work for a crate that depends only on the `queuey` facade:
//! through the prelude and through the root re-exports.

mod through_prelude {
    use queuey::prelude::*;
    use queuey::queue::QueueConfig;
    use queuey::retry::{Backoff, RetryPolicy};
    use serde::{Deserialize, Serialize};

    #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    #[queues(prefix = "facade")]
    pub(crate) enum AppQueues {
        #[queue(prefetch = 4, retry(max_attempts = 2, backoff = "none"))]
        Emails,
        WebhookCalls,
    }

    #[derive(Job, Serialize, Deserialize, Debug, PartialEq)]
    #[job(queue = AppQueues::Emails, name = "send_email", retry(backoff = "fixed", delay = "3s"))]
    pub(crate) struct SendEmail {
        pub(crate) to: String,
    }

    #[test]
    fn queues_and_jobs() {
        assert_eq!(
            AppQueues::ALL,
            &[AppQueues::Emails, AppQueues::WebhookCalls]
        );
        assert_eq!(AppQueues::WebhookCalls.name(), "facade.webhook_calls");
        assert_eq!(
            AppQueues::Emails.config(),
            QueueConfig::new("facade.emails")
                .prefetch(4)
                .retry(RetryPolicy::new(2, Backoff::none()).unwrap())
        );
        assert_eq!(SendEmail::QUEUE, AppQueues::Emails);
        assert_eq!(SendEmail::NAME, "send_email");
        assert_eq!(
            SendEmail::retry_policy(),
            Some(
                RetryPolicy::new(
                    5,
                    Backoff::fixed(std::time::Duration::from_secs(3)).unwrap()
                )
                .unwrap()
            )
        );
    }

    #[tokio::test]
    async fn a_producer_enqueues_derived_jobs() {
        let backend = std::sync::Arc::new(MemoryBackend::new());
        let producer = Producer::<AppQueues, _>::new(backend.clone())
            .await
            .unwrap();
        producer
            .enqueue(&SendEmail {
                to: "a@example.com".into(),
            })
            .await
            .unwrap();
        assert_eq!(backend.ready_count("facade.emails"), 1);
    }
}

mod through_root_reexports {
    use serde::{Deserialize, Serialize};

    #[derive(queuey::Queues, Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Reports {
        Daily,
    }

    #[derive(queuey::Job, Serialize, Deserialize)]
    #[job(queue = crate::through_root_reexports::Reports::Daily)]
    pub(crate) struct BuildReport;

    #[test]
    fn root_paths() {
        use queuey::{Job, Queues};
        assert_eq!(BuildReport::QUEUE.name(), "daily");
        assert_eq!(BuildReport::NAME, "BuildReport");
        assert_eq!(BuildReport::retry_policy(), None);
        assert_eq!(
            Reports::Daily.config(),
            queuey::queue::QueueConfig::new("daily")
        );
    }
}
