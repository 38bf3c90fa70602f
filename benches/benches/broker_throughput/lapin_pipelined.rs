//! The best correct way to publish with lapin: one confirm channel owned by
//! one task that keeps [`WINDOW`] publishes in flight and decides each one
//! only after polling every outstanding confirmation, attributing returned
//! messages by message id. Producer tasks hand it requests over a queue.
//! This is the enqueue baseline queuey's defaults are measured against.

use std::collections::HashSet;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{Channel, Confirmation, Connection, PublisherConfirm};
use queuey::job::Uuid;
use tokio::sync::{mpsc, oneshot};

use crate::broker::{Broker, close, job_message, message_properties};
use crate::{BenchResult, Measured, RUN_TIMEOUT, Stopwatch};

/// Publishes in flight on the channel.
const WINDOW: usize = 64;

/// A publish and whether it was stored.
type Request = (String, oneshot::Sender<bool>);

/// `jobs` publishes from `tasks` producer tasks through one owned channel.
/// Every producer first publishes one message unmeasured.
pub(crate) async fn enqueue(
    broker: &Broker,
    connection: &Connection,
    tasks: usize,
    jobs: usize,
    priorities: bool,
) -> BenchResult<Measured> {
    let queue = broker.fresh_queue();
    broker.declare_work_queue(&queue, priorities).await?;
    let (body, _) = job_message(&queue)?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let (requests, queued) = mpsc::channel::<Request>(WINDOW);
    let owner = tokio::spawn(own(
        channel.clone(),
        ShortString::from(queue.as_str()),
        body,
        queued,
    ));
    let publish = |requests: mpsc::Sender<Request>| async move {
        let (reply, stored) = oneshot::channel();
        requests.send((Uuid::new_v4().to_string(), reply)).await?;
        if stored.await? {
            BenchResult::Ok(())
        } else {
            Err("the broker did not store a message".into())
        }
    };
    let warm_up = futures::future::try_join_all((0..tasks).map(|_| publish(requests.clone())));
    tokio::time::timeout(RUN_TIMEOUT, warm_up).await??;

    let clock = Stopwatch::start();
    let mut running = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let requests = requests.clone();
        let share = crate::share(jobs, tasks, task);
        running.spawn(async move {
            for _ in 0..share {
                publish(requests.clone()).await?;
            }
            BenchResult::Ok(())
        });
    }
    let joined = tokio::time::timeout(RUN_TIMEOUT, running.join_all()).await?;
    let measured = clock.stop(jobs);
    joined.into_iter().collect::<BenchResult<Vec<()>>>()?;
    drop(requests);
    owner.await??;
    close(&channel).await;
    broker.expect_ready(&queue, jobs + tasks).await?;
    Ok(measured)
}

/// A publish in flight: its message id, confirmation and reply.
type InFlight = (String, PublisherConfirm, oneshot::Sender<bool>);

/// The owning task: publishes each request, keeps up to [`WINDOW`]
/// confirmations outstanding, and answers each once decided.
async fn own(
    channel: Channel,
    routing_key: ShortString,
    body: Vec<u8>,
    mut queued: mpsc::Receiver<Request>,
) -> BenchResult<()> {
    let mut in_flight: Vec<InFlight> = Vec::with_capacity(WINDOW);
    let mut returned = HashSet::new();
    let mut open = true;
    while open || !in_flight.is_empty() {
        tokio::select! {
            biased;
            completed = sweep(&mut in_flight, &mut returned), if !in_flight.is_empty() => {
                for (id, acked, reply) in completed {
                    let _ = reply.send(acked && !returned.remove(&id));
                }
            }
            request = queued.recv(), if open && in_flight.len() < WINDOW => match request {
                Some((id, reply)) => {
                    let confirm = channel
                        .basic_publish(
                            ShortString::default(),
                            routing_key.clone(),
                            BasicPublishOptions { mandatory: true, immediate: false },
                            &body,
                            message_properties(&id),
                        )
                        .await?;
                    in_flight.push((id, confirm, reply));
                }
                None => open = false,
            },
        }
    }
    Ok(())
}

/// Polls every outstanding confirmation until a full pass finds none newly
/// complete; records the message id of every return found on any of them.
fn sweep<'a>(
    in_flight: &'a mut Vec<InFlight>,
    returned: &'a mut HashSet<String>,
) -> impl Future<Output = Vec<(String, bool, oneshot::Sender<bool>)>> + 'a {
    poll_fn(move |cx| {
        let mut completed = Vec::new();
        loop {
            let before = completed.len();
            let mut i = 0;
            while i < in_flight.len() {
                match Pin::new(&mut in_flight[i].1).poll(cx) {
                    Poll::Ready(result) => {
                        let (id, _, reply) = in_flight.swap_remove(i);
                        let acked = match result {
                            Ok(Confirmation::Ack(r)) => {
                                note(returned, r);
                                true
                            }
                            Ok(Confirmation::Nack(r)) => {
                                note(returned, r);
                                false
                            }
                            _ => false,
                        };
                        completed.push((id, acked, reply));
                    }
                    Poll::Pending => i += 1,
                }
            }
            if completed.len() == before {
                break;
            }
        }
        if completed.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(completed)
        }
    })
}

fn note(returned: &mut HashSet<String>, message: Option<lapin::message::BasicReturnMessage>) {
    if let Some(id) = message.and_then(|m| m.delivery.properties.message_id().clone()) {
        returned.insert(id.to_string());
    }
}
