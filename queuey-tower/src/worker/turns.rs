//! Turns between the broker queues of one sharded queue, by the weight of
//! each one's tenant.
//!
//! A producer sends a tenant's jobs to one shard (its
//! [`tenant`](queuey_core::EnqueueOptions::tenant) picks it), so a
//! tenant's backlog waits in its own broker queue. The worker consumes
//! every shard and keeps at most one delivery of each at hand; each time
//! the queue's loop asks for the next job, these rules pick it:
//!
//! 1. Only a shard with a delivery at hand takes part: a lone busy tenant
//!    gets every turn (no slot idles while work waits).
//! 2. Of those, the shard whose *pass* is lowest goes next (the first in
//!    order on a tie), and its pass then grows by [`STRIDE`] divided by the
//!    weight of the tenant of the delivery it gave: over any stretch in
//!    which shards stay busy, each gets turns in proportion to its weight.
//! 3. A shard that had nothing at hand and gets a delivery starts again at
//!    the pass of the last turn given, never below: waiting banks no
//!    turns, and a tenant that was quiet goes next, however long the
//!    others' backlogs are.
//!
//! Shards without tenants count with weight 1, so an unweighted sharded
//! queue takes its shards in turn. Deliveries held at hand are unsettled:
//! dropping the stream hands them back like any other.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use queuey_core::backend::{Delivery, DeliveryStream};
use queuey_core::{Error, QueueConfig};

/// How far a weight-1 tenant's pass moves per turn; a weight `w` moves it
/// `STRIDE / w`.
const STRIDE: u64 = 1 << 20;

/// The largest weight a tenant can have; larger ones count as this.
pub const MAX_TENANT_WEIGHT: u32 = 1_000;

/// The weight of each tenant, as given to
/// [`WorkerBuilder::tenant_weights`](super::WorkerBuilder::tenant_weights).
pub(crate) type TenantWeights = Arc<dyn Fn(&str) -> u32 + Send + Sync>;

/// What a queue's loop consumes: its broker queues (the queue itself, or a
/// sharded queue's lane and shards) and the weights turns between them
/// follow.
pub(crate) struct Intake {
    pub(crate) queues: Vec<QueueConfig>,
    pub(crate) weights: Option<TenantWeights>,
}

/// One stream of the deliveries of `streams`, taken in weighted turns;
/// it ends when the first of them ends.
pub(crate) fn take_turns(
    streams: Vec<DeliveryStream>,
    weights: Option<TenantWeights>,
) -> DeliveryStream {
    let lanes = streams
        .into_iter()
        .map(|stream| Lane {
            stream,
            head: None,
            pass: 0,
        })
        .collect();
    Box::pin(Turns {
        lanes,
        weights,
        now: 0,
        ended: false,
    })
}

struct Lane {
    stream: DeliveryStream,
    /// The delivery at hand.
    head: Option<Box<dyn Delivery>>,
    pass: u64,
}

struct Turns {
    lanes: Vec<Lane>,
    weights: Option<TenantWeights>,
    /// The pass of the last turn given.
    now: u64,
    ended: bool,
}

/// How far a turn moves the pass of the shard that gave `delivery`.
fn stride(weights: Option<&TenantWeights>, delivery: &dyn Delivery) -> u64 {
    let weight = match (weights, delivery.envelope().tenant.as_deref()) {
        (Some(weights), Some(tenant)) => weights(tenant).clamp(1, MAX_TENANT_WEIGHT),
        _ => 1,
    };
    STRIDE / u64::from(weight)
}

impl Stream for Turns {
    type Item = Result<Box<dyn Delivery>, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        for lane in this.lanes.iter_mut().filter(|lane| lane.head.is_none()) {
            match lane.stream.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(delivery))) => {
                    lane.pass = lane.pass.max(this.now);
                    lane.head = Some(delivery);
                }
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => {}
            }
        }
        let next = this
            .lanes
            .iter_mut()
            .filter(|lane| lane.head.is_some())
            .min_by_key(|lane| lane.pass);
        let Some((lane, delivery)) = next.and_then(|lane| lane.head.take().map(|d| (lane, d)))
        else {
            return Poll::Pending;
        };
        this.now = lane.pass;
        lane.pass = lane
            .pass
            .saturating_add(stride(this.weights.as_ref(), &*delivery));
        Poll::Ready(Some(Ok(delivery)))
    }
}
