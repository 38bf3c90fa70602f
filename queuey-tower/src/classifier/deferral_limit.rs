//! The deferral layer's decision to stop deferring: an intent marker that
//! the classifier reads before anything else.

use std::fmt;

use queuey_core::BoxError;

/// A job asked to be deferred once more than its layer allows.
///
/// It classifies as a transient failure, before any classifier of yours is
/// asked about the error inside it, so the job spends an attempt instead of
/// waiting again, and is dead-lettered once it has none left.
#[derive(Debug)]
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

impl fmt::Display for DeferralLimitReached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deferred {} times already, the limit is {}",
            self.deferrals, self.max
        )
    }
}

impl std::error::Error for DeferralLimitReached {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}
