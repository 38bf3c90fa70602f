//! The default granularity's promise, on the broker: a hold is never early,
//! and is late by less than 10 % of its delay, or less than one second
//! where that is more. Checked on the hold queue each job lands in (its TTL
//! is in its name), so no test waits for the delays to pass.

use std::collections::HashMap;
use std::time::Duration;

use queuey_core::backend::Backend;

use queuey_core::{Envelope, QueueConfig};
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{death_queues, envelope, n_of, within};

/// Delays the promise is tight on (just past a bucket boundary) and a
/// spread of others, from one second to half an hour, in milliseconds.
fn delays() -> Vec<u64> {
    let mut delays = vec![
        1_001, 9_999, 10_001, 11_001, 11_005, 12_001, 60_001, 100_000,
    ];
    // A fixed pseudo-random spread (the same every run).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        delays.push(1_000 + x % 1_800_000);
    }
    delays
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_buckets_are_never_early_and_late_by_less_than_ten_percent() {
    let broker = broker!("the_default_buckets_are_never_early_and_late_by_less_than_ten_percent");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("buckets");
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .expect("declare");
    let delays = delays();
    for (n, delay) in delays.iter().enumerate() {
        within(
            "publish_after",
            backend.publish_after(&envelope(&q, n as u32), Duration::from_millis(*delay)),
        )
        .await
        .expect("a held publish");
    }

    // Every job is in the hold queue whose TTL is its bucket, or, when its
    // hold already released it (the short ones, on a busy machine), back on
    // the work queue with that hold named in its `x-death` header.
    let prefix = format!("{q}.deferred.quorum.");
    let ttl_of = |hold: &str| -> u64 { hold[prefix.len()..].parse().expect("a TTL in the name") };
    let mut bucket_of: HashMap<u32, u64> = HashMap::new();
    let started = std::time::Instant::now();
    while bucket_of.len() < delays.len() && started.elapsed() < Duration::from_secs(60) {
        for hold in broker.queues_starting_with(&prefix).await {
            broker.track(&hold);
            while let Some(message) = broker.get(&hold).await {
                let job = Envelope::decode(&message.delivery.data).expect("an envelope");
                bucket_of.insert(n_of(&job), ttl_of(&hold));
            }
        }
        while let Some(message) = broker.get(&q).await {
            let job = Envelope::decode(&message.delivery.data).expect("an envelope");
            let hold = death_queues(&message)
                .into_iter()
                .find(|queue| queue.starts_with(&prefix))
                .expect("a released job names its hold in x-death");
            bucket_of.insert(n_of(&job), ttl_of(&hold));
        }
        if bucket_of.len() < delays.len() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_eq!(bucket_of.len(), delays.len(), "every held job was found");
    for (n, delay) in delays.iter().enumerate() {
        let bucket = bucket_of[&(n as u32)];
        assert!(bucket >= *delay, "{delay} ms held for {bucket} ms: early");
        let late = bucket - delay;
        assert!(
            late < 1_000 || late * 10 < *delay,
            "{delay} ms held for {bucket} ms: {late} ms late, over 10 % and over 1 s"
        );
    }
    let _ = backend.close().await;
}
