//! One typed queue set, several tenants: each producer and worker pair of
//! a namespace sees only its own jobs, holds and dead letters.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use queuey_core::memory::MemoryBackend;
use queuey_core::{Error, JobContext, JobError, Namespace, Producer, Queues, handler_fn};
use queuey_tower::Worker;
use tokio::time::Instant;

use crate::support::{Running, Task, TestQueues, spawn, wait_until};

/// What one tenant's handler saw: (n, queue, attempt, deferrals, when).
type Log = Arc<Mutex<Vec<(u32, String, u32, u32, Instant)>>>;

/// A worker of `namespace` whose handler succeeds for `n < 50`, defers
/// `50..100` once by 2 s, and fails `n >= 100` on every attempt.
async fn tenant_worker(backend: &Arc<MemoryBackend>, namespace: &Namespace) -> (Log, Running) {
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let worker = Worker::<TestQueues, _>::builder(backend.clone())
        .namespace(namespace.clone())
        .handler(handler_fn(move |job: Task, ctx: JobContext| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push((
                    job.n,
                    ctx.queue().to_owned(),
                    ctx.attempt(),
                    ctx.deferrals(),
                    Instant::now(),
                ));
                match job.n {
                    0..50 => Ok(()),
                    50..100 if ctx.deferrals() == 0 => {
                        Err(JobError::deferred(Duration::from_secs(2)))
                    }
                    50..100 => Ok(()),
                    _ => Err(JobError::retryable("upstream 503")),
                }
            }
        }))
        .build()
        .await
        .expect("the tenant's worker is built");
    assert_eq!(worker.namespace(), namespace);
    (log, spawn(worker))
}

#[tokio::test(start_paused = true)]
async fn two_tenants_share_a_queue_set_and_never_see_each_others_jobs() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The runtime of this test is single-threaded: every task records here.
    let _recorder = metrics::set_default_local_recorder(&recorder);

    let backend = Arc::new(MemoryBackend::new());
    let a = Namespace::new("tenant-a").unwrap();
    let b = Namespace::new("tenant-b").unwrap();
    let (log_a, worker_a) = tenant_worker(&backend, &a).await;
    let (log_b, worker_b) = tenant_worker(&backend, &b).await;
    let producer_a = Producer::<TestQueues, _>::builder(backend.clone())
        .namespace(a.clone())
        .build()
        .await
        .unwrap();
    let producer_b = Producer::<TestQueues, _>::builder(backend.clone())
        .namespace(b.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(producer_a.queue_name(&TestQueues::Work), "tenant-a.t.work");
    // A producer of the root namespace: its job is nobody's here.
    let root = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();

    for n in [1, 51, 101] {
        producer_a.enqueue(&Task { n }).await.unwrap();
    }
    let dead_b = producer_b.enqueue(&Task { n: 102 }).await.unwrap();
    producer_b.enqueue(&Task { n: 2 }).await.unwrap();
    root.enqueue(&Task { n: 3 }).await.unwrap();

    // 1 once, 51 twice (deferred once), 101 three times (attempts exhausted).
    wait_until(|| worker_a.handle.jobs_settled() == 6).await;
    wait_until(|| worker_b.handle.jobs_settled() == 4).await;

    let log_a = log_a.lock().unwrap().clone();
    let log_b = log_b.lock().unwrap().clone();
    let mut seen_a: Vec<u32> = log_a.iter().map(|e| e.0).collect();
    seen_a.sort_unstable();
    assert_eq!(seen_a, [1, 51, 51, 101, 101, 101]);
    let mut seen_b: Vec<u32> = log_b.iter().map(|e| e.0).collect();
    seen_b.sort_unstable();
    assert_eq!(seen_b, [2, 102, 102, 102]);
    assert!(log_a.iter().all(|e| e.1 == "tenant-a.t.work"), "{log_a:?}");
    assert!(log_b.iter().all(|e| e.1 == "tenant-b.t.work"), "{log_b:?}");

    // Retries and deferrals came back to the tenant's own queue, never early.
    let calls = |n: u32| -> Vec<(u32, u32, Instant)> {
        log_a
            .iter()
            .filter(|e| e.0 == n)
            .map(|e| (e.2, e.3, e.4))
            .collect()
    };
    let deferred = calls(51);
    assert_eq!((deferred[1].0, deferred[1].1), (1, 1));
    assert!(deferred[1].2 - deferred[0].2 >= Duration::from_secs(2));
    let retried = calls(101);
    assert_eq!(retried.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(retried[1].2 - retried[0].2 >= Duration::from_secs(1));

    // Dead letters land in each tenant's own dead-letter store.
    let dead = backend.dead_letters("tenant-a.t.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].original_queue, "tenant-a.t.work");
    assert_eq!(dead[0].attempts, 3);
    let dead = backend.dead_letters("tenant-b.t.work");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].envelope().unwrap().job_id, dead_b);
    assert!(backend.dead_letters("t.work").is_empty());
    // The root namespace's job waits for a root worker.
    assert_eq!(backend.ready_count("t.work"), 1);

    worker_a.stop().await;
    worker_b.stop().await;

    // Metrics carry the real (namespaced) queue names.
    let mut finished = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() != "queuey_jobs_total" {
            continue;
        }
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
                .unwrap()
        };
        if let DebugValue::Counter(n) = value {
            finished.push((label("queue"), label("disposition"), n));
        }
    }
    finished.sort();
    assert_eq!(
        finished,
        [
            ("tenant-a.t.work".to_owned(), "ack".to_owned(), 2),
            ("tenant-a.t.work".to_owned(), "dead_letter".to_owned(), 1),
            ("tenant-a.t.work".to_owned(), "defer".to_owned(), 1),
            ("tenant-a.t.work".to_owned(), "retry".to_owned(), 2),
            ("tenant-b.t.work".to_owned(), "ack".to_owned(), 1),
            ("tenant-b.t.work".to_owned(), "dead_letter".to_owned(), 1),
            ("tenant-b.t.work".to_owned(), "retry".to_owned(), 2),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_namespace_too_long_for_the_set_is_refused_before_anything_is_declared() {
    let backend = Arc::new(MemoryBackend::new());
    // Long enough for `Namespace::new`, too long for `{namespace}.t.single`.
    let namespace = Namespace::new("x".repeat(250)).unwrap();
    let e = Producer::<TestQueues, _>::builder(backend.clone())
        .namespace(namespace.clone())
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains(&format!("in namespace `{namespace}` (which adds 251 bytes")),
        "{message}"
    );
    assert!(message.contains("255-byte AMQP limit"), "{message}");
    let e = Worker::<TestQueues, _>::builder(backend.clone())
        .namespace(namespace.clone())
        .handler(handler_fn(|_: Task, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("in namespace"), "{e}");
    for queue in TestQueues::ALL {
        assert!(!backend.is_declared(&namespace.queue_name(queue)));
    }
}
