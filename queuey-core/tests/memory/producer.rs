//! The producer: declaring, options, batches, refusals.

use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Backend;

use queuey_core::{BackendErrorKind, EnqueueOptions, Error, Producer, QueueConfig, Queues};

use queuey_core::memory::MemoryBackend;

use crate::support::{Task, TestQueues, n_of, next};

const WORK: &str = "test.work";

#[tokio::test(start_paused = true)]
async fn new_declares_the_whole_set() {
    let backend = Arc::new(MemoryBackend::new());
    let _producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    for queue in TestQueues::ALL {
        assert!(backend.is_declared(queue.name()), "{}", queue.name());
    }
}

#[tokio::test(start_paused = true)]
async fn new_undeclared_declares_nothing_and_enqueue_needs_an_existing_queue() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new_undeclared(backend.clone());
    assert!(!backend.is_declared(WORK));
    let err = producer.enqueue(&Task { n: 1 }).await.unwrap_err();
    assert!(
        matches!(&err, Error::Backend(e) if e.kind() == BackendErrorKind::Unroutable),
        "{err:?}"
    );
    assert!(err.to_string().contains("`test.work`"), "{err}");
    let err = producer
        .enqueue_after(&Task { n: 1 }, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownQueue { .. }), "{err:?}");
    let err = producer
        .defer(&Task { n: 1 }, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownQueue { .. }), "{err:?}");

    // Another producer declares the set: this one can now enqueue.
    Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    producer.enqueue(&Task { n: 1 }).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn enqueue_with_sets_priority_correlation_and_delay() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let id = producer
        .enqueue_with(
            &Task { n: 1 },
            EnqueueOptions {
                priority: 3,
                correlation_id: Some("req-1".into()),
                delay: Some(Duration::from_secs(2)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(backend.held_count(WORK), 1);
    let start = tokio::time::Instant::now();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    let env = d.envelope();
    assert_eq!(env.job_id, id);
    assert_eq!(env.priority, 3);
    assert_eq!(env.correlation_id.as_deref(), Some("req-1"));
    assert_eq!((env.attempt, env.deferrals), (1, 0));
    assert_eq!(env.job_type, "task");
    assert_eq!(env.queue, WORK);
}

#[tokio::test(start_paused = true)]
async fn enqueue_batch_reports_each_job_in_order() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let jobs: Vec<Task> = (0..100).map(|n| Task { n }).collect();
    let outcomes = producer.enqueue_batch(&jobs).await;
    assert_eq!(outcomes.len(), 100);
    let ids: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    for (n, id) in ids.iter().enumerate() {
        let d = next(&mut stream).await;
        assert_eq!(n_of(&*d), n as u32);
        assert_eq!(d.envelope().job_id, *id);
        d.ack().await.unwrap();
    }
    assert!(producer.enqueue_batch(&Vec::<Task>::new()).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn enqueue_batch_keeps_going_past_a_failure() {
    let backend = Arc::new(MemoryBackend::new());
    backend.create_queue(WORK);
    let producer = Producer::<TestQueues, _>::new_undeclared(backend.clone());
    let outcomes = producer
        .enqueue_batch(&[Task { n: 1 }, Task { n: 2 }])
        .await;
    assert!(outcomes.iter().all(Result::is_ok));

    // A job that cannot be encoded fails alone.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Picky {
        map: std::collections::HashMap<Vec<u8>, u8>,
    }
    impl queuey_core::Job for Picky {
        type Queues = TestQueues;
        type Output = ();
        const QUEUE: TestQueues = TestQueues::Work;
        const NAME: &'static str = "picky";
    }
    let bad = Picky {
        map: [(vec![1u8], 1u8)].into_iter().collect(),
    };
    let good = Picky {
        map: Default::default(),
    };
    let outcomes = producer.enqueue_batch([&good, &bad, &good]).await;
    assert!(outcomes[0].is_ok());
    assert!(matches!(&outcomes[1], Err(Error::Encode { queue, .. }) if queue == WORK));
    assert!(outcomes[2].is_ok());
    assert_eq!(backend.ready_count(WORK), 4);
}

#[tokio::test(start_paused = true)]
async fn declare_validates_before_creating_anything() {
    let backend = MemoryBackend::new();
    let configs = [
        QueueConfig::new("fine"),
        QueueConfig::new("bad").prefetch(0),
    ];
    let err = backend.declare(&configs).await.unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(!backend.is_declared("fine"));
}

#[tokio::test(start_paused = true)]
async fn declare_is_idempotent_but_arguments_cannot_change() {
    let backend = MemoryBackend::new();
    let config = QueueConfig::new("q");
    backend
        .declare(std::slice::from_ref(&config))
        .await
        .unwrap();
    backend
        .declare(std::slice::from_ref(&config))
        .await
        .unwrap();
    // Prefetch is a consumer setting, not a queue argument.
    backend
        .declare(&[config.clone().prefetch(3)])
        .await
        .unwrap();
    let err = backend
        .declare(&[config.max_priority(0)])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Backend(e) if e.kind() == BackendErrorKind::Refused),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_oversize_job_is_refused_before_publishing() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Big(String);
    impl queuey_core::Job for Big {
        type Queues = TestQueues;
        type Output = ();
        const QUEUE: TestQueues = TestQueues::Work;
        const NAME: &'static str = "big";
    }
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let err = producer
        .enqueue(&Big("x".repeat(queuey_core::MAX_MESSAGE_BYTES)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MessageTooLarge { .. }), "{err:?}");
    assert_eq!(backend.ready_count(WORK), 0);
    producer.enqueue(&Big("x".repeat(1024))).await.unwrap();
}

#[tokio::test]
async fn a_deadline_travels_in_the_envelope_and_a_passed_one_is_refused() {
    use std::time::{SystemTime, UNIX_EPOCH};
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let before = SystemTime::now();
    producer
        .enqueue_with(
            &Task { n: 1 },
            EnqueueOptions::default().deadline_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    let deadline = d.envelope().deadline_ms.expect("a deadline");
    let expected = (before + Duration::from_secs(60))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        deadline >= expected && deadline < expected + 5_000,
        "{deadline}"
    );
    let ctx = queuey_core::JobContext::from_envelope(d.envelope(), "t.work".into(), 1, false);
    let left = ctx.remaining().unwrap();
    assert!(
        left <= Duration::from_secs(60) && left > Duration::from_secs(50),
        "{left:?}"
    );

    // A deadline that passes before the job could run is bad input: refused,
    // nothing published.
    for options in [
        EnqueueOptions::default().deadline(SystemTime::now() - Duration::from_secs(1)),
        EnqueueOptions::default()
            .delay(Duration::from_secs(60))
            .deadline_in(Duration::from_secs(10)),
    ] {
        let e = producer
            .enqueue_with(&Task { n: 2 }, options)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("deadline"), "{e}");
    }
    assert_eq!(backend.ready_count(WORK) + backend.held_count(WORK), 0);
}

#[tokio::test]
async fn a_job_type_deadline_counts_from_when_the_job_is_due_and_an_enqueue_deadline_wins() {
    use std::time::{SystemTime, UNIX_EPOCH};

    #[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
    #[job(queue = TestQueues::Work, name = "budgeted", deadline = "1m")]
    struct Budgeted;

    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let before = SystemTime::now();
    producer.enqueue(&Budgeted).await.unwrap();
    producer
        .enqueue_batch([&Budgeted])
        .await
        .pop()
        .unwrap()
        .unwrap();
    producer
        .enqueue_with(
            &Budgeted,
            EnqueueOptions::default().deadline_in(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    // Each delivery is kept: one dropped unsettled comes back.
    let deliveries = [
        next(&mut stream).await,
        next(&mut stream).await,
        next(&mut stream).await,
    ];
    let mut deadlines = deliveries
        .iter()
        .map(|d| (d.envelope().deadline_ms.unwrap() - ms(before)) / 1_000)
        .collect::<Vec<_>>();
    deadlines.sort_unstable();
    // Seconds after the first enqueue: the enqueue's own 5 s, then the
    // type's minute twice.
    assert_eq!(deadlines, [5, 60, 60]);

    // A delayed job's budget starts when its delay ends, so a delay longer
    // than the budget is not refused.
    producer
        .enqueue_after(&Budgeted, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(backend.held_count(WORK), 1);
}

#[tokio::test(start_paused = true)]
async fn enqueue_at_holds_a_job_until_its_time_and_a_past_time_enqueues_it_at_once() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(2);
    let id = producer.enqueue_at(&Task { n: 1 }, later).await.unwrap();
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (0, 1)
    );

    let past = std::time::SystemTime::now() - Duration::from_secs(3600);
    let now_id = producer.enqueue_at(&Task { n: 2 }, past).await.unwrap();
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (1, 1)
    );

    let start = tokio::time::Instant::now();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let first = next(&mut stream).await;
    assert_eq!(first.envelope().job_id, now_id);
    assert_eq!(start.elapsed(), Duration::ZERO);
    first.ack().await.unwrap();
    let second = next(&mut stream).await;
    assert_eq!(second.envelope().job_id, id);
    // The wait was taken from the wall clock when enqueued: just under 2 s,
    // rounded up to whole milliseconds.
    let waited = start.elapsed();
    assert!(
        waited > Duration::from_millis(1_900) && waited <= Duration::from_secs(2),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn run_at_in_options_is_a_delay_and_refused_beside_one() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::<TestQueues, _>::new(backend.clone())
        .await
        .unwrap();
    let at = std::time::SystemTime::now() + Duration::from_secs(60);
    producer
        .enqueue_with(
            &Task { n: 1 },
            EnqueueOptions::default().priority(2).run_at(at),
        )
        .await
        .unwrap();
    assert_eq!(backend.held_count(WORK), 1);
    let past = std::time::SystemTime::now() - Duration::from_secs(1);
    producer
        .enqueue_with(&Task { n: 2 }, EnqueueOptions::default().run_at(past))
        .await
        .unwrap();
    assert_eq!(backend.ready_count(WORK), 1);

    let both = EnqueueOptions::default()
        .delay(Duration::from_secs(1))
        .run_at(at);
    let err = producer
        .enqueue_with(&Task { n: 3 }, both)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(
        err.to_string().contains("both a delay and a run_at"),
        "{err}"
    );
    assert_eq!(
        (backend.ready_count(WORK), backend.held_count(WORK)),
        (1, 1)
    );

    // A deadline is checked against the time the job is due at.
    let err = producer
        .enqueue_with(
            &Task { n: 4 },
            EnqueueOptions::default()
                .run_at(at)
                .deadline(at - Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
}
