//! How long a new process takes to read the control stream before it
//! starts, after a month of honest use and after a flood of records from a
//! user it does not trust: reading the stream from its start, and going on
//! from a snapshot of the state.
//!
//! Fills a control stream of its own on the broker in `AMQP_URL` with the
//! honest records and times `follow_control` on a fresh backend, which
//! reads them from the stream's start: the fleet, which then follows the
//! stream, writes a snapshot every `INTERVAL` seconds and, while the forged
//! records pour in, one after every ten to twenty thousand it refuses.
//! It times a fresh backend right after the flood (which reads what of the
//! flood lies within its last three intervals) and, once three intervals
//! have passed, fresh backends that go on from the latest snapshot, and
//! deletes the stream:
//!
//! ```text
//! AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//!     cargo run --release -p queuey-rabbitmq --example control_start -- [HONEST] [FORGED] [INTERVAL]
//! ```
//!
//! `HONEST` (default 7,000) is the month modelled: 50 commands a day from
//! operators (1,500), 20 workers restarted four times a day, each
//! publishing one marker when it starts (2,400), and 100 runs of the
//! `queuey` tool a day, one marker each (3,000). `FORGED` (default 0)
//! records are published unsigned, as a producer's credential could, after
//! the honest ones; a follower reads them and refuses each. `INTERVAL`
//! (default 2) stands in for the snapshot interval of ten minutes a fleet
//! runs with, so that the run takes seconds instead of half an hour.

use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeleteOptions};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use queuey_core::Uuid;
use queuey_core::backend::ControlChannel;
use queuey_core::control::{Command, ControlRecord};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AMQP_URL").map_err(|_| "set AMQP_URL to a RabbitMQ to measure on")?;
    let mut args = std::env::args().skip(1);
    let honest: usize = args.next().map_or(Ok(7_000), |a| a.parse())?;
    let forged: usize = args.next().map_or(Ok(0), |a| a.parse())?;
    let interval = Duration::from_secs(args.next().map_or(Ok(2), |a| a.parse())?);
    let stream = format!("queuey-example.control.{}", Uuid::new_v4().simple());
    let options = || {
        RabbitMqOptions::default()
            .control_stream(&stream)
            .control_snapshot_interval(interval)
    };

    let sender = RabbitMqBackend::with_options(url.as_str(), options()).await?;
    let started = Instant::now();
    let sent: Vec<_> = futures::stream::iter((0..honest).map(|n| {
        let sender = &sender;
        let command = match n % 3 {
            0 => Command::Pause {
                queue: format!("app.q{}", n % 50),
            },
            1 => Command::Resume {
                queue: format!("app.q{}", n % 50),
            },
            _ => Command::Cancel {
                job_id: Uuid::new_v4(),
            },
        };
        async move { sender.send_control(&ControlRecord::new(command)).await }
    }))
    .buffer_unordered(256)
    .collect()
    .await;
    sent.into_iter().collect::<Result<Vec<()>, _>>()?;
    println!("{honest} honest records sent in {:?}", started.elapsed());

    // No snapshot yet: the fleet reads the stream from its start, then
    // keeps following it.
    let fleet = timed_start(&url, options(), "the fleet, from the stream's start").await?;

    if forged > 0 {
        let started = Instant::now();
        flood(&url, &stream, forged).await?;
        println!(
            "{forged} forged records published in {:?}",
            started.elapsed()
        );
    }
    if forged > 0 {
        // Within three intervals of the flood, a process that starts reads
        // what of it is that recent.
        let reader = timed_start(&url, options(), "right after the flood").await?;
        reader.close().await?;
    }
    tokio::time::sleep(interval * 3 + Duration::from_secs(1)).await;
    for round in 1..=3 {
        let reader =
            timed_start(&url, options(), &format!("round {round}, from a snapshot")).await?;
        reader.close().await?;
    }

    fleet.close().await?;
    sender.close().await?;
    let connection = Connection::connect(&url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel
        .queue_delete(stream.as_str().into(), QueueDeleteOptions::default())
        .await?;
    connection.close(200, "done".into()).await?;
    Ok(())
}

/// Connects a backend with `options` and times its `follow_control`;
/// prints the time and what the view holds, and returns the backend.
async fn timed_start(
    url: &str,
    options: RabbitMqOptions,
    what: &str,
) -> Result<RabbitMqBackend, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let reader = RabbitMqBackend::with_options(url, options).await?;
    let connected = started.elapsed();
    let view = reader.follow_control().await?;
    let state = view.snapshot();
    println!(
        "{what}: connected in {connected:?}, caught up {} in {:?} ({} paused queues, {} \
         cancellations)",
        if view.is_caught_up() {
            "fully"
        } else {
            "not yet"
        },
        started.elapsed(),
        state.paused().count(),
        state.cancellations().0,
    );
    Ok(reader)
}

/// Publishes `count` unsigned pauses to `stream`, confirmed in windows.
async fn flood(url: &str, stream: &str, count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let body = ControlRecord::new(Command::Pause {
        queue: "app.everything".into(),
    })
    .encode();
    let mut left = count;
    while left > 0 {
        let window = left.min(1_000);
        let mut confirms = Vec::with_capacity(window);
        for _ in 0..window {
            confirms.push(
                channel
                    .basic_publish(
                        "".into(),
                        stream.into(),
                        BasicPublishOptions::default(),
                        &body,
                        BasicProperties::default(),
                    )
                    .await?,
            );
        }
        for confirm in confirms {
            confirm.await?;
        }
        left -= window;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    connection.close(200, "done".into()).await?;
    Ok(())
}
