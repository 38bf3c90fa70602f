//! The deferral layer's decision to stop deferring: an intent marker that
//! the classifier reads before anything else.

use queuey_core::BoxError;

/// A job asked to be deferred once more than its layer allows.
///
/// A transient failure whatever your classifier says of the error inside:
/// the job spends an attempt instead of waiting again.
#[derive(Debug, thiserror::Error)]
#[error("deferred {deferrals} times already, the limit is {max}")]
pub struct DeferralLimitReached {
    deferrals: u32,
    max: u32,
    source: BoxError,
}

impl DeferralLimitReached {
    pub(crate) fn new(deferrals: u32, max: u32, source: BoxError) -> Self {
        DeferralLimitReached {
            deferrals,
            max,
            source,
        }
    }

    /// How often the job was deferred already.
    pub fn deferrals(&self) -> u32 {
        self.deferrals
    }

    /// The layer's limit.
    pub fn max(&self) -> u32 {
        self.max
    }
}
