//! Measures the ways of reading a queue without removing anything, and the
//! cost of a transactional redrive, on the broker at `AMQP_URL`, over
//! `QUEUEY_MEASURE_MESSAGES` messages (default 10,000).
//!
//! ```sh
//! AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//!     cargo test -p queuey-ops --bin queuey -- --ignored measure_reads --nocapture
//! ```
//!
//! Creates two queues named `queuey-ops-measure.<uuid>` (and `.dead`),
//! deletes them at the end. A measurement, not a test: it asserts nothing,
//! and only runs when asked for.

use std::time::Instant;

use lapin::BasicProperties;
use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};

use crate::mgmt::Management;
use crate::tests::support::amqp_url;
use crate::{Amqp, browse, dead};

#[tokio::test]
#[ignore = "a measurement: run it with --ignored measure_reads --nocapture"]
async fn measure_reads() -> Result<(), Box<dyn std::error::Error>> {
    let Some(url) = amqp_url("measure_reads") else {
        return Ok(());
    };
    let n: usize = std::env::var("QUEUEY_MEASURE_MESSAGES").map_or(Ok(10_000), |a| a.parse())?;
    let amqp = Amqp::connect(&url, "queuey-ops-measure").await?;
    let q = format!("queuey-ops-measure.{}", uuid::Uuid::new_v4().simple());
    let dq = format!("{q}.dead");
    let outcome = measure(&amqp, &url, &q, &dq, n).await;
    let ch = amqp.channel().await?;
    for name in [&q, &dq] {
        let _ = ch
            .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    amqp.close().await;
    outcome
}

async fn fill(
    amqp: &Amqp,
    queue: &str,
    bodies: &[Vec<u8>],
    dead: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let ch = amqp.confirm_channel().await?;
    let opts = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.into(), opts, FieldTable::default())
        .await?;
    let mut pending = Vec::new();
    for body in bodies {
        let mut headers = FieldTable::default();
        if dead {
            headers.insert(
                "x-death-reason".into(),
                AMQPValue::LongString("measured".into()),
            );
        }
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_headers(headers);
        pending.push(
            ch.basic_publish(
                ShortString::default(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await?,
        );
        if pending.len() == 500 {
            for p in pending.drain(..) {
                p.await?;
            }
        }
    }
    for p in pending {
        p.await?;
    }
    Ok(())
}

async fn in_order(
    amqp: &Amqp,
    queue: &str,
    bodies: &[Vec<u8>],
) -> Result<bool, Box<dyn std::error::Error>> {
    let read = crate::tests::helpers::browse(amqp, queue, None).await?;
    Ok(read.len() == bodies.len() && read.iter().zip(bodies).all(|(h, b)| &h.body == b))
}

async fn measure(
    amqp: &Amqp,
    url: &str,
    q: &str,
    dq: &str,
    n: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let payload = serde_json::value::to_raw_value(&serde_json::json!({ "i": i })).unwrap();
            queuey_core::Envelope::new("measured", q, payload)
                .encode()
                .unwrap()
        })
        .collect();
    fill(amqp, q, &bodies, false).await?;
    println!("{n} messages of {} bytes", bodies[0].len());

    let started = Instant::now();
    let read = crate::tests::helpers::browse(amqp, q, None).await?;
    let took = started.elapsed();
    println!(
        "browse (basic.get, {} in flight) + hold + requeue: {} read in {:.2?} ({:.0}/s); order kept: {}",
        browse::WINDOW,
        read.len(),
        took,
        read.len() as f64 / took.as_secs_f64(),
        in_order(amqp, q, &bodies).await?
    );

    let started = Instant::now();
    let mut cursor = browse::Cursor::open(amqp, q, None).await?;
    let mut count = 0;
    while cursor.next().await?.is_some() {
        count += 1;
    }
    cursor.release().await;
    let took = started.elapsed();
    println!(
        "cursor, letter by letter + hold + requeue: {count} read in {took:.2?} ({:.0}/s); order kept: {}",
        count as f64 / took.as_secs_f64(),
        in_order(amqp, q, &bodies).await?
    );

    let mgmt = Management::for_amqp_url(url, None)?;
    let started = Instant::now();
    let got = reqwest::Client::new()
        .post(format!("{}/api/queues/%2F/{q}/get", mgmt.base()))
        .basic_auth("guest", Some("guest"))
        .json(&serde_json::json!({ "count": n, "ackmode": "ack_requeue_true", "encoding": "auto" }))
        .send()
        .await?
        .json::<serde_json::Value>()
        .await?;
    let took = started.elapsed();
    let count = got.as_array().map_or(0, Vec::len);
    println!(
        "management get (ack_requeue_true): {count} read in {took:.2?} ({:.0}/s); order kept: {}",
        count as f64 / took.as_secs_f64(),
        in_order(amqp, q, &bodies).await?
    );

    fill(amqp, dq, &bodies, true).await?;
    let ch = amqp.channel().await?;
    ch.queue_purge(q.into(), Default::default()).await?;
    let options = dead::RedriveOptions::new(q);
    let started = Instant::now();
    let report = dead::redrive(amqp, dq, &options, &mut |_| {}).await;
    let took = started.elapsed();
    match report {
        Ok(r) => println!(
            "redrive (publish + ack, 64 moves per tx): {} moved in {took:.2?} ({:.0}/s)",
            r.moved,
            r.moved as f64 / took.as_secs_f64()
        ),
        Err(e) => println!("redrive failed: {e}"),
    }
    Ok(())
}
