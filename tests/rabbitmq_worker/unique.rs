//! Caller-chosen ids and unique jobs on the broker, unique keys in a
//! private Redis: the id of a job through a deferral, retries and its dead
//! letter; one job published of sixteen enqueued at once; the key given
//! back when the job is done, and a key nobody gives back freed by its
//! window.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::private_redis::PrivateRedis;
use queuey::job::{Envelope, Unique, Uuid};
use queuey::prelude::*;
use queuey::rabbitmq::RabbitMqOptions;
use queuey::retry::{Backoff, RetryPolicy};
use queuey::store::RedisStore;
use queuey::{EnqueueOptions, Error};

use crate::scenario::{backend, wait_for};
use crate::support::within;

scenario!(IdQueues, IdJob, "ids", |c| c.retry(
    RetryPolicy::new(2, Backoff::fixed(Duration::from_millis(500)).unwrap()).unwrap()
));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_chosen_id_stays_through_a_deferral_retries_and_the_dead_letter() {
    let broker = broker!("a_caller_chosen_id_stays_through_a_deferral_retries_and_the_dead_letter");
    let q = IdQueues::Work.name();
    let dead = format!("{q}.dead");
    for name in [q, &dead, &format!("{q}.suspect")] {
        broker.track(name);
    }
    let options = RabbitMqOptions::default().retry_granularity(Duration::from_millis(100));
    let backend = backend(&broker, "ids", options).await;
    let seen: Arc<Mutex<Vec<(Uuid, u32, u32)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let worker = Worker::<IdQueues, _>::builder(backend.clone())
        .handler(handler_fn(move |_: IdJob, ctx: JobContext| {
            let log = Arc::clone(&log);
            async move {
                log.lock()
                    .unwrap()
                    .push((ctx.job_id(), ctx.attempt(), ctx.deferrals()));
                if ctx.deferrals() == 0 {
                    return Err(JobError::deferred_msg(Duration::from_millis(300), "429"));
                }
                Err(JobError::retryable("upstream 503"))
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    let producer = Producer::<IdQueues, _>::new(backend.clone()).await.unwrap();
    let id = Uuid::new_v4();
    let given = producer
        .enqueue_with(&IdJob { n: 1 }, EnqueueOptions::default().job_id(id))
        .await
        .unwrap();
    assert_eq!(given, id);
    wait_for("a deferral and two attempts", || {
        handle.jobs_finished() == 1
    })
    .await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![(id, 1, 0), (id, 1, 1), (id, 2, 1)]);
    let message = broker.get(&dead).await.expect("a dead letter");
    let envelope = Envelope::decode(&message.delivery.data).unwrap();
    assert_eq!((envelope.job_id, envelope.attempt), (id, 2));
    backend.close().await.unwrap();
}

scenario!(OnceQueues, OnceJob, "unique", |c| c.prefetch(4));

/// A running worker whose handler does nothing, giving keys back to
/// `store` if one is given.
async fn noop_worker<Q: queuey::Queues, J: queuey::Job<Queues = Q, Output = ()>>(
    backend: &Arc<queuey::rabbitmq::RabbitMqBackend>,
    store: Option<RedisStore>,
) -> (
    queuey::worker::WorkerHandle,
    tokio::task::JoinHandle<Result<(), queuey::worker::WorkerError>>,
) {
    let builder = Worker::<Q, _>::builder(backend.clone());
    let builder = match store {
        Some(store) => builder.store(store),
        None => builder,
    };
    let worker = builder
        .handler(handler_fn(|_: J, _: JobContext| async {
            Ok::<(), JobError>(())
        }))
        .build()
        .await
        .unwrap();
    (worker.handle(), tokio::spawn(worker.run()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_sixteen_enqueues_at_once_is_published_and_its_key_comes_back_when_done() {
    let broker =
        broker!("one_of_sixteen_enqueues_at_once_is_published_and_its_key_comes_back_when_done");
    let q = OnceQueues::Work.name();
    for name in [q, &format!("{q}.dead"), &format!("{q}.suspect")] {
        broker.track(name);
    }
    let redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let backend = backend(&broker, "unique", RabbitMqOptions::default()).await;
    let producer = Arc::new(
        Producer::<OnceQueues, _>::builder(backend.clone())
            .store(store.clone())
            .build()
            .await
            .unwrap(),
    );
    let once = EnqueueOptions::default().unique(Unique::key("report-7", Duration::from_secs(600)));
    let tries = (0..16).map(|n| {
        let producer = Arc::clone(&producer);
        let once = once.clone();
        tokio::spawn(async move { producer.enqueue_with(&OnceJob { n }, once).await })
    });
    let outcomes: Vec<_> = futures::future::join_all(tries)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let published: Vec<Uuid> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().copied())
        .collect();
    assert_eq!(published.len(), 1, "{outcomes:?}");
    for outcome in &outcomes {
        match outcome {
            Ok(_) => {}
            Err(Error::Duplicate { existing_id }) => assert_eq!(*existing_id, published[0]),
            Err(other) => panic!("{other}"),
        }
    }
    broker.wait_ready(q, 1).await;
    assert_eq!(broker.ready(q).await, 1);

    // The worker runs it and gives the key back.
    let (handle, running) = noop_worker::<OnceQueues, OnceJob>(&backend, Some(store)).await;
    wait_for("the job", || handle.jobs_finished() == 1).await;
    let next = producer
        .enqueue_with(&OnceJob { n: 99 }, once)
        .await
        .unwrap();
    assert_ne!(next, published[0]);
    wait_for("the next job", || handle.jobs_finished() == 2).await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();
    backend.close().await.unwrap();
}

scenario!(WindowQueues, WindowJob, "window", |c| c);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_nobody_gives_back_is_free_once_its_window_passes_and_not_before() {
    let broker = broker!("a_key_nobody_gives_back_is_free_once_its_window_passes_and_not_before");
    let q = WindowQueues::Work.name();
    for name in [q, &format!("{q}.dead"), &format!("{q}.suspect")] {
        broker.track(name);
    }
    let redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let backend = backend(&broker, "window", RabbitMqOptions::default()).await;
    let producer = Producer::<WindowQueues, _>::builder(backend.clone())
        .store(store)
        .build()
        .await
        .unwrap();
    let window = Duration::from_secs(3);
    let once = EnqueueOptions::default().unique(Unique::key("window", window));
    let claimed = Instant::now();
    let first = producer
        .enqueue_with(&WindowJob { n: 1 }, once.clone())
        .await
        .unwrap();
    // A worker without the store runs the job: the key is never given
    // back, as when a worker dies between acknowledging and releasing.
    let (handle, running) = noop_worker::<WindowQueues, WindowJob>(&backend, None).await;
    wait_for("the job", || handle.jobs_finished() == 1).await;
    let freed = within("the window to pass", async {
        loop {
            match producer
                .enqueue_with(&WindowJob { n: 2 }, once.clone())
                .await
            {
                Ok(_) => return claimed.elapsed(),
                Err(Error::Duplicate { existing_id }) => assert_eq!(existing_id, first),
                Err(other) => panic!("{other}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(freed >= window, "the key was free after {freed:?}");
    assert!(freed < window + Duration::from_secs(10), "{freed:?}");
    wait_for("the second job", || handle.jobs_finished() == 2).await;
    handle.shutdown();
    within("run", running).await.unwrap().unwrap();
    backend.close().await.unwrap();
}
