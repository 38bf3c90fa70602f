//! The worker's per-job features, each a wing on one seam.
//!
//! The consume loop and a job's run know no feature: they call the worker's
//! [`Wings`] at four points of every job.
//!
//! | wing | the job starts | beside its run | its run ends | it is settled |
//! |---|---|---|---|---|
//! | [`cancel`] | refuses a job cancelled before; hands the job its cancel signal | trips the signal when the job is cancelled | a cancelled job that did not complete is dead-lettered as cancelled | |
//! | [`reply`] | hands a job a caller waits for a slot for its output | | the reply the final disposition calls for | sends it |
//! | [`progress`] | hands a job someone can see a progress reporter | sends each report to a caller waiting for the job | | |
//! | [`ledger`] | lists the job among the running ones the heartbeats report, with its progress reporter | | takes it off the list | counts it in its queue's totals |
//! | [`unique`] | | | a unique job done for good keeps its envelope | gives its key back |
//! | [`history`] | hands the job's request a slot for its attempt's error | | a job to be retried records that error in its envelope | |
//!
//! A feature is a file here with a [`Wing`], placed in [`Wings`], whose
//! order each point follows: a wing that changes a disposition or fills
//! [`Extras`] comes before those that read it.

mod cancel;
mod history;
mod ledger;
mod progress;
mod reply;
pub(crate) mod unique;

use std::future::Future;
use std::sync::Arc;

use queuey_core::backend::{Backend, Delivery};
use queuey_core::control::{CancelSignal, ControlView, ProgressReporter};
use queuey_core::{Disposition, Envelope, JobContext, Uuid};

use super::handle::HandleInner;
use super::heartbeat::Ledger;
use crate::failure_slot::FailureSlot;
use crate::reply_slot::ReplySlot;

pub(crate) use unique::UniqueKeys;

/// Every wing of a worker, in order.
pub(crate) type Wings = (
    cancel::CancelWing,
    (
        reply::ReplyWing,
        (
            progress::ProgressWing,
            (
                ledger::LedgerWing,
                (unique::UniqueWing, history::HistoryWing),
            ),
        ),
    ),
);

/// The wings of a worker: control commands, replies and progress through
/// `backend`, the heartbeats' `ledger` of its `queues`, the unique keys.
pub(crate) fn wings(
    control: Option<ControlView>,
    handle: &Arc<HandleInner>,
    backend: Arc<dyn Backend>,
    ledger: &Arc<Ledger>,
    queues: &[Arc<str>],
    unique_keys: Option<UniqueKeys>,
) -> Wings {
    (
        cancel::CancelWing {
            view: control,
            handle: Arc::clone(handle),
        },
        (
            reply::ReplyWing::new(Arc::clone(&backend)),
            (
                progress::ProgressWing::new(backend),
                (
                    ledger::LedgerWing::new(ledger, queues),
                    (
                        unique::UniqueWing { keys: unique_keys },
                        history::HistoryWing,
                    ),
                ),
            ),
        ),
    )
}

/// Whether a job settled as `disposition` is done for good (acknowledged or
/// dead-lettered).
pub(crate) fn done_for_good(disposition: &Disposition) -> bool {
    matches!(
        disposition,
        Disposition::Ack | Disposition::DeadLetter { .. }
    )
}

/// A job about to start, as the wings see it.
pub(crate) struct Starting<'a> {
    pub(crate) envelope: &'a Envelope,
    /// The logical queue it was consumed for.
    pub(crate) queue: &'a Arc<str>,
    /// Its handler's job type; `None` when no handler of this worker takes it.
    pub(crate) job_type: Option<&'static str>,
    /// Whether a wing refused it: it goes straight to its end, unrun.
    pub(crate) refused: bool,
}

/// What the wings hand a starting job's context.
#[derive(Default)]
pub(crate) struct Extras {
    /// Where the handler's output goes, for a job a caller waits for.
    pub(crate) reply: Option<ReplySlot>,
    /// Trips when an operator cancels the job while it runs.
    pub(crate) cancel: Option<CancelSignal>,
    /// Where the handler reports its progress, for a job someone can see.
    pub(crate) progress: Option<ProgressReporter>,
    /// Where a retry layer notes the error of the attempt it retries.
    pub(crate) failure: Option<FailureSlot>,
}

impl Extras {
    /// The job's context `ctx`, with what the wings made for it (the reply
    /// slot stays: it goes to the request).
    pub(crate) fn context(&mut self, ctx: JobContext) -> JobContext {
        ctx.with_cancel_signal(self.cancel.take().unwrap_or_default())
            .with_progress(self.progress.take().unwrap_or_default())
    }
}

/// A job whose run ended, as the wings see it.
pub(crate) struct Ended<'a> {
    carrier: &'a mut dyn Carrier,
    pub(crate) queue: &'a Arc<str>,
}

impl<'a> Ended<'a> {
    /// The job held by `carrier` (its delivery), consumed for `queue`.
    pub(crate) fn new(carrier: &'a mut dyn Carrier, queue: &'a Arc<str>) -> Self {
        Ended { carrier, queue }
    }

    /// The job's envelope, as delivered.
    pub(crate) fn envelope(&self) -> &Envelope {
        self.carrier.envelope()
    }

    /// The envelope the backend publishes the job's next attempt from, if
    /// its deliveries let it change.
    pub(crate) fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        self.carrier.envelope_mut()
    }
}

/// What holds a job's envelope when its run ends: its delivery (an envelope
/// in tests).
pub(crate) trait Carrier {
    fn envelope(&self) -> &Envelope;
    fn envelope_mut(&mut self) -> Option<&mut Envelope>;
}

impl Carrier for Box<dyn Delivery> {
    fn envelope(&self) -> &Envelope {
        (**self).envelope()
    }

    fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        (**self).envelope_mut()
    }
}

impl Carrier for Envelope {
    fn envelope(&self) -> &Envelope {
        self
    }

    fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        Some(self)
    }
}

/// A job settled on the broker, as the wings see it.
pub(crate) struct Settled<'a> {
    pub(crate) queue: &'a Arc<str>,
    pub(crate) job_id: Uuid,
    /// What it was settled as ([`Disposition::as_str`]).
    pub(crate) what: &'static str,
}

/// One per-job feature of the worker.
pub(crate) trait Wing: Send + Sync + 'static {
    /// What the wing keeps of one job, from its start until it is settled.
    type Job: Send + Sync + 'static;

    /// Why the job must not run (a dead-letter reason), if it must not.
    /// Asked of every wing before any starts it.
    fn refuses(&self, job: &Starting<'_>) -> Option<String> {
        let _ = job;
        None
    }

    /// The job starts (or, refused, goes to its end): the wing sets up what
    /// it keeps and what the job's context gets.
    fn start(&self, job: &Starting<'_>, extras: &mut Extras) -> Self::Job;

    /// Runs beside the job until the job's run ends; it never ends the run.
    fn beside<'a>(
        &'a self,
        state: &'a Self::Job,
        envelope: &'a Envelope,
    ) -> impl Future<Output = ()> + Send + 'a {
        let _ = (state, envelope);
        std::future::pending()
    }

    /// The run ended with `disposition` (classified, never early), which the
    /// wing may change.
    fn run_ended(
        &self,
        state: &mut Self::Job,
        disposition: Disposition,
        job: &mut Ended<'_>,
    ) -> Disposition {
        let _ = (state, job);
        disposition
    }

    /// The job was settled on the broker as decided.
    fn settled<'a>(
        &'a self,
        state: Self::Job,
        job: &'a Settled<'a>,
    ) -> impl Future<Output = ()> + Send + 'a {
        let _ = (state, job);
        async {}
    }
}

impl<A: Wing, B: Wing> Wing for (A, B) {
    type Job = (A::Job, B::Job);

    fn refuses(&self, job: &Starting<'_>) -> Option<String> {
        self.0.refuses(job).or_else(|| self.1.refuses(job))
    }

    fn start(&self, job: &Starting<'_>, extras: &mut Extras) -> Self::Job {
        (self.0.start(job, extras), self.1.start(job, extras))
    }

    async fn beside(&self, state: &Self::Job, envelope: &Envelope) {
        futures::future::join(
            self.0.beside(&state.0, envelope),
            self.1.beside(&state.1, envelope),
        )
        .await;
    }

    fn run_ended(
        &self,
        state: &mut Self::Job,
        disposition: Disposition,
        job: &mut Ended<'_>,
    ) -> Disposition {
        let disposition = self.0.run_ended(&mut state.0, disposition, job);
        self.1.run_ended(&mut state.1, disposition, job)
    }

    async fn settled(&self, state: Self::Job, job: &Settled<'_>) {
        self.0.settled(state.0, job).await;
        self.1.settled(state.1, job).await;
    }
}

/// Runs `job` with `wings`' [`beside`](Wing::beside) futures beside it,
/// until the job ends.
pub(crate) async fn run_beside<W: Wing, F: Future>(
    wings: &W,
    state: &W::Job,
    envelope: &Envelope,
    job: F,
) -> F::Output {
    let beside = wings.beside(state, envelope);
    tokio::pin!(job, beside);
    let mut beside_over = false;
    loop {
        tokio::select! {
            biased;
            output = &mut job => return output,
            () = &mut beside, if !beside_over => beside_over = true,
        }
    }
}
