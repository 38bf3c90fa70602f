//! Round-trip latency of a job a caller waits for: queuey's
//! `enqueue_and_wait` against a hand-written lapin RPC over direct
//! reply-to, in one process, runs of the two sides alternating.
//!
//! ```sh
//! AMQP_URL='amqp://guest:guest@127.0.0.1:5672/%2f' cargo bench -p queuey-bench --bench reply_latency
//! ```
//!
//! Each side has a requester and a responder on connections of their own.
//! The lapin baseline is the best correct program for the same work: the
//! requester publishes each request persistent and `mandatory` on a
//! confirm channel that consumes `amq.rabbitmq.reply-to` without acks,
//! waits for the confirm and then the reply; the responder consumes the
//! work queue (prefetch 10), acknowledges each request, then publishes the
//! reply to the default exchange. Requests go one at a time on both sides
//! (`QUEUEY_BENCH_ROUND_TRIPS`, 1000 a run, after 50 to warm up;
//! `QUEUEY_BENCH_RUNS`, 3 runs a side). Queues are `queuey-bench.{uuid}`
//! and the control streams `queuey-bench-{uuid}.control` and
//! `.control.workers`, deleted after the run; connections
//! `queuey-bench-{uuid}-{role}`.

use std::error::Error;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Confirmation, Connection, ConnectionProperties};
use queuey::job::Uuid;
use queuey::prelude::*;
use queuey::queue::QueueConfig;
use serde::{Deserialize, Serialize};

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

const WARM_UP: usize = 50;
const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The queuey side's queue, named once per process.
static QUEUE: OnceLock<String> = OnceLock::new();

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BenchQueues {
    Work,
}

impl Queues for BenchQueues {
    const ALL: &'static [Self] = &[BenchQueues::Work];

    fn name(&self) -> &'static str {
        QUEUE
            .get_or_init(|| format!("queuey-bench.{}", Uuid::new_v4().simple()))
            .as_str()
    }

    fn config(&self) -> QueueConfig {
        QueueConfig::new(self.name()).prefetch(10)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Echo {
    n: u64,
    pad: String,
}

impl Job for Echo {
    type Queues = BenchQueues;
    type Output = u64;
    const QUEUE: BenchQueues = BenchQueues::Work;
    const NAME: &'static str = "bench_echo";
}

fn echo(n: u64) -> Echo {
    Echo {
        n,
        pad: "x".repeat(160),
    }
}

/// One run's latencies, sorted.
struct Run(Vec<Duration>);

impl Run {
    fn percentile(&self, p: f64) -> Duration {
        let index = ((self.0.len() as f64 - 1.0) * p).round() as usize;
        self.0[index.min(self.0.len() - 1)]
    }
}

async fn connect(url: &str, name: &str) -> BenchResult<Connection> {
    let props = ConnectionProperties::default().with_connection_name(name.into());
    Ok(Connection::connect(url, props).await?)
}

// ===== the queuey side =====

/// The control stream of this run's backends (its workers' heartbeats go
/// to the same name with `.workers`), deleted after the run.
fn control_stream(id: &str) -> String {
    format!("queuey-bench-{id}.control")
}

struct QueueySide {
    producer: Producer<BenchQueues, Arc<RabbitMqBackend>>,
    handle: queuey::worker::WorkerHandle,
    running: tokio::task::JoinHandle<Result<(), queuey::worker::WorkerError>>,
    backends: [Arc<RabbitMqBackend>; 2],
}

async fn queuey_side(url: &str, id: &str) -> BenchResult<QueueySide> {
    let named = |role: &str| {
        RabbitMqOptions::default()
            .connection_name(format!("queuey-bench-{id}-{role}"))
            .control_stream(control_stream(id))
    };
    let requester = Arc::new(RabbitMqBackend::with_options(url, named("queuey-requester")).await?);
    let responder = Arc::new(RabbitMqBackend::with_options(url, named("queuey-responder")).await?);
    let worker = Worker::<BenchQueues, _>::builder(responder.clone())
        .handler(handler_fn(|job: Echo, _: JobContext| async move {
            Ok::<_, JobError>(job.n * 2)
        }))
        .build()
        .await?;
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    let producer = Producer::<BenchQueues, _>::new(requester.clone()).await?;
    Ok(QueueySide {
        producer,
        handle,
        running,
        backends: [requester, responder],
    })
}

async fn queuey_run(side: &QueueySide, round_trips: usize) -> BenchResult<Run> {
    let mut latencies = Vec::with_capacity(round_trips);
    for i in 0..WARM_UP + round_trips {
        let n = i as u64;
        let started = Instant::now();
        let doubled = side
            .producer
            .enqueue_and_wait(&echo(n), Duration::from_secs(30))
            .await?;
        let took = started.elapsed();
        if doubled != n * 2 {
            return Err(format!("queuey answered {doubled} to {n}").into());
        }
        if i >= WARM_UP {
            latencies.push(took);
        }
    }
    latencies.sort();
    Ok(Run(latencies))
}

// ===== the lapin side =====

struct LapinSide {
    queue: String,
    requests: lapin::Channel,
    replies: lapin::Consumer,
    body: Vec<u8>,
    responder: tokio::task::JoinHandle<()>,
    connections: [Connection; 2],
}

async fn lapin_side(url: &str, id: &str, body_len: usize) -> BenchResult<LapinSide> {
    let queue = format!("queuey-bench.{}", Uuid::new_v4().simple());
    let requester = connect(url, &format!("queuey-bench-{id}-lapin-requester")).await?;
    let responder = connect(url, &format!("queuey-bench-{id}-lapin-responder")).await?;

    let work = responder.create_channel().await?;
    let mut args = FieldTable::default();
    args.insert("x-max-priority".into(), AMQPValue::ShortShortUInt(10));
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("classic".into()),
    );
    work.queue_declare(
        queue.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await?;
    work.basic_qos(10, BasicQosOptions::default()).await?;
    let mut deliveries = work
        .basic_consume(
            queue.as_str().into(),
            "responder".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let reply_channel = work.clone();
    let responder_task = tokio::spawn(async move {
        while let Some(Ok(delivery)) = deliveries.next().await {
            let n: u64 = serde_json::from_slice::<serde_json::Value>(&delivery.data)
                .ok()
                .and_then(|v| v["n"].as_u64())
                .unwrap_or_default();
            let to = delivery.properties.reply_to().clone();
            let correlation = delivery.properties.correlation_id().clone();
            // Acknowledged first, answered after, as queuey does.
            if delivery.ack(BasicAckOptions::default()).await.is_err() {
                return;
            }
            let (Some(to), Some(correlation)) = (to, correlation) else {
                continue;
            };
            let reply = format!(r#"{{"value":{}}}"#, n * 2);
            let _ = reply_channel
                .basic_publish(
                    ShortString::default(),
                    to,
                    BasicPublishOptions::default(),
                    reply.as_bytes(),
                    BasicProperties::default().with_correlation_id(correlation),
                )
                .await;
        }
    });

    let requests = requester.create_channel().await?;
    requests
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let replies = requests
        .basic_consume(
            DIRECT_REPLY_TO.into(),
            "replies".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await?;
    let body = vec![b' '; body_len];
    Ok(LapinSide {
        queue,
        requests,
        replies,
        body,
        responder: responder_task,
        connections: [requester, responder],
    })
}

async fn lapin_run(side: &mut LapinSide, round_trips: usize) -> BenchResult<Run> {
    let mut latencies = Vec::with_capacity(round_trips);
    for i in 0..WARM_UP + round_trips {
        let n = i as u64;
        let mut body = format!(r#"{{"n":{n},"pad":""#).into_bytes();
        let fill = side.body.len().saturating_sub(body.len() + 2);
        body.extend(std::iter::repeat_n(b'x', fill));
        body.extend_from_slice(br#""}"#);
        let correlation = Uuid::new_v4().to_string();
        let started = Instant::now();
        let confirm = side
            .requests
            .basic_publish(
                ShortString::default(),
                side.queue.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                &body,
                BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_message_id(Uuid::new_v4().to_string().into())
                    .with_reply_to(DIRECT_REPLY_TO.into())
                    .with_correlation_id(correlation.as_str().into()),
            )
            .await?
            .await?;
        if !matches!(confirm, Confirmation::Ack(None)) {
            return Err(format!("the request was not confirmed: {confirm:?}").into());
        }
        loop {
            let reply = side
                .replies
                .next()
                .await
                .ok_or("the reply consumer ended")??;
            if reply
                .properties
                .correlation_id()
                .as_ref()
                .map(|c| c.as_str())
                == Some(correlation.as_str())
            {
                let value: serde_json::Value = serde_json::from_slice(&reply.data)?;
                if value["value"].as_u64() != Some(n * 2) {
                    return Err(format!("lapin answered {value} to {n}").into());
                }
                break;
            }
        }
        if i >= WARM_UP {
            latencies.push(started.elapsed());
        }
    }
    latencies.sort();
    Ok(Run(latencies))
}

// ===== the run =====

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

async fn measure(url: &str) -> BenchResult<()> {
    let runs = env_usize("QUEUEY_BENCH_RUNS", 3);
    let round_trips = env_usize("QUEUEY_BENCH_ROUND_TRIPS", 1000);
    let id = Uuid::new_v4().simple().to_string();
    let body_len = {
        let payload = serde_json::value::to_raw_value(&echo(1000))?;
        queuey::job::Envelope::new(Echo::NAME, BenchQueues::Work.name(), payload)
            .encode()?
            .len()
    };
    let queuey = queuey_side(url, &id).await?;
    let lapin = lapin_side(url, &id, body_len).await;
    let result = async {
        let mut lapin = lapin?;
        let (mut q, mut l) = (Vec::new(), Vec::new());
        for run in 0..runs {
            let (a, b) = if run % 2 == 0 {
                let a = queuey_run(&queuey, round_trips).await?;
                (a, lapin_run(&mut lapin, round_trips).await?)
            } else {
                let b = lapin_run(&mut lapin, round_trips).await?;
                (queuey_run(&queuey, round_trips).await?, b)
            };
            eprintln!(
                "run {}: queuey p50 {} p99 {}, lapin p50 {} p99 {}",
                run + 1,
                ms(a.percentile(0.5)),
                ms(a.percentile(0.99)),
                ms(b.percentile(0.5)),
                ms(b.percentile(0.99))
            );
            q.push(a);
            l.push(b);
        }
        let at = |runs: &[Run], p: f64| median(runs.iter().map(|r| r.percentile(p)).collect());
        println!(
            "| round trip, {round_trips} one at a time, {runs} runs a side | queuey | lapin | queuey/lapin |"
        );
        println!("|---|--:|--:|--:|");
        for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
            let (a, b) = (at(&q, p), at(&l, p));
            println!(
                "| {label} | {} | {} | {:.2} |",
                ms(a),
                ms(b),
                a.as_secs_f64() / b.as_secs_f64()
            );
        }
        lapin.responder.abort();
        for connection in &lapin.connections {
            let _ = connection.close(200, "done".into()).await;
        }
        Ok::<_, Box<dyn Error + Send + Sync>>(lapin.queue)
    }
    .await;
    queuey.handle.shutdown();
    let _ = queuey.running.await;
    // Every queue the run made goes, also after a failure.
    let admin = connect(url, &format!("queuey-bench-{id}-admin")).await?;
    let channel = admin.create_channel().await?;
    let mut queues = vec![
        BenchQueues::Work.name().to_owned(),
        format!("{}.dead", BenchQueues::Work.name()),
        format!("{}.suspect", BenchQueues::Work.name()),
        control_stream(&id),
        format!("{}.workers", control_stream(&id)),
    ];
    if let Ok(lapin_queue) = &result {
        queues.push(lapin_queue.clone());
    }
    for queue in queues {
        let _ = channel
            .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    let _ = admin.close(200, "done".into()).await;
    for backend in &queuey.backends {
        backend.close().await?;
    }
    result.map(|_| ())
}

fn main() {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(error) = runtime.block_on(measure(&url)) {
        eprintln!("reply_latency failed: {error}");
        std::process::exit(1);
    }
}
