//! A dead letter tells its story: when it died, the error of every
//! attempt, and for a malformed body why it did not decode.

use std::time::Duration;

use futures::StreamExt;
use lapin::BasicProperties;
use queuey_core::backend::Backend;
use queuey_core::{Disposition, Envelope};

use crate::tests::support::{harness, json, ok, within};
use crate::time::now_ms;

/// Takes the next delivery, which must be attempt `attempt` of the job and
/// carry the errors `before`.
async fn next(
    stream: &mut queuey_core::backend::DeliveryStream,
    attempt: u32,
    before: &[&str],
) -> Box<dyn queuey_core::backend::Delivery> {
    let delivery = within("delivery", stream.next())
        .await
        .expect("a delivery")
        .expect("delivery ok");
    let env = delivery.envelope();
    assert_eq!(env.attempt, attempt);
    let errors: Vec<&str> = env.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(errors, before);
    delivery
}

#[tokio::test]
async fn a_job_failing_twice_then_fatally_shows_died_at_and_each_error() {
    let h = harness!("dead_story");
    let q = h.queue("dead-story");
    h.track(&format!("{q}.deferred.quorum.1000"));
    let (backend, config) = h.backend(&q).await;
    let raw = serde_json::value::to_raw_value(&serde_json::json!({"n": 1})).unwrap();
    let env = Envelope::new("send_email", q.as_str(), raw);
    let id = env.job_id.to_string();
    within("publish", backend.publish(&env))
        .await
        .expect("publish");
    let mut stream = within("consume", backend.consume(&config))
        .await
        .expect("consume");

    // What the worker does for a retried attempt: record its error, retry.
    let retry = Disposition::Retry {
        delay: Duration::from_secs(1),
    };
    let mut first = next(&mut stream, 1, &[]).await;
    let failed_at = u64::try_from(now_ms()).unwrap();
    first
        .envelope_mut()
        .expect("the RabbitMQ backend lets a delivery record an error")
        .record_error("HTTP 503 from upstream", failed_at);
    within("retry", first.settle(retry.clone()))
        .await
        .expect("retried");
    let mut second = next(&mut stream, 2, &["HTTP 503 from upstream"]).await;
    second
        .envelope_mut()
        .unwrap()
        .record_error("connection reset", u64::try_from(now_ms()).unwrap());
    within("retry", second.settle(retry))
        .await
        .expect("retried");
    let third = next(
        &mut stream,
        3,
        &["HTTP 503 from upstream", "connection reset"],
    )
    .await;
    let before_death = now_ms();
    let dead = Disposition::DeadLetter {
        reason: "fatal: HTTP 410 gone".into(),
    };
    within("dead-letter", third.settle(dead))
        .await
        .expect("dead-lettered");
    let after_death = now_ms();

    // A body that is not an envelope keeps its parse error.
    h.publish_raw(
        &q,
        b"not json {",
        BasicProperties::default().with_message_id("bad-1".into()),
    )
    .await;
    // The consumer copies it to the dead-letter queue as it is polled; no
    // delivery comes out of the stream.
    let dead_queue = format!("{q}.dead");
    for _ in 0..100 {
        if h.ready(&dead_queue).await == 2 {
            break;
        }
        let polled = tokio::time::timeout(Duration::from_millis(100), stream.next()).await;
        assert!(polled.is_err(), "a malformed body reached the stream");
    }
    assert_eq!(h.ready(&dead_queue).await, 2);
    drop(stream);

    let shown = json(&h.cli(&["dead", "show", &q, &id, "--json"]));
    let died_at = shown["summary"]["died_at_ms"].as_i64().expect("died_at_ms");
    assert!(
        (before_death..=after_death).contains(&died_at),
        "{died_at} not in {before_death}..={after_death}"
    );
    let rows = shown["history"]["errors"].as_array().unwrap();
    let story: Vec<(u64, &str, bool)> = rows
        .iter()
        .map(|r| {
            (
                r["attempt"].as_u64().unwrap(),
                r["error"].as_str().unwrap(),
                r["last"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        story,
        [
            (1, "HTTP 503 from upstream", false),
            (2, "connection reset", false),
            (3, "fatal: HTTP 410 gone", true),
        ]
    );
    assert_eq!(rows[0]["at_ms"].as_u64(), Some(failed_at));
    assert_eq!(shown["history"]["cut"], 0);

    let text = ok(&h.cli(&["dead", "show", &q, &id]));
    for line in [
        "died at:",
        "ago)",
        "enqueued at:",
        "#1 at ",
        ": HTTP 503 from upstream",
        ": connection reset",
        ", died: fatal: HTTP 410 gone",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }

    let listed = json(&h.cli(&["dead", "ls", &q, "--json"]));
    assert_eq!(listed["items"][0]["died_at_ms"], died_at);
    let table = ok(&h.cli(&["dead", "ls", &q]));
    assert!(table.contains("DIED") && table.contains("ago)"), "{table}");

    let malformed = json(&h.cli(&["dead", "show", &q, "bad-1", "--json"]));
    let parse_error = malformed["parse_error"].as_str().expect("a parse error");
    assert!(parse_error.contains("expected"), "{parse_error}");
    assert!(malformed["summary"]["died_at_ms"].as_i64().is_some());
    let text = ok(&h.cli(&["dead", "show", &q, "bad-1"]));
    assert!(text.contains("parse error: expected"), "{text}");
}
