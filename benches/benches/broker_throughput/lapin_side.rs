//! The baselines: the same operations written directly against lapin, with
//! the same messages on the same broker: a pool of confirm channels with one
//! publish in flight each (every confirm checked), consumers, and the retry
//! path. The pipelined publisher is in `lapin_pipelined.rs`.

use std::sync::Mutex;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use queuey::job::{Envelope, Uuid};
use tokio::sync::Semaphore;

use crate::broker::{Broker, bounded, close, expect_ack, job_message, message_properties};
use crate::queuey_side::BenchJob;
use crate::{BenchResult, Measured, RUN_TIMEOUT, Stopwatch};

/// `jobs` publishes over `channels` confirm channels, one task per channel
/// publishing its share one at a time and waiting for each confirm. Each
/// body is as long as queuey's envelope for the same job, with the same
/// properties and a fresh message id. Every channel first publishes one
/// message unmeasured, like the queuey side.
pub(crate) async fn enqueue(
    broker: &Broker,
    connection: &Connection,
    channels: usize,
    jobs: usize,
    priorities: bool,
) -> BenchResult<Measured> {
    let queue = broker.fresh_queue();
    broker.declare_work_queue(&queue, priorities).await?;
    let (body, _) = job_message(&queue)?;
    let routing_key = ShortString::from(queue.as_str());
    let opened = open_confirm_channels(connection, channels).await?;
    let warm_up = futures::future::try_join_all(
        opened
            .iter()
            .map(|channel| publish_job(channel, &routing_key, &body)),
    );
    tokio::time::timeout(RUN_TIMEOUT, warm_up).await??;

    let clock = Stopwatch::start();
    let mut running = tokio::task::JoinSet::new();
    for (task, channel) in opened.iter().enumerate() {
        let channel = channel.clone();
        let routing_key = routing_key.clone();
        let body = body.clone();
        let share = crate::share(jobs, channels, task);
        running.spawn(async move {
            for _ in 0..share {
                publish_job(&channel, &routing_key, &body).await?;
            }
            BenchResult::Ok(())
        });
    }
    let joined = tokio::time::timeout(RUN_TIMEOUT, running.join_all()).await?;
    let measured = clock.stop(jobs);
    joined.into_iter().collect::<BenchResult<Vec<()>>>()?;
    for channel in &opened {
        close(channel).await;
    }
    broker.expect_ready(&queue, jobs + channels).await?;
    Ok(measured)
}

/// One consumer with `basic_qos(prefetch)` acks `jobs` messages of a
/// filled queue, each as soon as it arrives. The acks are awaited
/// concurrently (at most `prefetch` are ever in flight, since the broker
/// sends no more), all in the consumer's task: awaiting each ack before
/// taking the next delivery would wait for lapin's I/O thread once per
/// message and measure less than lapin can do. The clock runs from opening
/// the channel to the last ack.
///
/// With `decode`, each delivery is first decoded into the job it carries,
/// as a job library on lapin (apalis-amqp's worker) does before running its
/// handler: the envelope, then the job from its payload.
pub(crate) async fn consume(
    broker: &Broker,
    connection: &Connection,
    prefetch: u16,
    jobs: usize,
    priorities: bool,
    decode: bool,
) -> BenchResult<Measured> {
    let queue = broker.fresh_queue();
    broker.declare_work_queue(&queue, priorities).await?;
    broker.fill(&queue, jobs).await?;
    broker.expect_ready(&queue, jobs).await?;

    let clock = Stopwatch::start();
    let channel = connection.create_channel().await?;
    let mut consumer = start_consumer(&channel, &queue, prefetch).await?;
    let drained = tokio::time::timeout(RUN_TIMEOUT, async {
        let mut acking = FuturesUnordered::new();
        let (mut received, mut acked) = (0, 0);
        while acked < jobs {
            tokio::select! {
                Some(sent) = acking.next() => {
                    if !sent? {
                        return Err("an ack was not sent".into());
                    }
                    acked += 1;
                }
                delivery = consumer.next(), if received < jobs => {
                    let delivery = delivery.ok_or("the consumer ended")??;
                    received += 1;
                    if decode {
                        let envelope = Envelope::decode(&delivery.data)?;
                        std::hint::black_box(envelope.payload_as::<BenchJob>()?);
                    }
                    acking.push(async move { delivery.ack(BasicAckOptions::default()).await });
                }
            }
        }
        BenchResult::Ok(())
    })
    .await;
    let measured = clock.stop(jobs);
    drained??;
    close(&channel).await;
    broker.expect_ready(&queue, 0).await?;
    Ok(measured)
}

/// The retry path by hand: each first delivery is published to a hold
/// queue (TTL `hold_ms`, dead-lettered back to the queue) on a pool of
/// `channels` confirm channels, confirmed, then acked; the message that
/// comes back (it carries the broker's `x-death` header) is acked. Up to
/// `prefetch` deliveries are handled at once, all in one task.
pub(crate) async fn retry(
    broker: &Broker,
    connection: &Connection,
    prefetch: u16,
    channels: usize,
    hold_ms: i32,
    jobs: usize,
) -> BenchResult<Measured> {
    let queue = broker.fresh_queue();
    let hold = format!("{queue}.hold");
    broker.track(&hold);
    broker.declare_work_queue(&queue, true).await?;
    broker.declare_hold_queue(&hold, &queue, hold_ms).await?;
    broker.fill(&queue, jobs).await?;
    broker.expect_ready(&queue, jobs).await?;
    let pool = Pool::open(connection, channels).await?;
    let hold_key = ShortString::from(hold.as_str());

    let clock = Stopwatch::start();
    let channel = connection.create_channel().await?;
    let mut consumer = start_consumer(&channel, &queue, prefetch).await?;
    let drained = tokio::time::timeout(RUN_TIMEOUT, async {
        let mut settling = FuturesUnordered::new();
        let mut done = 0;
        while done < jobs {
            tokio::select! {
                Some(settled) = settling.next() => {
                    if settled? {
                        done += 1;
                    }
                }
                delivery = consumer.next() => {
                    let delivery = delivery.ok_or("the consumer ended")??;
                    settling.push(settle(delivery, &pool, &hold_key));
                }
            }
        }
        BenchResult::Ok(())
    })
    .await;
    let measured = clock.stop(jobs);
    drained??;
    close(&channel).await;
    pool.close().await;
    broker.expect_ready(&queue, 0).await?;
    broker.expect_ready(&hold, 0).await?;
    Ok(measured)
}

/// Settles one delivery of the retry run; `true` when the job is done.
async fn settle(
    delivery: lapin::message::Delivery,
    pool: &Pool,
    hold: &ShortString,
) -> BenchResult<bool> {
    let returned = delivery
        .properties
        .headers()
        .as_ref()
        .is_some_and(|headers| headers.contains_key("x-death"));
    if !returned {
        let properties = delivery.properties.clone();
        pool.publish(hold, &delivery.data, properties).await?;
    }
    if !delivery.ack(BasicAckOptions::default()).await? {
        return Err("an ack was not sent".into());
    }
    Ok(returned)
}

async fn start_consumer(
    channel: &Channel,
    queue: &str,
    prefetch: u16,
) -> BenchResult<lapin::Consumer> {
    channel
        .basic_qos(prefetch, BasicQosOptions { global: false })
        .await?;
    Ok(channel
        .basic_consume(
            queue.into(),
            ShortString::default(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?)
}

async fn open_confirm_channels(connection: &Connection, n: usize) -> BenchResult<Vec<Channel>> {
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        channels.push(channel);
    }
    Ok(channels)
}

/// Publishes one job body with a fresh message id and waits for its confirm.
async fn publish_job(channel: &Channel, routing_key: &ShortString, body: &[u8]) -> BenchResult<()> {
    let properties = message_properties(&Uuid::new_v4().to_string());
    publish_confirmed(channel, routing_key, body, properties).await
}

/// Publishes to the default exchange, `mandatory`, and fails unless the
/// confirm is a bare ack.
async fn publish_confirmed(
    channel: &Channel,
    routing_key: &ShortString,
    body: &[u8],
    properties: BasicProperties,
) -> BenchResult<()> {
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
    expect_ack(bounded("waiting for a confirm", confirm).await??)
}

/// Confirm channels, each lent to one publish at a time.
struct Pool {
    channels: Mutex<Vec<Channel>>,
    free: Semaphore,
}

impl Pool {
    async fn open(connection: &Connection, n: usize) -> BenchResult<Pool> {
        Ok(Pool {
            channels: Mutex::new(open_confirm_channels(connection, n).await?),
            free: Semaphore::new(n),
        })
    }

    async fn publish(
        &self,
        routing_key: &ShortString,
        body: &[u8],
        properties: BasicProperties,
    ) -> BenchResult<()> {
        let _permit = self.free.acquire().await?;
        let channel = self
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .ok_or("no free channel while holding a permit")?;
        let published = publish_confirmed(&channel, routing_key, body, properties).await;
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
            close(&channel).await;
        }
    }
}

/// What a lapin consumer in the memory rows keeps of each delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The delivery (its body, to republish a retry or a dead letter
    /// unchanged, and its acker) and the job decoded from it: the baseline.
    DecodedAndBody,
    /// The delivery alone, never decoded: the floor under any job library.
    BodyOnly,
}

/// The memory row's baseline: one consumer with prefetch `jobs` takes
/// `jobs` jobs of `payload_bytes` and keeps what `keep` says of each until
/// all are held, then acks them. Returns the growth of the peak resident
/// set, in bytes.
pub(crate) async fn hold_all(
    broker: &Broker,
    connection: &Connection,
    jobs: usize,
    payload_bytes: usize,
    keep: Keep,
) -> BenchResult<u64> {
    let queue = broker.fresh_queue();
    broker.declare_work_queue(&queue, false).await?;
    broker.fill_sized(&queue, jobs, payload_bytes).await?;
    broker.expect_ready(&queue, jobs).await?;
    let base = crate::system::reset_peak_rss()?;
    let channel = connection.create_channel().await?;
    let mut consumer = start_consumer(&channel, &queue, u16::try_from(jobs)?).await?;
    let held = tokio::time::timeout(RUN_TIMEOUT, async {
        let mut held = Vec::with_capacity(jobs);
        while held.len() < jobs {
            let delivery = consumer.next().await.ok_or("the consumer ended")??;
            let job: Option<BenchJob> = match keep {
                Keep::DecodedAndBody => Some(Envelope::decode(&delivery.data)?.payload_as()?),
                Keep::BodyOnly => None,
            };
            held.push((delivery, job));
        }
        BenchResult::Ok(held)
    })
    .await??;
    let peak = crate::system::peak_rss()?;
    for (delivery, job) in held {
        std::hint::black_box(job);
        delivery.ack(BasicAckOptions::default()).await?;
    }
    close(&channel).await;
    broker.expect_ready(&queue, 0).await?;
    Ok(peak.saturating_sub(base))
}
