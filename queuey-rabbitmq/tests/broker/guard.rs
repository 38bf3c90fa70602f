//! The poison guard at the backend: the suspect queue's declaration, a job
//! redelivered once for an innocent reason (a lost connection), which comes
//! back once, through its work queue, counted 1 and not punished, and a job
//! that can never be settled, which ends in the dead-letter queue whatever
//! the broker counts.
//! The guard against a job that really kills its worker process is tested
//! with worker processes in the workspace's `tests/faults/poison.rs`.

use std::time::Duration;

use futures::StreamExt;
use lapin::types::AMQPValue;
use queuey_core::backend::Backend;
use queuey_core::{QueueConfig, QueueType};
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{envelope, guard_notices_mentioning, header, n_of, table, text, within};

fn is_precondition_failed(result: &Result<(), lapin::Error>) -> bool {
    matches!(result, Err(e) if e.to_string().contains("PRECONDITION_FAILED"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suspect_queue_is_declared_like_its_work_queue_without_priorities() {
    let broker = broker!("the_suspect_queue_is_declared_like_its_work_queue_without_priorities");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("suspect-args");
    let config = QueueConfig::new(&q)
        .max_priority(5)
        .message_ttl(Duration::from_secs(60));
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let suspect = format!("{q}.suspect");
    let same = [
        ("x-queue-type", text("classic")),
        ("x-message-ttl", AMQPValue::LongInt(60_000)),
    ];
    assert!(
        broker
            .declare_raw(&suspect, true, table(&same))
            .await
            .is_ok()
    );
    let with_priority = [
        ("x-queue-type", text("classic")),
        ("x-message-ttl", AMQPValue::LongInt(60_000)),
        ("x-max-priority", AMQPValue::LongInt(5)),
    ];
    assert!(is_precondition_failed(
        &broker
            .declare_raw(&suspect, true, table(&with_priority))
            .await
    ));

    // With the guard off there is no suspect queue.
    let off = broker
        .backend(RabbitMqOptions::default().poison_guard(None))
        .await;
    let plain = broker.queue("no-guard");
    within("declare", off.declare(&[QueueConfig::new(&plain)]))
        .await
        .unwrap();
    assert!(broker.exists(&plain).await);
    assert!(!broker.exists(&format!("{plain}.suspect")).await);
    backend.close().await.unwrap();
    off.close().await.unwrap();
}

/// A quorum work queue's suspect queue is a quorum queue with the same
/// delivery limit, dead-lettering into `q.dead` at least once: the broker's
/// own record holds exactly these arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queues_suspect_queue_is_quorum_and_dead_letters_into_q_dead() {
    let broker = broker!("a_quorum_queues_suspect_queue_is_quorum_and_dead_letters_into_q_dead");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("quorum-suspect");
    let config = QueueConfig::new(&q).queue_type(QueueType::Quorum);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let line = broker
        .listed(&format!("{q}.suspect"))
        .await
        .expect("the suspect queue is listed");
    let expected = format!(
        "quorum\ttrue\t[{{\"x-dead-letter-exchange\",[]}},\
         {{\"x-dead-letter-routing-key\",\"{q}.dead\"}},\
         {{\"x-dead-letter-strategy\",\"at-least-once\"}},{{\"x-delivery-limit\",20}},\
         {{\"x-overflow\",\"reject-publish\"}},{{\"x-queue-type\",\"quorum\"}}]"
    );
    assert_eq!(line, expected);
    backend.close().await.unwrap();
}

/// The connection drops while the job is in hand: the broker delivers it
/// again on the new connection, the guard publishes it back to the work
/// queue with a count of 1 (nothing goes to the suspect queue, deleted
/// meanwhile), and the stream hands it out once, marked redelivered;
/// acknowledged, it is gone from every queue, and nothing was
/// dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_redelivered_after_a_lost_connection_runs_once_more_counted_1() {
    let broker = broker!("a_job_redelivered_after_a_lost_connection_runs_once_more_counted_1");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("innocent");
    let suspect = format!("{q}.suspect");
    let config = QueueConfig::new(&q).prefetch(4);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    within("publish", backend.publish(&envelope(&q, 7)))
        .await
        .unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let first = within("delivery", stream.next()).await.unwrap().unwrap();
    assert_eq!(n_of(first.envelope()), 7);
    assert!(!first.redelivered());

    broker.delete_raw(&suspect).await;
    broker
        .close_connection(&broker.connection_name("backend"))
        .await;
    let again = within("the redelivery", stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.envelope().job_id, first.envelope().job_id);
    assert!(again.redelivered());
    within("ack", again.settle(queuey_core::Disposition::Ack))
        .await
        .unwrap();
    // The first delivery came on the dead connection: it cannot be settled.
    assert!(
        within("stale ack", first.settle(queuey_core::Disposition::Ack))
            .await
            .is_err()
    );

    let moves = guard_notices_mentioning(&q);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert!(moves[0].contains("unsettled_deliveries=1"), "{moves:?}");
    assert!(moves[0].contains("again to its work queue"), "{moves:?}");
    within("settled everywhere", async {
        while broker.ready_and_unacked(&q).await != Some((0, 0)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        matches!(
            broker.ready_and_unacked(&suspect).await,
            None | Some((0, 0))
        ),
        "a first return never goes to the suspect queue"
    );
    assert_eq!(broker.ready(&format!("{q}.dead")).await, 0);
    backend.close().await.unwrap();
}

/// A job whose settlement always fails (its retry's hold queue exists with
/// other arguments) is handed back to the broker with a nack each time,
/// which RabbitMQ 4.3 no longer counts toward a quorum queue's delivery
/// limit. The guard counts the returns itself: the job comes back through
/// its work queue once, then through the suspect queue, and after the
/// limit of unsettled deliveries it is in `q.dead` with its reason, on
/// every version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_can_never_be_settled_ends_in_the_dead_letter_queue_with_its_reason() {
    let broker =
        broker!("a_job_that_can_never_be_settled_ends_in_the_dead_letter_queue_with_its_reason");
    const LIMIT: u32 = 3;
    let backend = broker
        .backend(RabbitMqOptions::default().poison_guard(Some(LIMIT)))
        .await;
    let q = broker.queue("never-settled");
    let dead = format!("{q}.dead");
    let config = QueueConfig::new(&q).queue_type(QueueType::Quorum);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    // The quorum hold the retry needs, taken by a classic queue.
    let foreign = broker.hold(&q, 1_000);
    broker
        .declare_raw(&foreign, true, table(&[]))
        .await
        .unwrap();
    let job = envelope(&q, 4);
    within("publish", backend.publish(&job)).await.unwrap();

    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    for attempt in 0..LIMIT {
        let delivery = within("a delivery", stream.next()).await.unwrap().unwrap();
        assert_eq!(delivery.envelope().job_id, job.job_id);
        assert_eq!(delivery.redelivered(), attempt > 0, "delivery {attempt}");
        let retried = delivery.settle(queuey_core::Disposition::Retry {
            delay: Duration::from_secs(1),
        });
        assert!(
            within("a retry that fails", retried).await.is_err(),
            "delivery {attempt}"
        );
    }
    // The stream must be polled for the guard to see the last return; it
    // hands out nothing more.
    let waiting = async {
        while broker.ready(&dead).await != 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        () = within("the dead letter", waiting) => {}
        more = stream.next() => panic!("the stream handed out more: {:?}", more.map(|d| d.map(|d| d.envelope().job_id))),
    }
    let letter = broker.get(&dead).await.expect("the dead letter");
    assert_eq!(
        header(&letter, "x-death-reason").as_deref(),
        Some(
            "delivered 3 times without being settled: the worker died or lost its connection \
             while handling it (or could not settle it)"
        )
    );
    let moves = guard_notices_mentioning(&q);
    assert_eq!(moves.len(), 2, "{moves:?}");
    assert!(moves[0].contains("again to its work queue"), "{moves:?}");
    assert!(moves[1].contains("moved to the suspect queue"), "{moves:?}");
    assert_eq!(broker.ready_and_unacked(&q).await, Some((0, 0)));
    backend.close().await.unwrap();
}
