//! The lapin side: a job worker written by hand on lapin 4, the way a
//! careful user would. Producers publish persistent messages to a durable
//! queue through a pool of confirm channels (one channel per producer, one
//! publish in flight on each, `mandatory` so that an unroutable message is
//! an error), each enqueue returning once its confirm is a bare ack. The
//! worker is one channel with `basic_qos(slots)` and manual acks: each
//! delivery runs as a task of its own, decoded from JSON, and is acked once
//! its handler returned.
//!
//! lapin has no delay of its own. The Retry row does what a lapin user
//! does for a fixed delay: a durable classic hold queue per delay with
//! `x-message-ttl` and the default exchange as its dead-letter exchange
//! back to the work queue; a failed job is published there (confirmed)
//! before its delivery is acked. Every queue goes at the end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::{Semaphore, oneshot};

use crate::amqp::delete_queues;
use crate::load::{
    Attempt, CLEANUP_LIMIT, Ledger, PeerJob, Retries, SIDE_LIMIT, Tally, bounded, closed_loop,
    open_loop, peak_rss_kib, reset_peak_rss, worker_outcome,
};
use crate::side::{BoxError, Outcome, Promise, Row, Settings};

/// The longest any wait of a run may take.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// How long the Latency row lets the worker start consuming before the
/// first enqueue.
const WARM_UP: Duration = Duration::from_secs(1);

/// What the hand-written lapin worker promises on `row`.
pub fn promise(row: Row) -> Promise {
    match row {
        Row::Retry => Promise::Runs(
            "the retry waits in a classic hold queue on the broker (a TTL queue per delay, \
             dead-lettered back); publisher confirm, persistent message, durable queue",
        ),
        Row::Enqueue | Row::Completions | Row::Latency | Row::Memory => {
            Promise::Runs("publisher confirm, persistent message, durable queue")
        }
    }
}

/// Runs `row` with `settings` on a queue of its own, then deletes the run's
/// queues, whatever happened.
pub async fn run(row: Row, settings: &Settings) -> Result<Outcome, BoxError> {
    let name = format!("queuey-peers-lapin.{}", uuid::Uuid::new_v4().simple());
    let hold = format!("{name}.hold.{}", settings.retry_delay_ms);
    let measured = bounded("the run", SIDE_LIMIT, async {
        let properties = ConnectionProperties::default().with_connection_name(name.as_str().into());
        let connection = Connection::connect(&settings.amqp_url, properties).await?;
        let measured = Run::new(row, settings, &connection, &name, &hold)
            .await?
            .measure()
            .await;
        let _ = connection.close(200, "run done".into()).await;
        measured
    })
    .await;
    let cleaned = bounded(
        "deleting the queues",
        CLEANUP_LIMIT,
        delete_queues(&settings.amqp_url, &name, vec![name.clone(), hold]),
    )
    .await;
    let outcome = measured?;
    cleaned?;
    Ok(outcome)
}

/// One run: its queues declared, its publishers' channels open.
struct Run<'a> {
    row: Row,
    settings: &'a Settings,
    connection: &'a Connection,
    queue: ShortString,
    hold: ShortString,
    pool: Arc<Pool>,
}

impl<'a> Run<'a> {
    async fn new(
        row: Row,
        settings: &'a Settings,
        connection: &'a Connection,
        queue: &str,
        hold: &str,
    ) -> Result<Run<'a>, BoxError> {
        let channel = connection.create_channel().await?;
        channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions::durable(),
                FieldTable::default(),
            )
            .await?;
        if row == Row::Retry {
            let mut args = FieldTable::default();
            let ttl = i32::try_from(settings.retry_delay_ms)?;
            args.insert("x-message-ttl".into(), AMQPValue::LongInt(ttl));
            args.insert(
                "x-dead-letter-exchange".into(),
                AMQPValue::LongString(LongString::from("")),
            );
            args.insert(
                "x-dead-letter-routing-key".into(),
                AMQPValue::LongString(LongString::from(queue)),
            );
            channel
                .queue_declare(hold.into(), QueueDeclareOptions::durable(), args)
                .await?;
        }
        let _ = channel.close(200, "declared".into()).await;
        Ok(Run {
            row,
            settings,
            connection,
            queue: queue.into(),
            hold: hold.into(),
            pool: Arc::new(Pool::open(connection, settings.producers).await?),
        })
    }

    /// An enqueue of job `i` as the producers make it.
    fn enqueue(&self) -> impl Fn(usize) -> Publishing + Clone + Send + Sync + 'static {
        let (pool, queue, bytes) = (
            Arc::clone(&self.pool),
            self.queue.clone(),
            self.settings.payload_bytes,
        );
        move |i| {
            let (pool, queue) = (Arc::clone(&pool), queue.clone());
            Box::pin(async move {
                let body = serde_json::to_vec(&PeerJob::new(i, bytes))?;
                pool.publish(&queue, &body, persistent()).await
            })
        }
    }

    async fn measure(self) -> Result<Outcome, BoxError> {
        let (row, settings) = (self.row, self.settings);
        let jobs = settings.jobs;
        let enqueue = self.enqueue();
        if row == Row::Enqueue {
            let elapsed = bounded(
                "enqueueing",
                RUN_LIMIT,
                closed_loop(settings.producers, jobs, enqueue),
            )
            .await?;
            self.pool.close().await;
            return Ok(Outcome::enqueued(jobs, elapsed));
        }
        if row != Row::Latency {
            bounded(
                "enqueueing the backlog",
                RUN_LIMIT,
                closed_loop(settings.producers, jobs, enqueue.clone()),
            )
            .await?;
        }
        if row == Row::Memory {
            reset_peak_rss()?;
        }
        let handler = Arc::new(Handler {
            row,
            ledger: Ledger::new(jobs),
            retries: Retries::new(jobs),
            tally: Tally::new(jobs),
            pool: Arc::clone(&self.pool),
            hold: self.hold.clone(),
        });
        let started = Instant::now();
        let channel = self.connection.create_channel().await?;
        let prefetch = u16::try_from(settings.slots)?;
        channel
            .basic_qos(prefetch, BasicQosOptions { global: false })
            .await?;
        let consumer = channel
            .basic_consume(
                self.queue.clone(),
                ShortString::default(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let (stop, stopped) = oneshot::channel();
        let mut consuming = tokio::spawn(consume(consumer, Arc::clone(&handler), stopped));
        let worked = async {
            if row == Row::Latency {
                tokio::time::sleep(WARM_UP).await;
                let rate = settings.rate.ok_or("the Latency row needs a rate")?;
                let offered = open_loop(rate, jobs, &handler.ledger, enqueue);
                bounded("offering the jobs", RUN_LIMIT, offered).await?;
            }
            tokio::select! {
                done = handler.tally.wait_done(started, RUN_LIMIT) => done,
                ended = &mut consuming => Err(format!("the consumer stopped early: {:?}", ended?).into()),
            }
        }
        .await;
        let peak_rss_kib = peak_rss_kib();
        let _ = stop.send(());
        if !consuming.is_finished() {
            tokio::time::timeout(RUN_LIMIT, &mut consuming)
                .await
                .map_err(|_| "the consumer did not stop")???;
        }
        worked?;
        let _ = channel.close(200, "run done".into()).await;
        self.pool.close().await;
        Ok(worker_outcome(
            row,
            started,
            Duration::from_millis(settings.retry_delay_ms),
            (&handler.tally, &handler.ledger, &handler.retries),
            peak_rss_kib,
        ))
    }
}

/// A confirmed publish in progress.
type Publishing = std::pin::Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send + 'static>>;

/// Takes deliveries until told to stop, each handled by a task of its
/// own; then waits for the tasks still running. The first task that fails
/// ends it with its error.
async fn consume(
    mut consumer: lapin::Consumer,
    handler: Arc<Handler>,
    mut stop: oneshot::Receiver<()>,
) -> Result<(), BoxError> {
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(done) = running.join_next(), if !running.is_empty() => done??,
            delivery = consumer.next() => {
                let delivery = delivery.ok_or("the consumer ended")??;
                let handler = Arc::clone(&handler);
                running.spawn(async move { handler.handle(delivery).await });
            }
        }
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    Ok(())
}

/// What runs each delivery.
struct Handler {
    row: Row,
    ledger: Arc<Ledger>,
    retries: Arc<Retries>,
    tally: Arc<Tally>,
    pool: Arc<Pool>,
    hold: ShortString,
}

impl Handler {
    /// Decodes the job, runs the row's handler, then settles the delivery:
    /// an ack, or for a failed first attempt a confirmed publish to the
    /// hold queue and then an ack.
    async fn handle(&self, delivery: Delivery) -> Result<(), BoxError> {
        let job: PeerJob = serde_json::from_slice(&delivery.data)?;
        self.ledger.started(job.index);
        let failed = match self.row {
            Row::Retry => self.retries.start(job.index) == Attempt::First,
            Row::Memory => {
                self.ledger.all_started().await;
                false
            }
            Row::Enqueue | Row::Completions | Row::Latency => false,
        };
        std::hint::black_box(&job.pad);
        if failed {
            self.retries.failed(job.index);
            self.pool
                .publish(&self.hold, &delivery.data, delivery.properties.clone())
                .await?;
        }
        if !delivery.ack(BasicAckOptions::default()).await? {
            return Err("an ack was not sent".into());
        }
        if !failed {
            self.tally.completed();
        }
        Ok(())
    }
}

/// Persistent message properties.
fn persistent() -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
}

/// Confirm channels, each lent to one publish at a time.
struct Pool {
    channels: Mutex<Vec<Channel>>,
    free: Semaphore,
}

impl Pool {
    /// Opens `n` channels in confirm mode.
    async fn open(connection: &Connection, n: usize) -> Result<Pool, BoxError> {
        let mut channels = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let channel = connection.create_channel().await?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await?;
            channels.push(channel);
        }
        Ok(Pool {
            free: Semaphore::new(channels.len()),
            channels: Mutex::new(channels),
        })
    }

    /// Publishes to the default exchange, `mandatory`, and fails unless the
    /// confirm is a bare ack.
    async fn publish(
        &self,
        routing_key: &ShortString,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), BoxError> {
        let _permit = self.free.acquire().await?;
        let channel = self
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .ok_or("no free channel while holding a permit")?;
        let published = async {
            let confirm = channel
                .basic_publish(
                    ShortString::default(),
                    routing_key.clone(),
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    body,
                    properties,
                )
                .await?;
            match confirm.await? {
                Confirmation::Ack(None) => Ok(()),
                other => Err(format!("the broker did not store a message: {other:?}").into()),
            }
        }
        .await;
        self.channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(channel);
        published
    }

    async fn close(&self) {
        let channels =
            std::mem::take(&mut *self.channels.lock().unwrap_or_else(|p| p.into_inner()));
        for channel in channels {
            if channel.status().connected() {
                let _ = channel.close(200, "run done".into()).await;
            }
        }
    }
}
