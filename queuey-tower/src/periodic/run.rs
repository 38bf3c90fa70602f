//! One schedule's loop: campaign, catch up, fire each tick, step down.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use queuey_core::backend::Backend;
use queuey_core::periodic::{Leadership, Lease};
use queuey_core::{Error, Producer, Queues};
use tokio::sync::watch;

use super::missed::{Plan, plan};
use super::periodic::Entry;
use super::rfc3339::Rfc3339;
use super::{LAG_SECONDS, LEADER, TICKS_DUPLICATE_TOTAL, TICKS_SKIPPED_TOTAL, TICKS_TOTAL};
use crate::signal::stopped;

/// The first wait before campaigning again after a failure.
const RETRY_FIRST: Duration = Duration::from_millis(200);
/// The longest wait before campaigning again.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The leadership key of a schedule: its job's queue, by its name on the
/// broker (so namespaces keep their schedules apart), and its name.
pub(crate) fn key(queue: &str, name: &str) -> String {
    format!("{queue}.periodic.{name}")
}

/// Why leading ended.
enum Ended {
    Stopped,
    Lost(Error),
}

/// Runs one schedule until `stop` turns true: campaigns for its lease,
/// fires its ticks while leading, and campaigns again whenever the lease
/// is lost. Gives up only when the backend is closed.
pub(crate) async fn run<Q, B>(
    producer: Producer<Q, B>,
    entry: Arc<dyn Entry<Q, B>>,
    mut stop: watch::Receiver<bool>,
) where
    Q: Queues,
    B: Backend + Leadership,
{
    let name = entry.name().to_owned();
    let queue = Q::ALL
        .iter()
        .find(|q| q.name() == entry.queue())
        .map_or(entry.queue(), |q| producer.queue_name(q));
    let key = key(queue, &name);
    let mut retry = RETRY_FIRST;
    loop {
        if *stop.borrow() {
            return;
        }
        let lead = tokio::select! {
            lead = producer.backend().lead(&key) => lead,
            _ = stopped(&mut stop) => return,
        };
        let mut lease = match lead {
            Ok(lease) => lease,
            Err(Error::ShutDown) => {
                tracing::debug!(schedule = %name, "the backend was closed; the schedule stops");
                return;
            }
            Err(error) => {
                tracing::warn!(schedule = %name, %error, "could not campaign for the schedule; trying again");
                if pause(retry, &mut stop).await {
                    return;
                }
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        };
        tracing::info!(schedule = %name, last_tick = lease.last_tick().map(|t| tracing::field::display(Rfc3339(t))), "leading the schedule");
        metrics::gauge!(LEADER, "schedule" => name.clone()).set(1.0);
        let ended = lead_schedule(&producer, &*entry, &mut *lease, &mut stop).await;
        metrics::gauge!(LEADER, "schedule" => name.clone()).set(0.0);
        match ended {
            Ended::Stopped => {
                lease.release().await;
                tracing::info!(schedule = %name, "stopped leading the schedule");
                return;
            }
            Ended::Lost(error) => {
                tracing::warn!(schedule = %name, %error, "lost the schedule's lease; campaigning again");
                lease.release().await;
                retry = RETRY_FIRST;
                if pause(retry, &mut stop).await {
                    return;
                }
            }
        }
    }
}

/// Fires the schedule's ticks while the lease holds.
async fn lead_schedule<Q, B>(
    producer: &Producer<Q, B>,
    entry: &dyn Entry<Q, B>,
    lease: &mut dyn Lease,
    stop: &mut watch::Receiver<bool>,
) -> Ended
where
    Q: Queues,
    B: Backend,
{
    let spec = entry.spec();
    let clock = &spec.clock;
    // A schedule that never fired starts now: nothing before counts as
    // missed.
    let mut cursor = lease.last_tick().unwrap_or_else(|| clock.now());
    loop {
        let now = clock.now();
        let due = plan(&spec.schedule, spec.missed, spec.grace, cursor, now);
        if let Err(error) = fire(producer, entry, lease, &due, || clock.now()).await {
            return Ended::Lost(error);
        }
        if let Some(through) = due.through {
            cursor = through;
        }
        let next = spec.schedule.next_after(cursor);
        let described = spec.schedule.to_string();
        if let Err(error) = lease.announce(next, &described).await {
            return Ended::Lost(error);
        }
        let Some(next) = next else {
            tracing::info!(schedule = %spec.name, "the schedule has no tick left");
            let _ = stopped(stop).await;
            return Ended::Stopped;
        };
        // Hold the lease until the tick, again if a tokio timer fired early
        // against the time of day: a tick never fires before its instant.
        loop {
            let deadline = clock.deadline(next);
            tokio::select! {
                held = lease.hold_until(deadline) => {
                    if let Err(error) = held {
                        return Ended::Lost(error);
                    }
                }
                _ = stopped(stop) => return Ended::Stopped,
            }
            if clock.now() >= next {
                break;
            }
        }
    }
}

/// Enqueues each planned tick's job and records it, then records the
/// plan's last tick if it was skipped.
async fn fire<Q, B>(
    producer: &Producer<Q, B>,
    entry: &dyn Entry<Q, B>,
    lease: &mut dyn Lease,
    due: &Plan,
    now: impl Fn() -> SystemTime,
) -> Result<(), Error>
where
    Q: Queues,
    B: Backend,
{
    let name = entry.name();
    if due.skipped > 0 {
        tracing::info!(schedule = %name, skipped = due.skipped, "missed ticks skipped");
        metrics::counter!(TICKS_SKIPPED_TOTAL, "schedule" => name.to_owned())
            .increment(due.skipped);
    }
    for &tick in &due.fire {
        let id = match entry.enqueue(producer, tick).await {
            Ok(id) => id,
            // A unique job's last tick still waits (or a failed-over leader
            // enqueued this tick): the tick's job is on the queue already.
            Err(Error::Duplicate { existing_id }) => {
                tracing::info!(schedule = %name, tick = %Rfc3339(tick), %existing_id, "tick not enqueued: a job of its key is waiting");
                metrics::counter!(TICKS_DUPLICATE_TOTAL, "schedule" => name.to_owned())
                    .increment(1);
                lease.record(tick).await?;
                continue;
            }
            Err(error) => return Err(error),
        };
        let lag = now().duration_since(tick).unwrap_or(Duration::ZERO);
        metrics::counter!(TICKS_TOTAL, "schedule" => name.to_owned()).increment(1);
        metrics::histogram!(LAG_SECONDS, "schedule" => name.to_owned()).record(lag.as_secs_f64());
        tracing::debug!(schedule = %name, job_id = %id, tick = %Rfc3339(tick), ?lag, "tick enqueued");
        lease.record(tick).await?;
    }
    if let Some(through) = due.through
        && due.fire.last() != Some(&through)
    {
        lease.record(through).await?;
    }
    Ok(())
}

/// Waits `delay`; true when stopped meanwhile.
async fn pause(delay: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => *stop.borrow(),
        _ = stopped(stop) => true,
    }
}
