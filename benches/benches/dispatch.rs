//! Per-job costs on the hot path, without a broker:
//!
//! - the dispatch stack around a no-op handler: the bare handler service,
//!   the worker's default layers (trace with no subscriber, metrics with no
//!   recorder, dead-letter, retry, deferral), the same plus a timeout, and
//!   the worker's own `DefaultStack` (which is those six layers), each
//!   cloned for every job; and the bare handler and `DefaultStack` owned
//!   and called in place, as the worker calls them;
//! - envelope encoding and decoding at 200 B and 20 KB payloads, and the
//!   consumer's decoding that takes the body (`decode_taking`);
//! - rounding a delay to a hold;
//! - the RabbitMQ topology functions (queue names, room checks, queue
//!   arguments), which run on every declaration and every hold publish;
//! - a memory-backend round trip: enqueue, consume, ack.
//!
//! ```sh
//! cargo bench -p queuey-bench --bench dispatch
//! ```

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use queuey::JobHandler;
use queuey::backend::{Backend, hold_delay_ms, round_up_ms};
use queuey::handler::{Disposition, HandlerService, JobRequest};
use queuey::job::{Envelope, Uuid};
use queuey::layers::{dead_letter::DeadLetterLayer, metrics::MetricsLayer, trace::TraceLayer};
use queuey::prelude::*;
use queuey::worker::DefaultStack;
use serde::{Deserialize, Serialize};
use tower::timeout::TimeoutLayer;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "bench")]
enum BenchQueues {
    #[queue(prefetch = 64)]
    Work,
}

#[derive(Job, Serialize, Deserialize, Clone)]
#[job(queue = BenchQueues::Work, name = "noop")]
struct Noop {
    body: String,
}

struct NoopHandler;

impl JobHandler for NoopHandler {
    type Job = Noop;

    async fn handle(&self, job: Noop, _ctx: JobContext) -> Result<(), JobError> {
        black_box(job);
        Ok(())
    }
}

fn request(queue: &Arc<str>) -> JobRequest<Noop> {
    JobRequest::new(
        Noop {
            body: String::new(),
        },
        JobContext::new(Uuid::nil(), Arc::clone(queue)),
    )
}

async fn call<S>(service: &S, queue: &Arc<str>)
where
    S: Service<JobRequest<Noop>, Response = Disposition, Error = queuey::handler::BoxError> + Clone,
{
    let answer = service.clone().oneshot(request(queue)).await;
    black_box(answer.ok());
}

/// One job through a stack owned and called in place, as the worker calls
/// each job type's stack: no clone per job.
async fn call_owned<S>(service: &RefCell<S>, queue: &Arc<str>)
where
    S: Service<JobRequest<Noop>, Response = Disposition, Error = queuey::handler::BoxError>,
{
    let ready = std::future::poll_fn(|cx| service.borrow_mut().poll_ready(cx)).await;
    if ready.is_err() {
        return;
    }
    let answer = service.borrow_mut().call(request(queue));
    black_box(answer.await.ok());
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let queue: Arc<str> = Arc::from("bench.work");
    let bare = HandlerService::new(NoopHandler);
    let default_layers = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .layer(MetricsLayer::new())
        .layer(DeadLetterLayer::new())
        .layer(RetryLayer::default())
        .layer(DeferOn429::new());
    let default_stack = default_layers
        .clone()
        .service(HandlerService::new(NoopHandler));
    let with_timeout = default_layers
        .layer(TimeoutLayer::new(Duration::from_secs(300)))
        .service(HandlerService::new(NoopHandler));
    // What `Worker` builds when no `.layer(..)` is given: the same layers
    // in the same order, from the worker's own definition.
    let worker_default = DefaultStack::default().layer(HandlerService::new(NoopHandler));
    let worker_owned =
        RefCell::new(DefaultStack::default().layer(HandlerService::new(NoopHandler)));
    let bare_owned = RefCell::new(HandlerService::new(NoopHandler));

    let mut group = c.benchmark_group("dispatch");
    group.throughput(Throughput::Elements(1));
    group.bench_function("bare_handler", |b| {
        b.to_async(&runtime).iter(|| call(&bare, &queue))
    });
    group.bench_function("default_stack", |b| {
        b.to_async(&runtime).iter(|| call(&default_stack, &queue))
    });
    group.bench_function("default_stack_with_timeout", |b| {
        b.to_async(&runtime).iter(|| call(&with_timeout, &queue))
    });
    group.bench_function("worker_default_stack", |b| {
        b.to_async(&runtime).iter(|| call(&worker_default, &queue))
    });
    group.bench_function("bare_handler_owned", |b| {
        b.to_async(&runtime)
            .iter(|| call_owned(&bare_owned, &queue))
    });
    group.bench_function("worker_default_stack_owned", |b| {
        b.to_async(&runtime)
            .iter(|| call_owned(&worker_owned, &queue))
    });
    group.finish();
}

fn envelope(c: &mut Criterion) {
    let mut group = c.benchmark_group("envelope");
    for size in [200usize, 20 * 1024] {
        let job = Noop {
            body: "x".repeat(size),
        };
        let payload = serde_json::value::to_raw_value(&job).expect("encodable");
        let env = Envelope::new("noop", "bench.work", payload);
        let bytes = env.encode().expect("encodable");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("encode", size), &env, |b, env| {
            b.iter(|| black_box(env.encode()))
        });
        group.bench_with_input(BenchmarkId::new("decode", size), &bytes, |b, bytes| {
            b.iter(|| black_box(Envelope::decode(bytes)))
        });
        // What the consumer does: take the body, keep the bytes around the
        // payload, and (from 4 KiB) keep the payload in the body's memory.
        group.bench_with_input(
            BenchmarkId::new("decode_taking", size),
            &bytes,
            |b, bytes| {
                b.iter_batched(
                    || bytes.to_vec(),
                    |body| black_box(Envelope::decode_taking(body).is_ok()),
                    criterion::BatchSize::SmallInput,
                )
            },
        );
        group.bench_with_input(BenchmarkId::new("next_attempt", size), &env, |b, env| {
            b.iter(|| black_box(env.next_attempt()))
        });
    }
    group.finish();
}

fn holds(c: &mut Criterion) {
    let mut group = c.benchmark_group("holds");
    let second = Duration::from_secs(1);
    group.bench_function("round_up_ms", |b| {
        b.iter(|| black_box(round_up_ms(black_box(Duration::from_millis(1_234)), second)))
    });
    group.bench_function("hold_delay_ms", |b| {
        b.iter(|| {
            black_box(hold_delay_ms(
                "bench.work",
                black_box(Duration::from_millis(1_234)),
                second,
            ))
        })
    });
    group.finish();
}

/// The pure functions of `queuey_rabbitmq::topology`: a retry computes a
/// hold name and its arguments (and declares it) before every hold publish;
/// `declare` computes the rest once per queue.
fn rabbitmq_topology(c: &mut Criterion) {
    use queuey::rabbitmq::topology;

    let queue = "bench.work";
    let config = BenchQueues::Work.config();
    let mut group = c.benchmark_group("rabbitmq_topology");
    group.bench_function("dead_letter_queue_name", |b| {
        b.iter(|| black_box(topology::dead_letter_queue_name(black_box(queue), ".dead")))
    });
    group.bench_function("hold_queue_name", |b| {
        b.iter(|| {
            black_box(queuey::rabbitmq::HoldQueues::Quorum.name(
                black_box(queue),
                ".deferred",
                black_box(30_000),
            ))
        })
    });
    group.bench_function("check_room", |b| {
        b.iter(|| {
            black_box(topology::check_room(
                black_box(queue),
                ".deferred",
                Some(".dead"),
                Some(".suspect"),
                queuey::rabbitmq::HoldQueues::Quorum,
            ))
        })
    });
    group.bench_function("work_queue_arguments", |b| {
        b.iter(|| {
            black_box(topology::work_queue_arguments(
                black_box(&config),
                Some("bench.work.dead"),
            ))
        })
    });
    group.bench_function("dead_letter_queue_arguments", |b| {
        b.iter(|| black_box(topology::dead_letter_queue_arguments(black_box(&config))))
    });
    group.bench_function("hold_queue_arguments", |b| {
        b.iter(|| {
            black_box(
                queuey::rabbitmq::HoldQueues::Quorum.arguments(black_box(queue), black_box(30_000)),
            )
        })
    });
    // Everything a retry computes before it declares and publishes its hold.
    group.bench_function("per_hold_publish", |b| {
        b.iter(|| {
            let ttl = hold_delay_ms(
                black_box(queue),
                black_box(Duration::from_millis(1_234)),
                Duration::from_secs(1),
            )
            .expect("a valid delay");
            let holds = queuey::rabbitmq::HoldQueues::Quorum;
            let name = holds.name(queue, ".deferred", ttl).expect("room");
            black_box((name, holds.arguments(queue, ttl)))
        })
    });
    group.finish();
}

fn memory_round_trip(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let backend = Arc::new(MemoryBackend::new());
    let producer = runtime
        .block_on(Producer::<BenchQueues, _>::new(backend.clone()))
        .expect("declared");
    let stream = runtime
        .block_on(backend.consume(&BenchQueues::Work.config()))
        .expect("consuming");
    let stream = tokio::sync::Mutex::new(stream);
    let job = Noop {
        body: "x".repeat(200),
    };

    let mut group = c.benchmark_group("memory_backend");
    group.throughput(Throughput::Elements(1));
    group.bench_function("enqueue_consume_ack", |b| {
        b.to_async(&runtime).iter(|| async {
            producer.enqueue(&job).await.expect("enqueued");
            let delivery = stream
                .lock()
                .await
                .next()
                .await
                .expect("a delivery")
                .expect("no error");
            delivery.ack().await.expect("acked");
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    dispatch,
    envelope,
    holds,
    rabbitmq_topology,
    memory_round_trip
);
criterion_main!(benches);
