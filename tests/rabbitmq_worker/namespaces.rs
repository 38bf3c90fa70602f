//! One typed queue set, two tenants on the real broker: each namespace's
//! producer and worker see only their own jobs, and dead letters go to the
//! tenant's own `.dead` queue.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey::Error;
use queuey::job::Envelope;
use queuey::prelude::*;
use queuey::queue::Namespace;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use queuey::worker::WorkerError;
use queuey::worker::WorkerHandle;
use serde::{Deserialize, Serialize};

use crate::scenario::wait_for;
use crate::support::{Broker, header, within};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "queuey-e2e")]
enum TenantQueues {
    #[queue(retry(max_attempts = 2, backoff = "fixed", delay = "200ms"))]
    Work,
}

#[derive(Job, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[job(queue = TenantQueues::Work, name = "tenant_job")]
struct TenantJob {
    tenant: String,
    n: u32,
}

/// A namespace unique to this run, its queue names tracked for cleanup.
fn tenant(broker: &Broker, label: &str) -> Namespace {
    let namespace =
        Namespace::new(format!("{label}-{}", uuid::Uuid::new_v4().simple())).expect("valid");
    let q = namespace.queue_name(&TenantQueues::Work);
    for name in [q.clone(), format!("{q}.dead"), format!("{q}.deferred.200")] {
        broker.track(&name);
    }
    namespace
}

/// What one tenant's worker saw: (tenant field, queue, n, attempt).
type Seen = Arc<Mutex<Vec<(String, String, u32, u32)>>>;

async fn start_worker(
    backend: &Arc<RabbitMqBackend>,
    namespace: &Namespace,
) -> (
    Seen,
    WorkerHandle,
    tokio::task::JoinHandle<Result<(), WorkerError>>,
) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let worker = Worker::<TenantQueues, _>::builder(backend.clone())
        .namespace(namespace.clone())
        .handler(handler_fn(move |job: TenantJob, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock().unwrap().push((
                    job.tenant,
                    ctx.queue().to_owned(),
                    job.n,
                    ctx.attempt(),
                ));
                if job.n >= 100 {
                    return Err(JobError::retryable("upstream 503"));
                }
                Ok(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    (seen, handle, tokio::spawn(worker.run()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_on_one_queue_set_are_isolated_down_to_their_dead_letters() {
    let broker = broker!("two_tenants_on_one_queue_set_are_isolated_down_to_their_dead_letters");
    let a = tenant(&broker, "tenant-a");
    let b = tenant(&broker, "tenant-b");
    let options = RabbitMqOptions::default()
        .connection_name(broker.connection_name("tenants"))
        .retry_granularity(Duration::from_millis(100));
    let backend = Arc::new(
        within(
            "connect",
            RabbitMqBackend::with_options(&broker.url, broker.isolate(options)),
        )
        .await
        .expect("connected"),
    );
    let (seen_a, handle_a, running_a) = start_worker(&backend, &a).await;
    let (seen_b, handle_b, running_b) = start_worker(&backend, &b).await;

    let mut doomed = Vec::new();
    for (namespace, jobs) in [(&a, [1, 101]), (&b, [2, 102])] {
        let producer = Producer::<TenantQueues, _>::builder(backend.clone())
            .namespace(namespace.clone())
            .build()
            .await
            .expect("the tenant's queues are declared");
        for n in jobs {
            let job = TenantJob {
                tenant: namespace.to_string(),
                n,
            };
            let id = producer.enqueue(&job).await.unwrap();
            if n >= 100 {
                doomed.push(id);
            }
        }
    }
    // Each tenant: one success, and one job that fails both its attempts.
    wait_for("tenant a's jobs", || handle_a.jobs_settled() == 3).await;
    wait_for("tenant b's jobs", || handle_b.jobs_settled() == 3).await;
    handle_a.shutdown();
    handle_b.shutdown();
    within("run a", running_a).await.unwrap().unwrap();
    within("run b", running_b).await.unwrap().unwrap();

    for (namespace, seen, dead_id) in [(&a, &seen_a, doomed[0]), (&b, &seen_b, doomed[1])] {
        let q = namespace.queue_name(&TenantQueues::Work);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(
            seen.iter()
                .all(|(tenant, queue, ..)| tenant == namespace.as_str() && *queue == q),
            "a worker saw another tenant's job: {seen:?}"
        );
        assert_eq!(
            seen.iter()
                .filter(|s| s.2 >= 100)
                .map(|s| s.3)
                .collect::<Vec<_>>(),
            [1, 2],
            "the retry came back through the tenant's hold queue"
        );
        let dead = format!("{q}.dead");
        let message = broker.get(&dead).await.expect("the tenant's dead letter");
        assert_eq!(
            header(&message, "x-original-queue").as_deref(),
            Some(q.as_str())
        );
        let envelope = Envelope::decode(&message.delivery.data).expect("an envelope");
        assert_eq!(
            (envelope.job_id, envelope.queue.as_str()),
            (dead_id, q.as_str())
        );
        assert!(broker.get(&dead).await.is_none(), "one dead letter only");
        assert_eq!(broker.ready_and_unacked(&q).await, Some((0, 0)));
    }
    backend.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_that_leaves_no_room_for_hold_queues_is_refused_by_name() {
    let broker = broker!("a_namespace_that_leaves_no_room_for_hold_queues_is_refused_by_name");
    // `{namespace}.queuey-e2e.work` fits in 255 bytes, its hold queues do not.
    let namespace = Namespace::new(format!(
        "{}-{}",
        "x".repeat(200),
        uuid::Uuid::new_v4().simple()
    ))
    .unwrap();
    let q = namespace.queue_name(&TenantQueues::Work);
    assert!(q.len() <= 255);
    broker.track(&q);
    broker.track(&format!("{q}.dead"));
    let backend = Arc::new(broker.backend(RabbitMqOptions::default()).await);
    let e = Producer::<TenantQueues, _>::builder(backend.clone())
        .namespace(namespace.clone())
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains(&format!("in namespace `{namespace}`")),
        "{message}"
    );
    assert!(
        message.contains("leaves no room for its hold queues"),
        "{message}"
    );
    assert!(!broker.exists(&q).await, "nothing was declared");
    backend.close().await.unwrap();
}
