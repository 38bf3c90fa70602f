//! Access to a private RabbitMQ node or cluster, or a skip.

use crate::fault::cluster::Cluster;
use crate::fault::node::{self, PrivateNode};

/// Starts a private node, or returns `None` (after a notice) where this
/// machine cannot run one; under `QUEUEY_REQUIRE_BROKER=1` that is a failure.
pub(crate) async fn node(test: &str) -> Option<PrivateNode> {
    // The shared harness decides whether broker tests run at all.
    crate::support::amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ node").then_some(())?;
    Some(PrivateNode::start(test).await)
}

/// A private node made ready but not started ([`PrivateNode::planned`]),
/// or `None` as [`node`] says.
pub(crate) async fn planned_node(test: &str) -> Option<PrivateNode> {
    crate::support::amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ node").then_some(())?;
    Some(PrivateNode::planned(test).await)
}

/// A private node whose `rabbit` application gets `env`
/// ([`PrivateNode::start_with_rabbit_env`]), or `None` as [`node`] says.
pub(crate) async fn node_with_rabbit_env(test: &str, env: &[(&str, &str)]) -> Option<PrivateNode> {
    crate::support::amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ node").then_some(())?;
    Some(PrivateNode::start_with_rabbit_env(test, env).await)
}

/// A private node with the management API over plain http
/// ([`PrivateNode::start_with_management`]), or `None` as [`node`] says.
pub(crate) async fn management_node(test: &str) -> Option<PrivateNode> {
    crate::support::amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ node").then_some(())?;
    Some(PrivateNode::start_with_management(test).await)
}

/// Gets a private node or returns from the test (skip).
macro_rules! private_node {
    ($name:expr) => {
        match $crate::private::node($name).await {
            Some(node) => node,
            None => return,
        }
    };
}

/// Starts a cluster of `size` private nodes, or returns `None` (after a
/// notice) where this machine cannot run one; under
/// `QUEUEY_REQUIRE_BROKER=1` that is a failure.
pub(crate) async fn cluster(test: &str, size: usize) -> Option<Cluster> {
    crate::support::amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ cluster").then_some(())?;
    Some(Cluster::start(test, size).await)
}

/// Waits until no other test of this process holds a cluster: three nodes
/// take most of a small machine's cores for a minute, so cluster tests run
/// one at a time. Hold the guard until the cluster is stopped.
pub(crate) async fn one_cluster_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE.lock().await
}

/// Gets a cluster of private nodes or returns from the test (skip).
macro_rules! private_cluster {
    ($name:expr, $size:expr) => {
        match $crate::private::cluster($name, $size).await {
            Some(cluster) => cluster,
            None => return,
        }
    };
}

/// Starts a private node with a TLS listener (and with `management` its
/// management API over https), or returns `None` (after a notice) where
/// this machine cannot run one; under `QUEUEY_REQUIRE_BROKER=1` that is a
/// failure.
pub(crate) async fn tls_node(test: &str, management: bool) -> Option<PrivateNode> {
    crate::support::amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ node").then_some(())?;
    Some(PrivateNode::start_tls(test, management).await)
}

/// Gets a private node with a TLS listener or returns from the test (skip).
macro_rules! private_tls_node {
    ($name:expr, $management:expr) => {
        match $crate::private::tls_node($name, $management).await {
            Some(node) => node,
            None => return,
        }
    };
}
