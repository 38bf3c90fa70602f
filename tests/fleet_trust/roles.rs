//! The three users of a fleet, created on a private node with the
//! permissions SECURITY.md gives each role, for an application whose queues
//! start with `prefix` and whose control stream is `queuey.control`.

use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::fault::node::PrivateNode;

pub(crate) const PRODUCER: &str = "producer";
pub(crate) const WORKER: &str = "worker";
pub(crate) const OPERATOR: &str = "ops";
const PASSWORD: &str = "secret-of-the-test";

/// A private node's users.
pub(crate) struct Roles<'a> {
    node: &'a PrivateNode,
}

impl<'a> Roles<'a> {
    /// Adds the three users to `node` with the permissions of their role
    /// over the queues starting with `prefix`, every role publishing
    /// through the default exchange.
    pub(crate) async fn create(node: &'a PrivateNode, prefix: &str) -> Roles<'a> {
        let app = format!("^{}\\.", regex_escape(prefix));
        let fleet = "^queuey\\.control";
        // configure, write, read (RabbitMQ checks a publish's write right on
        // the exchange: every role publishes through the default one).
        let permissions = [
            (
                PRODUCER,
                app.clone(),
                "^amq\\.default$".to_owned(),
                "^$".to_owned(),
            ),
            (
                WORKER,
                format!("{app}|{fleet}"),
                "^amq\\.default$".to_owned(),
                format!("{app}|{fleet}"),
            ),
            (
                OPERATOR,
                fleet.to_owned(),
                "^amq\\.default$".to_owned(),
                format!("{app}|{fleet}"),
            ),
        ];
        Self::with_permissions(node, &permissions).await
    }

    /// Adds the three users to `node` with the permissions SECURITY.md
    /// gives a fleet whose jobs go through the job exchange `exchange`
    /// (named inside `prefix`): the producer has no right on the default
    /// exchange at all.
    pub(crate) async fn behind_job_exchange(
        node: &'a PrivateNode,
        prefix: &str,
        exchange: &str,
    ) -> Roles<'a> {
        let app = format!("^{}\\.", regex_escape(prefix));
        let jobs = format!("^{}$", regex_escape(exchange));
        let fleet = "^queuey\\.control";
        let permissions = [
            // Declares its queues and the exchange, binds the queues (write
            // on a queue, read on the exchange), publishes to the exchange.
            (PRODUCER, app.clone(), app.clone(), jobs),
            (
                WORKER,
                format!("{app}|{fleet}"),
                format!("^amq\\.default$|{app}"),
                format!("{app}|{fleet}"),
            ),
            (
                OPERATOR,
                fleet.to_owned(),
                "^amq\\.default$".to_owned(),
                format!("{app}|{fleet}"),
            ),
        ];
        Self::with_permissions(node, &permissions).await
    }

    async fn with_permissions(
        node: &'a PrivateNode,
        permissions: &[(&str, String, String, String)],
    ) -> Roles<'a> {
        for (user, configure, write, read) in permissions {
            node.ctl(&["add_user", user, PASSWORD])
                .await
                .expect("add_user");
            node.ctl(&["set_permissions", "-p", "/", user, configure, write, read])
                .await
                .expect("set_permissions");
        }
        Roles { node }
    }

    /// The node's URL as `user`.
    pub(crate) fn url(&self, user: &str) -> String {
        format!(
            "amqp://{user}:{PASSWORD}@127.0.0.1:{}/%2f",
            self.node.port()
        )
    }

    /// A backend logging in as `user`, named `user`, with `options`.
    pub(crate) async fn backend(&self, user: &str, options: RabbitMqOptions) -> RabbitMqBackend {
        RabbitMqBackend::with_options(
            self.url(user),
            options
                .connection_name(format!("fleet-trust-{user}"))
                .prune_holds_after(None),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting as {user}: {e}"))
    }

    /// A plain lapin connection as `user`, for publishing by hand.
    pub(crate) async fn raw(&self, user: &str) -> lapin::Connection {
        lapin::Connection::connect(
            &self.url(user),
            lapin::ConnectionProperties::default()
                .with_connection_name(format!("fleet-trust-raw-{user}").into()),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting as {user}: {e}"))
    }
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escape = !c.is_ascii_alphanumeric() && c != '_';
            escape.then_some('\\').into_iter().chain([c])
        })
        .collect()
}
