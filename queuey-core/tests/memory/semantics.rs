//! One test per row of the semantics table.

use queuey_core::Disposition;
use std::sync::Arc;
use std::time::Duration;

use queuey_core::backend::Backend;
use queuey_core::backend::MALFORMED_ENVELOPE_REASON;
use queuey_core::memory::MemoryBackend;
use queuey_core::{Producer, Queues};

use crate::support::{Task, TestQueues, assert_idle, n_of, next};

async fn setup() -> (Arc<MemoryBackend>, Producer<TestQueues, Arc<MemoryBackend>>) {
    let backend = Arc::new(MemoryBackend::new());
    let producer = Producer::new(backend.clone()).await.unwrap();
    (backend, producer)
}

const WORK: &str = "test.work";

#[tokio::test(start_paused = true)]
async fn success_is_an_ack() {
    let (backend, producer) = setup().await;
    let id = producer.enqueue(&Task { n: 1 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(d.envelope().job_id, id);
    assert_eq!(d.envelope().job_type, "task");
    assert_eq!(d.envelope().attempt, 1);
    assert!(!d.redelivered());
    assert_eq!(backend.unacked_count(WORK), 1);
    d.ack().await.unwrap();
    assert_eq!(backend.unacked_count(WORK), 0);
    assert_eq!(backend.ready_count(WORK), 0);
    assert_idle(&mut stream).await;
}

#[tokio::test(start_paused = true)]
async fn transient_failure_is_held_then_retried_at_priority_zero_with_attempt_plus_one() {
    let (backend, producer) = setup().await;
    producer
        .enqueue_with(
            &Task { n: 1 },
            queuey_core::EnqueueOptions::default().priority(7),
        )
        .await
        .unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(d.envelope().priority, 7);
    let started = tokio::time::Instant::now();
    d.settle(Disposition::Retry {
        delay: Duration::from_secs(5),
    })
    .await
    .unwrap();
    assert_eq!(
        backend.unacked_count(WORK),
        0,
        "the original is acked after the hold publish"
    );
    assert_eq!(backend.held_count(WORK), 1);

    let again = next(&mut stream).await;
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "released early"
    );
    assert_eq!(again.envelope().attempt, 2);
    assert_eq!(again.envelope().priority, 0);
    assert_eq!(again.envelope().deferrals, 0);
    assert!(!again.redelivered());
    again.ack().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn deferral_returns_ahead_of_a_backlog_while_a_retry_joins_the_back() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 0 }).await.unwrap();
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let deferred = next(&mut stream).await;
    let retried = next(&mut stream).await;
    assert_eq!((n_of(&*deferred), n_of(&*retried)), (0, 1));

    let top = TestQueues::Work.config().top_priority();
    deferred
        .settle(Disposition::Defer {
            delay: Duration::from_secs(30),
        })
        .await
        .unwrap();
    retried
        .settle(Disposition::Retry {
            delay: Duration::from_secs(30),
        })
        .await
        .unwrap();

    // A backlog of 1,000 priority-0 jobs piles up while both wait.
    let backlog: Vec<Task> = (100..1_100).map(|n| Task { n }).collect();
    let outcomes = producer.enqueue_batch(&backlog).await;
    assert!(outcomes.iter().all(Result::is_ok));
    drop(stream);
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(backend.ready_count(WORK), 1_002);

    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let first = next(&mut stream).await;
    assert_eq!(n_of(&*first), 0, "the deferral comes first");
    assert_eq!(first.envelope().attempt, 1, "a deferral spends no attempt");
    assert_eq!(first.envelope().deferrals, 1);
    assert_eq!(first.envelope().priority, top);
    first.ack().await.unwrap();
    for expected in 100..1_100 {
        let d = next(&mut stream).await;
        assert_eq!(n_of(&*d), expected, "backlog order");
        d.ack().await.unwrap();
    }
    let last = next(&mut stream).await;
    assert_eq!(n_of(&*last), 1, "the retry joined the back");
    assert_eq!(last.envelope().attempt, 2);
    last.ack().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn fatal_or_exhausted_is_dead_lettered_with_reason_queue_and_attempts() {
    let (backend, producer) = setup().await;
    let id = producer.enqueue(&Task { n: 9 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    d.settle(Disposition::Retry {
        delay: Duration::from_millis(10),
    })
    .await
    .unwrap();
    let d = next(&mut stream).await;
    assert_eq!(d.envelope().attempt, 2);
    d.settle(Disposition::DeadLetter {
        reason: "attempts exhausted (2 of 2): boom".into(),
    })
    .await
    .unwrap();

    assert_eq!(backend.unacked_count(WORK), 0);
    let dead = backend.dead_letters(WORK);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "attempts exhausted (2 of 2): boom");
    assert_eq!(dead[0].original_queue, WORK);
    assert_eq!(dead[0].attempts, 2);
    let env = dead[0].envelope().unwrap();
    assert_eq!(env.job_id, id);
    assert_eq!(env.payload_as::<Task>().unwrap(), Task { n: 9 });
    assert_idle(&mut stream).await;
}

#[tokio::test(start_paused = true)]
async fn a_body_that_is_not_an_envelope_is_dead_lettered_verbatim_and_never_delivered() {
    let (backend, producer) = setup().await;
    backend.publish_raw(WORK, b"not json {".to_vec()).unwrap();
    backend.publish_raw(WORK, Vec::new()).unwrap();
    backend.publish_raw(WORK, vec![0xff, 0xfe, 0x00]).unwrap();
    producer.enqueue(&Task { n: 5 }).await.unwrap();

    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;
    assert_eq!(
        n_of(&*d),
        5,
        "the poison messages did not stall the consumer"
    );
    d.ack().await.unwrap();

    let dead = backend.dead_letters(WORK);
    let bodies: Vec<&[u8]> = dead.iter().map(|l| l.body.as_slice()).collect();
    assert_eq!(
        bodies,
        vec![&b"not json {"[..], &b""[..], &[0xff, 0xfe, 0x00][..]]
    );
    assert!(dead.iter().all(|l| l.reason == MALFORMED_ENVELOPE_REASON));
    // Each keeps why it did not decode, and when it died.
    assert!(
        dead.iter()
            .all(|l| l.parse_error.as_ref().is_some_and(|e| !e.is_empty()) && l.died_at_ms > 0),
        "{dead:?}"
    );
    assert!(
        dead.iter()
            .all(|l| l.attempts == 0 && l.original_queue == WORK)
    );
    assert_eq!(backend.unacked_count(WORK), 0, "malformed bodies are acked");
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_is_not_the_job_is_dead_lettered_with_the_decode_error() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 5 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let d = next(&mut stream).await;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Other {
        missing: String,
    }
    let error = d.envelope().payload_as::<Other>().unwrap_err();
    d.settle(Disposition::DeadLetter {
        reason: format!("payload does not decode as the job: {error}"),
    })
    .await
    .unwrap();
    let dead = backend.dead_letters(WORK);
    assert!(
        dead[0].reason.contains("missing field `missing`"),
        "{}",
        dead[0].reason
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_the_longest_hold_is_dead_lettered_never_shortened() {
    let (backend, producer) = setup().await;
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    producer.enqueue(&Task { n: 2 }).await.unwrap();
    let mut stream = backend.consume(&TestQueues::Work.config()).await.unwrap();
    let too_long = queuey_core::LONGEST_WAIT + Duration::from_millis(1);
    let d = next(&mut stream).await;
    d.settle(Disposition::Retry { delay: too_long })
        .await
        .unwrap();
    let d = next(&mut stream).await;
    d.settle(Disposition::Defer { delay: too_long })
        .await
        .unwrap();

    assert_eq!(backend.held_count(WORK), 0, "nothing was parked");
    let dead = backend.dead_letters(WORK);
    assert_eq!(dead.len(), 2);
    assert!(
        dead[0].reason.starts_with("a retry of 2073600 s is longer"),
        "{}",
        dead[0].reason
    );
    assert!(
        dead[1]
            .reason
            .starts_with("a deferral of 2073600 s is longer"),
        "{}",
        dead[1].reason
    );
}

#[tokio::test(start_paused = true)]
async fn a_close_is_told_to_whoever_waits_for_the_connection_to_change() {
    use queuey_core::backend::ConnectionState;
    let (backend, producer) = setup().await;
    let changed = backend.connection_changed(ConnectionState::Connected);
    tokio::pin!(changed);
    // Traffic wakes nobody for good: the state is still the one seen.
    producer.enqueue(&Task { n: 1 }).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(3600), &mut changed)
            .await
            .is_err()
    );
    backend.close();
    assert_eq!(changed.await, ConnectionState::Closed);
    // Asked with a state it no longer has, it answers at once.
    assert_eq!(
        backend.connection_changed(ConnectionState::Connected).await,
        ConnectionState::Closed
    );
}
