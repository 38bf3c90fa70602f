//! The other job library on RabbitMQ: an apalis-amqp worker consuming the
//! same jobs as queuey's, set up as its documentation shows, with its
//! default middleware (it acks each job once its handler returned).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apalis_amqp::{AmqpBackend, AmqpTask, Config};
use apalis_core::worker::builder::WorkerBuilder;
use apalis_core::worker::event::Event;
use apalis_core::worker::ext::event_listener::EventListenerExt;
use futures::Sink;
use lapin::ConnectionProperties;
use lapin::types::{AMQPValue, FieldTable, LongString};

use crate::broker::{Bodies, Broker, PAYLOAD_BYTES, bounded, job_message};
use crate::queuey_side::BenchJob;
use crate::{BenchResult, Measured, RUN_TIMEOUT, Stopwatch};

/// How the runs of one row reach the broker: a connection pool of the
/// kind apalis-amqp takes, named like the other sides' connections.
pub(crate) struct ApalisConnection {
    pool: deadpool_lapin::Pool,
}

impl ApalisConnection {
    /// Opens the pool's connection, so that no run pays for it.
    pub(crate) async fn open(broker: &Broker, label: &str) -> BenchResult<ApalisConnection> {
        let name = broker.connection_name(label);
        let config = deadpool_lapin::Config {
            url: Some(broker.url().to_owned()),
            pool: None,
        };
        let pool = config.create_pool(
            move || ConnectionProperties::default().with_connection_name(name.as_str().into()),
            deadpool_lapin::Runtime::Tokio1,
        )?;
        drop(bounded("connecting", pool.get()).await??);
        Ok(ApalisConnection { pool })
    }

    /// Closes the pool's connection, then the pool.
    pub(crate) async fn close(self) {
        if let Ok(connection) = self.pool.get().await {
            let _ = connection.close(200, "benchmark row done".into()).await;
        }
        self.pool.close();
    }
}

/// A worker with prefetch `prefetch` (apalis-amqp's `prefetch_count`; it
/// runs every delivered job at once) drains `jobs` jobs from a filled
/// queue: each decoded by apalis from the message body (a job's JSON, its
/// own format; with `as_envelope`, a job whose text makes the JSON exactly
/// as long as queuey's envelope), handed to a handler that does what queuey's does (keeps
/// the job from being optimised away, counts it), then acked by apalis.
/// The clock runs from starting the worker (which opens its channel, sets
/// its QoS and consumes) until the last job is acked.
pub(crate) async fn consume(
    broker: &Broker,
    connection: &ApalisConnection,
    prefetch: u16,
    jobs: usize,
    priorities: bool,
    as_envelope: bool,
) -> BenchResult<Measured> {
    let queue = broker.fresh_queue();
    let arguments = work_queue_arguments(priorities);
    broker.declare_work_queue(&queue, priorities).await?;
    // Padded to queuey's envelope, measured once for the queue.
    let bytes = if as_envelope {
        job_message(&queue)?.0.len()
    } else {
        PAYLOAD_BYTES
    };
    broker
        .fill_with(&queue, jobs, Bodies::Json { bytes })
        .await?;
    broker.expect_ready(&queue, jobs).await?;

    let completed = Arc::new(AtomicUsize::new(0));
    let handled = Arc::clone(&completed);
    let handler = move |job: BenchJob| {
        let handled = Arc::clone(&handled);
        async move {
            std::hint::black_box(job);
            handled.fetch_add(1, Ordering::Release);
        }
    };
    let mut backend = AmqpBackend::<BenchJob>::new(connection.pool.clone()).with_config(
        Config::default()
            .queue(queue.as_str())
            .prefetch_count(prefetch)
            .declare_arguments(arguments),
    );
    // Every job's event comes once its ack was sent.
    let acked = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let last_ack = Arc::new(Mutex::new(None::<Instant>));
    let listener = {
        let (acked, failed, last_ack) = (
            Arc::clone(&acked),
            Arc::clone(&failed),
            Arc::clone(&last_ack),
        );
        move |ctx: &apalis_core::worker::context::WorkerContext, event: &Event| match event {
            Event::Success(_) => {
                *last_ack.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                if acked.fetch_add(1, Ordering::AcqRel) + 1 == jobs {
                    let _ = ctx.stop();
                }
            }
            Event::Error(_) => {
                failed.fetch_add(1, Ordering::AcqRel);
                let _ = ctx.stop();
            }
            _ => {}
        }
    };
    let clock = Stopwatch::start();
    let started = Instant::now();
    let ran = tokio::time::timeout(RUN_TIMEOUT, async {
        // A worker whose backend has no channel yet declares its queue,
        // then takes a delivery from a consumer it has not started (the
        // `Option::unwrap` in `poll_next` panics); publishing through the
        // backend first, as apalis-amqp's examples do, opens the channel.
        // Getting the sink ready is that first step without a job.
        poll_fn(|cx| Sink::<AmqpTask>::poll_ready(Pin::new(&mut backend), cx)).await?;
        let worker = WorkerBuilder::new(broker.connection_name("apalis-worker"))
            .backend(backend)
            .on_event(listener)
            .build(handler);
        worker
            .run()
            .await
            .map_err(|e| format!("the apalis worker failed: {e}"))?;
        BenchResult::Ok(())
    })
    .await;
    let mut measured = clock.stop(completed.load(Ordering::Acquire));
    ran??;
    if let Some(last) = *last_ack.lock().unwrap_or_else(|p| p.into_inner()) {
        measured.elapsed = last.duration_since(started);
    }
    let (acked, failed) = (
        acked.load(Ordering::Acquire),
        failed.load(Ordering::Acquire),
    );
    if measured.jobs != jobs || acked != jobs || failed > 0 {
        return Err(format!(
            "the apalis worker completed {} of {jobs} jobs ({acked} acked, {failed} failed)",
            measured.jobs
        )
        .into());
    }
    // Acks are sent, not confirmed: give the broker a moment to count them.
    tokio::time::sleep(Duration::from_millis(100)).await;
    broker.expect_ready(&queue, 0).await?;
    Ok(measured)
}

/// The arguments the benchmark's work queues are declared with (see
/// `Broker::declare_work_queue`), which apalis-amqp declares again.
fn work_queue_arguments(priorities: bool) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("classic")),
    );
    if priorities {
        args.insert("x-max-priority".into(), AMQPValue::LongInt(10));
    }
    args
}
