//! The `get_*` readers of the first release, kept for one release: each
//! reads the same value as `settings()` and the builder method's name.

use std::collections::BTreeMap;

use queuey_core::backend::Granularity;

use super::RabbitMqOptions;

impl RabbitMqOptions {
    /// The connection name, if set.
    #[deprecated(note = "use `.settings().connection_name()`")]
    pub fn get_connection_name(&self) -> Option<&str> {
        self.settings().connection_name()
    }

    /// The extra client properties.
    #[deprecated(note = "use `.settings().client_properties()`")]
    pub fn get_client_properties(&self) -> &BTreeMap<String, String> {
        self.settings().client_properties()
    }

    /// The locale, if set.
    #[deprecated(note = "use `.settings().locale()`")]
    pub fn get_locale(&self) -> Option<&str> {
        self.settings().locale()
    }

    /// The dead-letter queue suffix.
    #[deprecated(note = "use `.settings().dead_suffix()`")]
    pub fn get_dead_suffix(&self) -> &str {
        self.settings().dead_suffix()
    }

    /// Whether dead-letter queues are declared and used.
    #[deprecated(note = "use `.settings().declare_dead_letter_queues()`")]
    pub fn get_declare_dead_letter_queues(&self) -> bool {
        self.settings().declare_dead_letter_queues()
    }

    /// The hold-queue suffix.
    #[deprecated(note = "use `.settings().deferred_suffix()`")]
    pub fn get_deferred_suffix(&self) -> &str {
        self.settings().deferred_suffix()
    }

    /// The retry granularity: as configured, else the default of the hold
    /// queues in use (see
    /// [`effective_granularity_ms`](crate::topology::effective_granularity_ms)
    /// for the value used).
    #[deprecated(note = "use `.settings().retry_granularity()`")]
    pub fn get_retry_granularity(&self) -> Granularity {
        self.settings().retry_granularity()
    }

    /// The deferral granularity as configured.
    #[deprecated(note = "use `.settings().deferred_granularity()`")]
    pub fn get_deferred_granularity(&self) -> Granularity {
        self.settings().deferred_granularity()
    }

    /// The number of publishing channels.
    #[deprecated(note = "use `.settings().publish_concurrency()`")]
    pub fn get_publish_concurrency(&self) -> usize {
        self.settings().publish_concurrency()
    }

    /// The largest body published, in bytes.
    #[deprecated(note = "use `.settings().max_message_size()`")]
    pub fn get_max_message_size(&self) -> usize {
        self.settings().max_message_size()
    }
}
