//! What the client tells the broker about itself when it connects.

use std::collections::BTreeMap;

/// The client side of a connection: the name it shows on the broker, extra
/// client properties, and the AMQP locale — queuey's own type, so that no
/// type of the AMQP client library appears in queuey's API.
///
/// Hand it to [`RabbitMqOptions::connection_properties`](crate::RabbitMqOptions::connection_properties),
/// which is the same as setting each part with
/// [`connection_name`](crate::RabbitMqOptions::connection_name),
/// [`client_property`](crate::RabbitMqOptions::client_property) and
/// [`locale`](crate::RabbitMqOptions::locale). The connection runs on the
/// tokio runtime that opens it; there is no executor to choose.
///
/// ```
/// use queuey_rabbitmq::{ConnectionProperties, RabbitMqOptions};
///
/// let properties = ConnectionProperties::default()
///     .with_connection_name("billing-worker")
///     .with_client_property("team", "payments");
/// let options = RabbitMqOptions::default().connection_properties(properties);
/// assert_eq!(options.settings().connection_name(), Some("billing-worker"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionProperties {
    pub(crate) connection_name: Option<String>,
    pub(crate) client_properties: BTreeMap<String, String>,
    pub(crate) locale: Option<String>,
}

impl ConnectionProperties {
    /// The name the connection shows on the broker.
    pub fn with_connection_name(mut self, name: impl Into<String>) -> Self {
        self.connection_name = Some(name.into());
        self
    }

    /// Adds a client property (a string; keys at most 255 bytes).
    pub fn with_client_property(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.client_properties.insert(key.into(), value.into());
        self
    }

    /// The AMQP locale (default: the client's, `en_US`).
    pub fn with_locale(mut self, locale: impl Into<String>) -> Self {
        self.locale = Some(locale.into());
        self
    }
}
