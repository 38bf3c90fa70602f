use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use queuey_core::Producer;
use queuey_core::backend::Backend;
use queuey_core::memory::MemoryBackend;
use queuey_core::periodic::Schedule;
use queuey_core::{Job, Queues, Uuid};
use queuey_tower::periodic::{Clock, Missed, Periodic, Scheduler, SchedulerHandle};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "p")]
pub(crate) enum PQueues {
    #[queue(prefetch = 1000)]
    Work,
}

#[derive(Job, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[job(queue = PQueues::Work, name = "tick")]
pub(crate) struct Tick {
    pub(crate) at_ms: u64,
}

pub(crate) const QUEUE: &str = "p.work";

/// A start instant on a whole second.
pub(crate) fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

pub(crate) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Takes every job ready on the queue: (job id, the tick it is for).
pub(crate) async fn drain(backend: &Arc<MemoryBackend>) -> Vec<(Uuid, u64)> {
    let mut out = Vec::new();
    let n = backend.ready_count(QUEUE);
    if n == 0 {
        return out;
    }
    let mut stream = backend.consume(&PQueues::Work.config()).await.unwrap();
    for _ in 0..n {
        let d = stream.next().await.unwrap().unwrap();
        let job: Tick = d.envelope().payload_as().unwrap();
        out.push((d.envelope().job_id, job.at_ms));
        d.ack().await.unwrap();
    }
    out
}

/// Starts a scheduler with one periodic job, `beat`, every second.
pub(crate) fn spawn(
    backend: &Arc<MemoryBackend>,
    clock: &Clock,
    missed: Missed,
) -> (SchedulerHandle, JoinHandle<Result<(), queuey_core::Error>>) {
    let producer = Producer::<PQueues, _>::new_undeclared(backend.clone());
    let scheduler = Scheduler::new(producer).periodic(
        Periodic::for_tick(
            "beat",
            Schedule::every(Duration::from_secs(1)).unwrap(),
            |t| Tick { at_ms: ms(t) },
        )
        .missed(missed)
        .clock(clock.clone()),
    );
    let handle = scheduler.handle();
    (handle, tokio::spawn(scheduler.run()))
}
