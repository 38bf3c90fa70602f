//! Counting the work a backend finishes on tasks of its own (consumers
//! being retired, acknowledgements a writer has yet to send), which closing
//! the backend, or a worker's end, waits for.

use std::sync::Arc;

use tokio::sync::watch;

/// How many retirements of a backend are under way: consumers of dropped
/// streams handing back their deliveries, writers with acknowledgements
/// to send.
#[derive(Debug, Default)]
pub(crate) struct Retirements {
    under_way: watch::Sender<usize>,
}

/// One retirement under way; it ends when dropped.
pub(crate) struct UnderWay(Arc<Retirements>);

impl Retirements {
    /// Counts one more under way, until the token it returns is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> UnderWay {
        self.under_way.send_modify(|n| *n += 1);
        UnderWay(Arc::clone(self))
    }

    /// Resolves once no retirement is under way.
    pub(crate) async fn finished(&self) {
        let mut under_way = self.under_way.subscribe();
        let _ = under_way.wait_for(|n| *n == 0).await;
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.0.under_way.send_modify(|n| *n = n.saturating_sub(1));
    }
}
