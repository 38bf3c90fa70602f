//! Job results over direct reply-to: a worker on RabbitMQ answers the
//! caller that waits for a job with its final outcome.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use queuey::EnqueueOptions;
use queuey::prelude::*;
use queuey::producer::WaitError;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use queuey::retry::{Backoff, RetryPolicy};
use queuey::worker::{WorkerError, WorkerHandle};
use serde::{Deserialize, Serialize};

use crate::scenario::{backend, wait_for};
use crate::support::{Broker, within};

/// What a priced order answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Quote {
    cents: u64,
    attempt: u32,
    correlation_id: Option<String>,
}

/// What a `price` job asks of its handler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Order {
    items: u32,
    /// Fail this many attempts first, transiently.
    failures: u32,
    /// Fail fatally instead.
    fatal: bool,
    /// Take this long.
    nap_ms: u64,
}

/// A queue set with one queue (fixed 1 s retries, three attempts) whose
/// name is unique to the run, and a `price` job on it answering a `Quote`.
macro_rules! priced {
    ($queues:ident, $job:ident, $label:literal) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum $queues {
            Work,
        }

        impl queuey::Queues for $queues {
            const ALL: &'static [Self] = &[$queues::Work];

            fn name(&self) -> &'static str {
                static NAME: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
                NAME.get_or_init(|| crate::scenario::unique_name($label))
            }

            fn config(&self) -> queuey::queue::QueueConfig {
                queuey::queue::QueueConfig::new(self.name())
                    .prefetch(64)
                    .retry(
                        RetryPolicy::new(3, Backoff::fixed(Duration::from_secs(1)).unwrap())
                            .unwrap(),
                    )
            }
        }

        #[derive(Debug, Clone, Serialize, Deserialize)]
        struct $job(Order);

        impl queuey::Job for $job {
            type Queues = $queues;
            type Output = Quote;
            const QUEUE: $queues = $queues::Work;
            const NAME: &'static str = "price";
        }

        impl From<Order> for $job {
            fn from(order: Order) -> Self {
                $job(order)
            }
        }

        impl AsRef<Order> for $job {
            fn as_ref(&self) -> &Order {
                &self.0
            }
        }
    };
}

/// Generous bound on a caller's wait; a test that should answer fast
/// asserts its own, tighter bound.
const LONG: Duration = Duration::from_secs(60);

/// Tracks a queue set's queues (its one hold queue included) for cleanup.
fn track(broker: &Broker, queue: &str) {
    broker.track(queue);
    broker.track(&format!("{queue}.dead"));
    broker.hold(queue, 1000);
}

/// A worker pricing orders on `backend`, counting its calls.
async fn start_worker<Q, J>(
    backend: Arc<RabbitMqBackend>,
    calls: Arc<AtomicU32>,
) -> (
    WorkerHandle,
    tokio::task::JoinHandle<Result<(), WorkerError>>,
)
where
    Q: Queues,
    J: Job<Queues = Q, Output = Quote> + AsRef<Order>,
{
    let worker = Worker::<Q, _>::builder(backend)
        .concurrency(64)
        .handler(handler_fn(move |job: J, ctx: JobContext| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let order = job.as_ref();
                tokio::time::sleep(Duration::from_millis(order.nap_ms)).await;
                if order.fatal {
                    return Err(JobError::fatal("the order is void"));
                }
                if ctx.attempt() <= order.failures {
                    return Err(JobError::retryable("prices are down"));
                }
                Ok(Quote {
                    cents: u64::from(order.items) * 250,
                    attempt: ctx.attempt(),
                    correlation_id: ctx.correlation_id().map(str::to_owned),
                })
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    (handle, tokio::spawn(worker.run()))
}

async fn stop(handle: WorkerHandle, running: tokio::task::JoinHandle<Result<(), WorkerError>>) {
    handle.shutdown();
    within("the worker stops", running).await.unwrap().unwrap();
}

priced!(ValueQueues, ValueJob, "results-value");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_gets_the_value_and_fire_and_forget_still_works() {
    let broker = broker!("the_caller_gets_the_value_and_fire_and_forget_still_works");
    let q = ValueQueues::Work.name();
    track(&broker, q);
    let backend = backend(&broker, "results-value", RabbitMqOptions::default()).await;
    let calls = Arc::new(AtomicU32::new(0));
    let (handle, running) =
        start_worker::<ValueQueues, ValueJob>(backend.clone(), Arc::clone(&calls)).await;
    let producer = Producer::<ValueQueues, _>::new(backend.clone())
        .await
        .unwrap();

    let order = Order {
        items: 4,
        ..Order::default()
    };
    let quote = producer
        .enqueue_and_wait(&ValueJob::from(order.clone()), LONG)
        .await
        .unwrap();
    assert_eq!(
        quote,
        Quote {
            cents: 1000,
            attempt: 1,
            correlation_id: None
        }
    );
    // The same job type, nobody waiting: it runs, and nothing answers.
    for _ in 0..5 {
        producer
            .enqueue(&ValueJob::from(order.clone()))
            .await
            .unwrap();
    }
    wait_for("six jobs", || handle.jobs_finished() >= 6).await;
    stop(handle, running).await;
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
    assert_eq!(
        broker.ready_and_unacked(&format!("{q}.dead")).await,
        Some((0, 0))
    );
}

priced!(RetryQueues, RetryJob, "results-retry");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_retried_twice_answers_once_with_its_success_and_keeps_its_correlation_id() {
    let broker =
        broker!("a_job_retried_twice_answers_once_with_its_success_and_keeps_its_correlation_id");
    let q = RetryQueues::Work.name();
    track(&broker, q);
    let backend = backend(&broker, "results-retry", RabbitMqOptions::default()).await;
    let calls = Arc::new(AtomicU32::new(0));
    let (handle, running) =
        start_worker::<RetryQueues, RetryJob>(backend.clone(), Arc::clone(&calls)).await;
    let producer = Producer::<RetryQueues, _>::new(backend.clone())
        .await
        .unwrap();

    let job = RetryJob::from(Order {
        items: 1,
        failures: 2,
        ..Order::default()
    });
    let started = Instant::now();
    let options = EnqueueOptions::default().correlation_id("order-42");
    let quote = producer
        .enqueue_and_wait_with(&job, options, LONG)
        .await
        .unwrap();
    let waited = started.elapsed();
    // Both retries waited in the hold queue, with the reply address.
    assert_eq!(quote.attempt, 3);
    assert_eq!(quote.correlation_id.as_deref(), Some("order-42"));
    assert!(
        waited >= Duration::from_secs(2),
        "answered early: {waited:?}"
    );
    stop(handle, running).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

priced!(DeadQueues, DeadJob, "results-dead");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_job_or_one_past_its_deadline_tells_the_caller() {
    let broker = broker!("a_dead_lettered_job_or_one_past_its_deadline_tells_the_caller");
    let q = DeadQueues::Work.name();
    track(&broker, q);
    let backend = backend(&broker, "results-dead", RabbitMqOptions::default()).await;
    let calls = Arc::new(AtomicU32::new(0));
    let (handle, running) =
        start_worker::<DeadQueues, DeadJob>(backend.clone(), Arc::clone(&calls)).await;
    let producer = Producer::<DeadQueues, _>::new(backend.clone())
        .await
        .unwrap();

    let fatal = DeadJob::from(Order {
        fatal: true,
        ..Order::default()
    });
    let error = producer.enqueue_and_wait(&fatal, LONG).await.unwrap_err();
    assert!(
        matches!(&error, WaitError::DeadLettered { reason, .. } if reason.contains("the order is void")),
        "{error:?}"
    );
    // Its retry would be due after its deadline: dead-lettered instead.
    let late = DeadJob::from(Order {
        failures: 1,
        ..Order::default()
    });
    let options = EnqueueOptions::default().deadline_in(Duration::from_millis(500));
    let error = producer
        .enqueue_and_wait_with(&late, options, LONG)
        .await
        .unwrap_err();
    assert!(
        matches!(error, WaitError::DeadlinePassed { .. }),
        "{error:?}"
    );
    stop(handle, running).await;
    broker.delete_raw(&format!("{q}.dead")).await;
}

priced!(SlowQueues, SlowJob, "results-slow");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_timeout_ends_the_wait_and_the_job_goes_on() {
    let broker = broker!("the_callers_timeout_ends_the_wait_and_the_job_goes_on");
    let q = SlowQueues::Work.name();
    track(&broker, q);
    let backend = backend(&broker, "results-slow", RabbitMqOptions::default()).await;
    let calls = Arc::new(AtomicU32::new(0));
    let (handle, running) =
        start_worker::<SlowQueues, SlowJob>(backend.clone(), Arc::clone(&calls)).await;
    let producer = Producer::<SlowQueues, _>::new(backend.clone())
        .await
        .unwrap();

    let slow = SlowJob::from(Order {
        nap_ms: 4_000,
        ..Order::default()
    });
    let timeout = Duration::from_millis(1_500);
    let started = Instant::now();
    let error = producer.enqueue_and_wait(&slow, timeout).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(error, WaitError::TimedOut { .. }), "{error:?}");
    assert!(waited >= timeout, "gave up early: {waited:?}");
    assert!(
        waited < timeout + Duration::from_secs(5),
        "gave up late: {waited:?}"
    );
    // The job finishes all the same, and its reply is dropped.
    wait_for("the slow job", || handle.jobs_finished() >= 1).await;
    stop(handle, running).await;
    assert_eq!(broker.ready_and_unacked(q).await, Some((0, 0)));
}

priced!(ManyQueues, ManyJob, "results-many");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_callers_at_once_each_get_their_own_answer() {
    let broker = broker!("a_thousand_callers_at_once_each_get_their_own_answer");
    let q = ManyQueues::Work.name();
    track(&broker, q);
    let backend = backend(&broker, "results-many", RabbitMqOptions::default()).await;
    let calls = Arc::new(AtomicU32::new(0));
    let (handle, running) =
        start_worker::<ManyQueues, ManyJob>(backend.clone(), Arc::clone(&calls)).await;
    let producer = Arc::new(
        Producer::<ManyQueues, _>::new(backend.clone())
            .await
            .unwrap(),
    );

    let waits = (0..1000u32).map(|items| {
        let producer = Arc::clone(&producer);
        tokio::spawn(async move {
            let job = ManyJob::from(Order {
                items,
                ..Order::default()
            });
            (
                items,
                producer
                    .enqueue_and_wait(&job, Duration::from_secs(120))
                    .await,
            )
        })
    });
    let answers = futures::future::join_all(waits).await;
    let mut wrong = Vec::new();
    for answer in answers {
        let (items, quote) = answer.unwrap();
        match quote {
            Ok(quote) if quote.cents == u64::from(items) * 250 => {}
            other => wrong.push((items, other)),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong answers: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    stop(handle, running).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1000);
}

priced!(LostQueues, LostJob, "results-lost");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_ends_the_wait_at_once_and_the_next_wait_works() {
    let broker = broker!("a_dropped_connection_ends_the_wait_at_once_and_the_next_wait_works");
    let q = LostQueues::Work.name();
    track(&broker, q);
    let requester = backend(&broker, "results-requester", RabbitMqOptions::default()).await;
    let producer = Producer::<LostQueues, _>::new(requester.clone())
        .await
        .unwrap();

    // No worker yet: the job waits on its queue.
    let waiting = tokio::spawn({
        let producer = producer.clone();
        async move {
            let job = LostJob::from(Order::default());
            producer.enqueue_and_wait(&job, LONG).await
        }
    });
    broker.wait_ready(q, 1).await;
    let closed = Instant::now();
    broker
        .close_connection(&broker.connection_name("results-requester"))
        .await;
    let error = within("the wait ends", waiting).await.unwrap().unwrap_err();
    let took = closed.elapsed();
    assert!(matches!(error, WaitError::ReplyLost { .. }), "{error:?}");
    assert!(error.to_string().contains("may still run"), "{error}");
    assert!(took < Duration::from_secs(10), "told late: {took:?}");

    // A worker runs the orphaned job (its reply is dropped) and answers a
    // new wait, made on a new request channel after the reconnection.
    let worker_backend = backend(&broker, "results-worker", RabbitMqOptions::default()).await;
    let calls = Arc::new(AtomicU32::new(0));
    let (handle, running) =
        start_worker::<LostQueues, LostJob>(worker_backend.clone(), Arc::clone(&calls)).await;
    let job = LostJob::from(Order {
        items: 2,
        ..Order::default()
    });
    let quote = producer.enqueue_and_wait(&job, LONG).await.unwrap();
    assert_eq!(quote.cents, 500);
    wait_for("both jobs", || handle.jobs_finished() >= 2).await;
    stop(handle, running).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

priced!(MissingQueues, MissingJob, "results-missing");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_a_queue_that_does_not_exist_fails_as_unroutable() {
    let broker = broker!("a_wait_on_a_queue_that_does_not_exist_fails_as_unroutable");
    let backend = backend(&broker, "results-missing", RabbitMqOptions::default()).await;
    // Nothing declares the queue.
    let producer = Producer::<MissingQueues, _>::new_undeclared(backend.clone());
    let job = MissingJob::from(Order::default());
    let error = producer.enqueue_and_wait(&job, LONG).await.unwrap_err();
    assert!(
        matches!(&error, WaitError::Enqueue(queuey::Error::Backend(e)) if e.kind() == queuey::backend::BackendErrorKind::Unroutable),
        "{error:?}"
    );
    assert!(error.to_string().contains("does not exist"), "{error}");
    // The request channel still works for the next wait.
    let error = producer.enqueue_and_wait(&job, LONG).await.unwrap_err();
    assert!(matches!(error, WaitError::Enqueue(_)), "{error:?}");
    assert!(!broker.exists(MissingQueues::Work.name()).await);
}
