//! The benchmark's own view of the broker: an admin connection that names
//! queues, declares the baseline's queues, fills queues before a consume
//! run, counts messages, and deletes every queue a run created.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::uri::AMQPUri;
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use queuey::Job;
use queuey::job::{Envelope, Uuid};

use crate::BenchResult;
use crate::queuey_side::BenchJob;

/// The job type name every benchmark message carries.
pub(crate) const JOB_TYPE: &str = <BenchJob as Job>::NAME;
/// Bytes of the job's JSON payload: `{"body":"xx…x"}`.
pub(crate) const PAYLOAD_BYTES: usize = 200;
/// Confirms in flight while filling a queue before a consume run.
const FILL_WINDOW: usize = 256;
/// How long a single broker operation of the admin connection may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The admin connection and the queues created and not yet deleted.
pub(crate) struct Broker {
    url: String,
    /// The PEM of the CA that signed the broker's certificate, for an
    /// `amqps://` url.
    ca: Option<String>,
    /// One id per benchmark process, in every connection name.
    id: String,
    admin: Connection,
    created: Mutex<Vec<String>>,
}

impl Broker {
    /// Opens the admin connection.
    pub(crate) async fn connect(url: &str) -> BenchResult<Broker> {
        Broker::connect_tls(url, None).await
    }

    /// Opens the admin connection, trusting `ca` (PEM) over TLS.
    pub(crate) async fn connect_tls(url: &str, ca: Option<String>) -> BenchResult<Broker> {
        let id = Uuid::new_v4().simple().to_string();
        let admin = connect(url, &format!("queuey-bench-{id}-admin"), ca.as_deref()).await?;
        Ok(Broker {
            url: url.to_owned(),
            ca,
            id,
            admin,
            created: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The CA certificate (PEM) trusted over TLS, if any.
    pub(crate) fn ca(&self) -> Option<&str> {
        self.ca.as_deref()
    }

    /// A lapin connection of its own to the broker, named `name`.
    pub(crate) async fn connect_named(&self, name: &str) -> BenchResult<Connection> {
        connect(&self.url, name, self.ca.as_deref()).await
    }

    /// A connection name unique to this process: `queuey-bench-{id}-{label}`.
    pub(crate) fn connection_name(&self, label: &str) -> String {
        format!("queuey-bench-{}-{label}", self.id)
    }

    /// A fresh queue name, `queuey-bench.{uuid}`, tracked for deletion.
    pub(crate) fn fresh_queue(&self) -> String {
        let name = format!("queuey-bench.{}", Uuid::new_v4().simple());
        self.track(&name);
        name
    }

    /// Tracks another queue (a dead-letter or hold queue) for deletion.
    pub(crate) fn track(&self, name: &str) {
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name.to_owned());
    }

    /// The control stream of this process's backends,
    /// `queuey-bench-{id}.control`. It and the stream of its workers'
    /// heartbeats live as long as the process's backends do, so
    /// [`close`](Broker::close) deletes them, not the end of a run.
    pub(crate) fn control_stream(&self) -> String {
        format!("queuey-bench-{}.control", self.id)
    }

    /// Declares a durable classic queue with the arguments queuey gives a
    /// work queue, written independently of queuey's code: ten priority
    /// levels (queuey's default) or, with `priorities` false, none.
    pub(crate) async fn declare_work_queue(
        &self,
        queue: &str,
        priorities: bool,
    ) -> BenchResult<()> {
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), long_string("classic"));
        if priorities {
            args.insert("x-max-priority".into(), AMQPValue::LongInt(10));
        }
        self.declare(queue, args).await
    }

    /// Declares a durable classic queue that holds each message for `ttl_ms`
    /// and then dead-letters it back to `queue`.
    pub(crate) async fn declare_hold_queue(
        &self,
        hold: &str,
        queue: &str,
        ttl_ms: i32,
    ) -> BenchResult<()> {
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), long_string("classic"));
        args.insert("x-message-ttl".into(), AMQPValue::LongInt(ttl_ms));
        args.insert("x-dead-letter-exchange".into(), long_string(""));
        args.insert("x-dead-letter-routing-key".into(), long_string(queue));
        self.declare(hold, args).await
    }

    async fn declare(&self, queue: &str, args: FieldTable) -> BenchResult<()> {
        let channel = self.admin.create_channel().await?;
        let options = QueueDeclareOptions::durable();
        bounded(
            "declaring a queue",
            channel.queue_declare(queue.into(), options, args),
        )
        .await??;
        close(&channel).await;
        Ok(())
    }

    /// Ready messages on `queue` (a passive declare).
    pub(crate) async fn ready(&self, queue: &str) -> BenchResult<u32> {
        let channel = self.admin.create_channel().await?;
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = bounded(
            "counting messages",
            channel.queue_declare(queue.into(), options, FieldTable::default()),
        )
        .await??;
        close(&channel).await;
        Ok(declared.message_count())
    }

    /// Messages the broker counts in `queues`, summed over those it lists:
    /// ready, unacknowledged and, in a quorum queue, those waiting for its
    /// dead-letter worker. Read with `rabbitmqctl`, so `None` unless the
    /// broker runs on this machine.
    pub(crate) async fn counted_in(&self, queues: &[String]) -> Option<usize> {
        let uri: AMQPUri = self.url.parse().ok()?;
        let listed = listed(&uri.vhost, "messages").await?;
        let total = queues.iter().filter_map(|q| listed.get(q)).sum::<u64>();
        usize::try_from(total).ok()
    }

    /// Checks that `queue` holds exactly `expected` ready messages.
    pub(crate) async fn expect_ready(&self, queue: &str, expected: usize) -> BenchResult<()> {
        let ready = self.ready(queue).await?;
        if ready as usize != expected {
            return Err(format!("`{queue}` holds {ready} messages, expected {expected}").into());
        }
        Ok(())
    }

    /// Publishes `jobs` job envelopes to `queue`, persistent, with up to
    /// [`FILL_WINDOW`] confirms in flight on one channel, each confirm
    /// checked. Not measured: it prepares a consume run.
    pub(crate) async fn fill(&self, queue: &str, jobs: usize) -> BenchResult<()> {
        self.fill_sized(queue, jobs, PAYLOAD_BYTES).await
    }

    /// Like [`fill`](Self::fill), with payloads of `payload_bytes`.
    pub(crate) async fn fill_sized(
        &self,
        queue: &str,
        jobs: usize,
        payload_bytes: usize,
    ) -> BenchResult<()> {
        self.fill_with(queue, jobs, Bodies::Envelope { payload_bytes })
            .await
    }

    /// Like [`fill`](Self::fill), with `bodies`. With
    /// [`FILL_CHILD`] set, a child process (this benchmark again) fills the
    /// queue, so that a profile of this process counts the consumer alone.
    pub(crate) async fn fill_with(
        &self,
        queue: &str,
        jobs: usize,
        bodies: Bodies,
    ) -> BenchResult<()> {
        if std::env::var_os(FILL_CHILD).is_none() {
            return self.fill_here(queue, jobs, bodies).await;
        }
        if self.ca.is_some() {
            return Err(format!("{FILL_CHILD} is for plain connections only").into());
        }
        let order = format!("{queue} {jobs} {}", bodies.encode());
        let url = self.url.clone();
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(std::env::current_exe()?)
                .env_remove(FILL_CHILD)
                .env(FILL_ORDER, order)
                .env("AMQP_URL", url)
                .output()
        })
        .await??;
        if !output.status.success() {
            return Err(format!(
                "the filling process failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )
            .into());
        }
        Ok(())
    }

    /// Fills a queue as the child process of [`fill_with`](Self::fill_with)
    /// was told to in `order`.
    pub(crate) async fn fill_ordered(&self, order: &str) -> BenchResult<()> {
        let mut words = order.split(' ');
        let (Some(queue), Some(jobs), Some(bodies)) = (words.next(), words.next(), words.next())
        else {
            return Err(format!("not a fill order: `{order}`").into());
        };
        let bodies =
            Bodies::decode(bodies).ok_or_else(|| format!("not a fill order: `{order}`"))?;
        self.fill_here(queue, jobs.parse()?, bodies).await
    }

    async fn fill_here(&self, queue: &str, jobs: usize, bodies: Bodies) -> BenchResult<()> {
        let channel = self.admin.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let routing_key = ShortString::from(queue);
        let mut in_flight = VecDeque::with_capacity(FILL_WINDOW);
        for _ in 0..jobs {
            let (body, properties) = bodies.message(queue)?;
            let confirm = channel
                .basic_publish(
                    ShortString::default(),
                    routing_key.clone(),
                    BasicPublishOptions::default(),
                    &body,
                    properties,
                )
                .await?;
            in_flight.push_back(confirm);
            if in_flight.len() == FILL_WINDOW
                && let Some(oldest) = in_flight.pop_front()
            {
                expect_ack(bounded("filling a queue", oldest).await??)?;
            }
        }
        for confirm in in_flight {
            expect_ack(bounded("filling a queue", confirm).await??)?;
        }
        close(&channel).await;
        Ok(())
    }

    /// Deletes every tracked queue, messages and all. A queue that is
    /// already gone (a hold queue that expired) counts as deleted.
    pub(crate) async fn delete_created(&self) -> BenchResult<()> {
        let queues = std::mem::take(&mut *self.created.lock().unwrap_or_else(|p| p.into_inner()));
        self.delete(queues).await
    }

    /// Deletes `queues`, counting one already gone as deleted.
    async fn delete(&self, queues: Vec<String>) -> BenchResult<()> {
        let mut failed = Vec::new();
        for queue in queues {
            // A fresh channel each: a refusal closes the channel it ran on.
            let deleted = async {
                let channel = self.admin.create_channel().await?;
                let result = bounded(
                    "deleting a queue",
                    channel.queue_delete(queue.as_str().into(), QueueDeleteOptions::default()),
                )
                .await?;
                close(&channel).await;
                BenchResult::Ok(result)
            }
            .await;
            match deleted {
                Ok(Ok(_)) => {}
                Ok(Err(e)) if is_not_found(&e) => {}
                Ok(Err(e)) => failed.push(format!("{queue}: {e}")),
                Err(e) => failed.push(format!("{queue}: {e}")),
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!("could not delete: {}", failed.join("; ")).into())
        }
    }

    /// Deletes the control streams of this process's backends (which
    /// must be closed by now), then closes the admin connection.
    pub(crate) async fn close(&self) {
        let stream = self.control_stream();
        let streams = vec![format!("{stream}.workers"), stream];
        if let Err(e) = self.delete(streams).await {
            eprintln!("broker_throughput: {e}");
        }
        let _ = self.admin.close(200, "benchmark done".into()).await;
    }
}

/// Set (to anything) to fill queues from a child process: see
/// [`Broker::fill_with`].
pub(crate) const FILL_CHILD: &str = "QUEUEY_BENCH_FILL_CHILD";
/// What the child process of [`Broker::fill_with`] fills.
pub(crate) const FILL_ORDER: &str = "QUEUEY_BENCH_FILL_ORDER";

/// The messages a queue is filled with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bodies {
    /// queuey's job envelopes, with a payload of `payload_bytes`.
    Envelope { payload_bytes: usize },
    /// The job's JSON alone, as apalis-amqp sends it, `bytes` long
    /// ([`PAYLOAD_BYTES`] for the job itself; longer with its text
    /// padded).
    Json { bytes: usize },
}

impl Bodies {
    /// A message for `queue`: its body and the properties of queuey's
    /// messages (persistent, a fresh message id).
    fn message(self, queue: &str) -> BenchResult<(Vec<u8>, BasicProperties)> {
        match self {
            Bodies::Envelope { payload_bytes } => job_message_sized(queue, payload_bytes),
            Bodies::Json { bytes } => {
                let body = serde_json::to_vec(&BenchJob::sized(bytes))?;
                Ok((body, message_properties(&Uuid::new_v4().to_string())))
            }
        }
    }

    fn encode(self) -> String {
        match self {
            Bodies::Envelope { payload_bytes } => payload_bytes.to_string(),
            Bodies::Json { bytes } => format!("json:{bytes}"),
        }
    }

    fn decode(word: &str) -> Option<Bodies> {
        match word {
            json if json.starts_with("json:") => json["json:".len()..]
                .parse()
                .ok()
                .map(|bytes| Bodies::Json { bytes }),
            bytes => bytes
                .parse()
                .ok()
                .map(|payload_bytes| Bodies::Envelope { payload_bytes }),
        }
    }
}

/// Opens a named lapin connection, over TLS trusting `ca` (PEM) when the
/// url is `amqps://`.
async fn connect(url: &str, name: &str, ca: Option<&str>) -> BenchResult<Connection> {
    let properties = ConnectionProperties::default().with_connection_name(name.into());
    let tls = OwnedTLSConfig {
        cert_chain: ca.map(str::to_owned),
        identity: None,
    };
    let connecting =
        Connection::connect_with_config(url, properties, tls, lapin::runtime::default_runtime()?);
    Ok(bounded("connecting", connecting).await??)
}

/// A job envelope for `queue` as the broker sees it: the encoded body and
/// the properties queuey publishes it with (persistent, its job id as
/// message id; no priority, since the job's is 0).
pub(crate) fn job_message(queue: &str) -> BenchResult<(Vec<u8>, BasicProperties)> {
    job_message_sized(queue, PAYLOAD_BYTES)
}

/// Like [`job_message`], with a payload of `payload_bytes`.
pub(crate) fn job_message_sized(
    queue: &str,
    payload_bytes: usize,
) -> BenchResult<(Vec<u8>, BasicProperties)> {
    let payload = serde_json::value::to_raw_value(&BenchJob::sized(payload_bytes))?;
    let envelope = Envelope::new(JOB_TYPE, queue, payload);
    let body = envelope.encode()?;
    Ok((body, message_properties(&envelope.job_id.to_string())))
}

/// The properties of a job message with the given message id: what queuey
/// sends for a job of priority 0.
pub(crate) fn message_properties(message_id: &str) -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_message_id(message_id.into())
}

/// Fails unless the broker stored the message: a bare ack.
pub(crate) fn expect_ack(confirmation: Confirmation) -> BenchResult<()> {
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        other => Err(format!("the broker did not store a message: {other:?}").into()),
    }
}

/// Closes a channel, ignoring a channel that is already gone.
pub(crate) async fn close(channel: &Channel) {
    if channel.status().connected() {
        let _ = channel.close(200, ShortString::default()).await;
    }
}

/// Awaits `future` for at most [`ADMIN_TIMEOUT`].
pub(crate) async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> BenchResult<T> {
    tokio::time::timeout(ADMIN_TIMEOUT, future)
        .await
        .map_err(|_| format!("{what}: no answer from the broker in {ADMIN_TIMEOUT:?}").into())
}

fn long_string(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp) if amqp.get_id() == 404)
}

/// `rabbitmqctl` with `args`: its output, if it ran and succeeded.
pub(crate) async fn rabbitmqctl(args: &[&str]) -> Option<String> {
    let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("rabbitmqctl")
            .args(&args)
            .output()
    })
    .await
    .ok()?
    .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// One numeric column of `rabbitmqctl list_queues` for `vhost`, by queue
/// name: `None` unless `rabbitmqctl` reaches the broker from this machine.
pub(crate) async fn listed(vhost: &str, column: &str) -> Option<HashMap<String, u64>> {
    let out = rabbitmqctl(&[
        "-q",
        "-p",
        vhost,
        "list_queues",
        "name",
        column,
        "--no-table-headers",
    ])
    .await?;
    out.lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(name, value)| Some((name.to_owned(), value.trim().parse().ok()?)))
        .collect()
}
