//! Run-time namespaces: one typed queue set, many tenants.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::shard::shard_for_key;
use super::{MAX_QUEUE_NAME_BYTES, QueueConfig, Queues};
use crate::Error;

/// A prefix chosen at run time (a tenant, a region, a test run) that a
/// producer and a worker put in front of every queue name of their set.
///
/// The queue set stays static and typed; only the broker names change, by
/// one dot: in namespace `tenant-42`, queue `app.emails` is
/// `tenant-42.app.emails`, and its derived queues follow
/// (`tenant-42.app.emails.dead`, its holds). [`Namespace::root`] adds nothing.
/// Give the producer and the worker the same one
/// (`Producer::builder(..).namespace(..)`, `WorkerBuilder::namespace`): only
/// workers of a namespace see its jobs.
///
/// [`new`](Namespace::new) checks what it can alone; the full names, and
/// the backend's longest derived ones, are checked at declaration. A bad
/// name is an [`Error::InvalidConfig`], never a panic.
///
/// ```
/// use queuey_core::{Namespace, Queues};
///
/// #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
/// #[queues(prefix = "app")]
/// enum AppQueues {
///     Emails,
/// }
///
/// let tenant = Namespace::new("tenant-42")?;
/// assert_eq!(tenant.queue_name(&AppQueues::Emails), "tenant-42.app.emails");
/// assert_eq!(tenant.config(&AppQueues::Emails).name(), "tenant-42.app.emails");
/// assert_eq!(Namespace::root().queue_name(&AppQueues::Emails), "app.emails");
///
/// assert!(Namespace::new("").is_err());
/// assert!(Namespace::new("x".repeat(300)).is_err());
/// # Ok::<(), queuey_core::Error>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Namespace {
    /// `None` for the root namespace.
    prefix: Option<Arc<str>>,
}

impl Namespace {
    /// The separator between a namespace and a queue name.
    pub const SEPARATOR: char = '.';

    /// A namespace named `name`. Refused with [`Error::InvalidConfig`]: a
    /// blank name (use [`Namespace::root`]), whitespace at either end, a
    /// trailing separator, queue names starting with `amq.` (reserved by
    /// RabbitMQ), or no room left for a queue name within 255 bytes.
    pub fn new(name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        if name.trim().is_empty() {
            return Err(Error::invalid_config(format!(
                "namespace `{name}` is empty or blank; use Namespace::root() for no namespace"
            )));
        }
        if name.trim() != name {
            return Err(Error::invalid_config(format!(
                "namespace `{name}` starts or ends with whitespace"
            )));
        }
        if name.ends_with(Self::SEPARATOR) {
            return Err(Error::invalid_config(format!(
                "namespace `{name}` ends with `{}`, which the queue names add themselves",
                Self::SEPARATOR
            )));
        }
        if name == "amq" || name.starts_with("amq.") {
            return Err(Error::invalid_config(format!(
                "namespace `{name}` would make every queue name start with `amq.`, \
                 which RabbitMQ reserves for itself"
            )));
        }
        // The separator and at least one byte of queue name must fit.
        let longest = MAX_QUEUE_NAME_BYTES - 2;
        if name.len() > longest {
            return Err(Error::invalid_config(format!(
                "namespace `{name}` is {} bytes, over the {longest} bytes that leave room \
                 for a queue name within the {MAX_QUEUE_NAME_BYTES}-byte AMQP limit",
                name.len()
            )));
        }
        Ok(Namespace {
            prefix: Some(Arc::from(name)),
        })
    }

    /// The namespace that adds nothing: queue names are the set's own.
    pub const fn root() -> Self {
        Namespace { prefix: None }
    }

    /// Whether this is the [root](Namespace::root) namespace.
    pub fn is_root(&self) -> bool {
        self.prefix.is_none()
    }

    /// The namespace's name, empty for the root.
    pub fn as_str(&self) -> &str {
        self.prefix.as_deref().unwrap_or("")
    }

    /// The name `queue` has on the broker in this namespace.
    pub fn queue_name<Q: Queues>(&self, queue: &Q) -> String {
        self.apply(queue.name())
    }

    /// `queue`'s settings, named as in this namespace.
    pub fn config<Q: Queues>(&self, queue: &Q) -> QueueConfig {
        let mut config = queue.config();
        if !self.is_root() {
            config.name = self.apply(&config.name);
        }
        config
    }

    /// The settings of every queue of the set `Q`, named as in this
    /// namespace, in declaration order.
    pub fn configs<Q: Queues>(&self) -> Vec<QueueConfig> {
        Q::ALL.iter().map(|q| self.config(q)).collect()
    }

    /// Adds the namespace to an error met declaring its queues (a name
    /// refused for its length then points at it).
    pub fn explain(&self, error: Error) -> Error {
        match (error, &self.prefix) {
            (Error::InvalidConfig(message), Some(prefix)) => Error::invalid_config(format!(
                "in namespace `{prefix}` (which adds {} bytes to every queue name): {message}",
                prefix.len() + Self::SEPARATOR.len_utf8()
            )),
            (error, _) => error,
        }
    }

    fn apply(&self, name: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("{prefix}{}{name}", Self::SEPARATOR),
            None => name.to_owned(),
        }
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.prefix {
            Some(prefix) => f.debug_tuple("Namespace").field(prefix).finish(),
            None => f.write_str("Namespace::root()"),
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A queue set's names in one namespace (and its shards'), computed once.
#[derive(Debug, Clone)]
pub(crate) struct QueueNames {
    /// The queues renamed by the namespace or sharded; the others go to the
    /// queue the set names.
    names: Arc<[Named]>,
}

#[derive(Debug)]
struct Named {
    /// The set's own name of the queue.
    own: &'static str,
    /// Its name in the namespace.
    full: Arc<str>,
    /// Its shards' names, empty when it is not sharded.
    shards: Box<[Arc<str>]>,
    /// The round-robin turn among the shards.
    turn: AtomicUsize,
}

impl QueueNames {
    pub(crate) fn new<Q: Queues>(namespace: &Namespace) -> Self {
        let names: Vec<Named> = Q::ALL
            .iter()
            .map(|q| (q, namespace.config(q)))
            .filter(|(_, config)| !namespace.is_root() || config.settings().shards() > 1)
            .map(|(q, config)| Named {
                own: q.name(),
                shards: config
                    .physical()
                    .iter()
                    .filter(|c| c.shard().is_some())
                    .map(|c| Arc::from(c.name()))
                    .collect(),
                full: Arc::from(config.name()),
                turn: AtomicUsize::new(0),
            })
            .collect();
        QueueNames {
            names: names.into(),
        }
    }

    fn find(&self, name: &'static str) -> Option<&Named> {
        self.names
            .iter()
            .find(|named| std::ptr::eq(named.own, name) || named.own == name)
    }

    /// The name of the queue the set calls `name`.
    pub(crate) fn get<'a>(&'a self, name: &'static str) -> &'a str {
        self.find(name).map_or(name, |named| &named.full)
    }

    /// The logical queue of a shard's queue; `queue` itself otherwise.
    pub(crate) fn logical<'a>(&'a self, queue: &'a str) -> &'a str {
        self.names
            .iter()
            .find(|named| named.shards.iter().any(|shard| **shard == *queue))
            .map_or(queue, |named| &named.full)
    }

    /// The broker queue a job for `name` goes to: on a sharded queue, the
    /// shard of `key`, or the next in turn without one.
    pub(crate) fn target<'a>(&'a self, name: &'static str, key: Option<&str>) -> &'a str {
        let Some(named) = self.find(name) else {
            return name;
        };
        let count = named.shards.len();
        if count == 0 {
            return &named.full;
        }
        let index = match key {
            Some(key) => usize::from(shard_for_key(key, u16::try_from(count).unwrap_or(u16::MAX))),
            None => named.turn.fetch_add(1, Ordering::Relaxed) % count,
        };
        &named.shards[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Queues;

    #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    #[queues(prefix = "app")]
    enum Set {
        #[queue(prefetch = 3)]
        Emails,
        Hooks,
    }

    #[test]
    fn names_are_namespace_dot_queue() {
        let ns = Namespace::new("tenant-42").unwrap();
        assert_eq!(ns.as_str(), "tenant-42");
        assert_eq!(ns.to_string(), "tenant-42");
        assert_eq!(ns.queue_name(&Set::Hooks), "tenant-42.app.hooks");
        let config = ns.config(&Set::Emails);
        assert_eq!(config.name(), "tenant-42.app.emails");
        assert_eq!(config.settings().prefetch(), 3);
        let names: Vec<_> = ns
            .configs::<Set>()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        assert_eq!(names, ["tenant-42.app.emails", "tenant-42.app.hooks"]);
    }

    #[test]
    fn the_root_adds_nothing() {
        let root = Namespace::root();
        assert!(root.is_root());
        assert_eq!(root, Namespace::default());
        assert_eq!(root.as_str(), "");
        assert_eq!(root.queue_name(&Set::Emails), "app.emails");
        assert_eq!(root.configs::<Set>(), Set::configs());
        assert_eq!(
            QueueNames::new::<Set>(&root).get("app.emails"),
            "app.emails"
        );
    }

    #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    enum Sharded {
        #[queue(shards = 3)]
        Orders,
        Plain,
    }

    #[test]
    fn a_sharded_queue_targets_its_shards_in_any_namespace() {
        for (namespace, prefix) in [
            (Namespace::root(), ""),
            (Namespace::new("t").unwrap(), "t."),
        ] {
            let names = QueueNames::new::<Sharded>(&namespace);
            let orders = Sharded::Orders.name();
            assert_eq!(names.get(orders), format!("{prefix}orders"));
            let turns: Vec<&str> = (0..4).map(|_| names.target(orders, None)).collect();
            let shard = |i: u16| format!("{prefix}orders.s{i}");
            assert_eq!(turns, [shard(0), shard(1), shard(2), shard(0)]);
            let keyed = crate::shard::shard_for_key("k", 3);
            assert_eq!(names.target(orders, Some("k")), shard(keyed));
            assert_eq!(names.logical(&shard(2)), format!("{prefix}orders"));
            assert_eq!(
                names.target(Sharded::Plain.name(), Some("k")),
                format!("{prefix}plain")
            );
            assert_eq!(
                names.logical(&format!("{prefix}plain")),
                format!("{prefix}plain")
            );
        }
    }

    #[test]
    fn names_are_computed_once_per_set() {
        let names = QueueNames::new::<Set>(&Namespace::new("t").unwrap());
        assert_eq!(names.get(Set::Emails.name()), "t.app.emails");
        assert_eq!(names.get(Set::Hooks.name()), "t.app.hooks");
        // A name outside the set is left as it is.
        assert_eq!(names.get("other"), "other");
    }

    #[test]
    fn bad_namespaces_are_refused_with_the_reason() {
        for (bad, reason) in [
            ("", "empty or blank"),
            ("  ", "empty or blank"),
            (" t", "whitespace"),
            ("t.", "ends with `.`"),
            ("amq", "amq."),
            ("amq.t", "amq."),
        ] {
            let e = Namespace::new(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{bad:?}: {e:?}");
            assert!(e.to_string().contains(reason), "{bad:?}: {e}");
        }
        assert!(Namespace::new("x".repeat(253)).is_ok());
        let e = Namespace::new("x".repeat(254)).unwrap_err();
        assert!(e.to_string().contains("254 bytes"), "{e}");
        assert!(Namespace::new("amqp").is_ok());
    }

    #[test]
    fn a_refused_declaration_names_the_namespace() {
        let ns = Namespace::new("tenant").unwrap();
        let e = ns.explain(Error::invalid_config("queue `tenant.q` is too long"));
        assert_eq!(
            e.to_string(),
            "invalid configuration: in namespace `tenant` (which adds 7 bytes to every queue \
             name): queue `tenant.q` is too long"
        );
        let e = Namespace::root().explain(Error::invalid_config("as is"));
        assert!(e.to_string().ends_with(": as is"), "{e}");
    }
}
