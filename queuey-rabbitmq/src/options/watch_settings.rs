//! The hold watchdog's settings as a backend keeps them, and their
//! defaults. The management URL may carry a password, so its `Debug`
//! output masks it.

use std::fmt;
use std::time::Duration;

use queuey_core::uri::redact;

/// The default pause between two reads of the management API by the hold
/// watchdog: 30 s.
pub const DEFAULT_HOLD_WATCH_INTERVAL: Duration = Duration::from_secs(30);

/// The default time a quorum hold may hold expired jobs without releasing
/// any before the watchdog reports it as stalled: 60 s. With the default
/// interval, a hold that stops releasing is reported within about two
/// minutes of its first job being due.
pub const DEFAULT_HOLD_STALL_AFTER: Duration = Duration::from_secs(60);

/// The hold watchdog's settings, one field of
/// [`RabbitMqOptions`](crate::RabbitMqOptions).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HoldWatchSettings {
    pub(crate) enabled: bool,
    pub(crate) management_url: Option<String>,
    pub(crate) interval: Duration,
    pub(crate) stall_after: Duration,
}

impl Default for HoldWatchSettings {
    fn default() -> Self {
        HoldWatchSettings {
            enabled: true,
            management_url: None,
            interval: DEFAULT_HOLD_WATCH_INTERVAL,
            stall_after: DEFAULT_HOLD_STALL_AFTER,
        }
    }
}

impl fmt::Debug for HoldWatchSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldWatchSettings")
            .field("enabled", &self.enabled)
            .field(
                "management_url",
                &self.management_url.as_deref().map(redact),
            )
            .field("interval", &self.interval)
            .field("stall_after", &self.stall_after)
            .finish()
    }
}
