//! The management API's URL as a backend keeps it, with the `management`
//! feature. It may carry a password, so its `Debug` output masks it.

use std::fmt;

use queuey_core::uri::redact;

/// The management API's URL as given, if any; `Debug` masks its password.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct ManagementUrl(pub(crate) Option<String>);

impl fmt::Debug for ManagementUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0.as_deref().map(redact), f)
    }
}
