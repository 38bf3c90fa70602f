//! A RabbitMQ cluster of private nodes that a test starts, breaks and
//! stops itself: three (or more) [`PrivateNode`]s, each with its own name,
//! AMQP and distribution ports (free ones, picked when it starts, like any
//! private node) and directories, started together and joined to the first
//! with `rabbitmqctl -n NODE stop_app; join_cluster FIRST; start_app` (the
//! joining nodes' `stop_app` and `start_app` run together, their
//! `join_cluster` one after the other).
//!
//! One node can be killed with SIGKILL (by the pid from its own pid file,
//! never by name) and started again on the same directories, where it
//! rejoins the cluster by itself. Dropping the cluster stops every node and
//! removes its directory, also when the test panics; so does a start that
//! fails half-way.
//!
//! `rabbitmqctl` calls go through a node that is up ([`Cluster::via`]) and
//! are bounded ([`CTL_BOUND`]): on a busy two-core machine each costs most
//! of a second of Erlang start-up, so the helpers here poll every half
//! second at most.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use super::node::PrivateNode;

/// Bound on one `rabbitmqctl` call.
pub(crate) const CTL_BOUND: Duration = Duration::from_secs(60);

/// How long the nodes may take to form the cluster, or a restarted node to
/// be running in it again.
const FORMATION: Duration = Duration::from_secs(120);

/// A cluster of private nodes. See the module documentation.
pub(crate) struct Cluster {
    nodes: Vec<PrivateNode>,
    /// Whether each node's VM runs (false between [`Cluster::kill9`] and
    /// [`Cluster::restart`]).
    up: Vec<bool>,
    /// How long starting the nodes, then joining them, took.
    formed_in: (Duration, Duration),
}

/// Where one quorum queue stands, as the cluster lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The index of the node that leads the queue, if it has a leader.
    pub(crate) leader: Option<usize>,
    /// The indexes of its members that are online, in order.
    pub(crate) online: Vec<usize>,
    /// The indexes of all its members, in order.
    pub(crate) members: Vec<usize>,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let leader = self
            .leader
            .map_or_else(|| "none".to_owned(), |i| format!("n{}", i + 1));
        write!(
            f,
            "leader {leader}, online {}/{}",
            self.online.len(),
            self.members.len()
        )
    }
}

impl Cluster {
    /// Starts `size` nodes labelled `label-n1`, `label-n2`, … together,
    /// joins nodes 2.. to node 1 one after the other, and checks that every
    /// node runs in the cluster. Panics (after stopping what it started)
    /// when a node does not start or join.
    pub(crate) async fn start(label: &str, size: usize) -> Cluster {
        assert!(size >= 1, "a cluster needs a node");
        let started = Instant::now();
        let starting: Vec<_> = (1..=size)
            .map(|i| {
                let label = format!("{label}-n{i}");
                tokio::spawn(async move { PrivateNode::start(&label).await })
            })
            .collect();
        let mut nodes = Vec::with_capacity(size);
        let mut failure = None;
        for start in starting {
            match start.await {
                Ok(node) => nodes.push(node),
                Err(e) if e.is_panic() => failure = Some(e.into_panic()),
                Err(e) => failure = Some(Box::new(format!("a node's start task: {e}"))),
            }
        }
        let mut cluster = Cluster {
            up: vec![true; nodes.len()],
            nodes,
            formed_in: (started.elapsed(), Duration::ZERO),
        };
        if let Some(panic) = failure {
            // Dropping the cluster stops the nodes that did start.
            drop(cluster);
            std::panic::resume_unwind(panic);
        }
        // Stopping and starting the applications of the joining nodes
        // together saves seconds; the joins themselves (schema changes on
        // node 1) go one at a time.
        let first = cluster.nodes[0].name().to_owned();
        let joining = &cluster.nodes[1..];
        futures::future::join_all(joining.iter().map(|node| async move {
            bounded(node.ctl(&["stop_app"]))
                .await
                .unwrap_or_else(|e| panic!("joining the cluster: {e}"))
        }))
        .await;
        for node in joining {
            bounded(node.ctl(&["join_cluster", &first]))
                .await
                .unwrap_or_else(|e| panic!("joining the cluster: {e}"));
        }
        futures::future::join_all(joining.iter().map(PrivateNode::start_app)).await;
        cluster.await_running(size).await;
        cluster.formed_in.1 = started.elapsed() - cluster.formed_in.0;
        cluster
    }

    /// How long starting the nodes, then joining them, took.
    pub(crate) fn formed_in(&self) -> (Duration, Duration) {
        self.formed_in
    }

    /// The number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Node `index` (0-based; reports call it `n{index + 1}`).
    pub(crate) fn node(&self, index: usize) -> &PrivateNode {
        &self.nodes[index]
    }

    /// Whether node `index`'s VM runs.
    pub(crate) fn is_up(&self, index: usize) -> bool {
        self.up[index]
    }

    /// The AMQP URLs of every node, node `first`'s first, then the others
    /// in order: what a client connected to node `first` is given.
    pub(crate) fn urls_from(&self, first: usize) -> Vec<String> {
        let n = self.nodes.len();
        (0..n).map(|k| self.nodes[(first + k) % n].url()).collect()
    }

    /// The index of the node listening on AMQP port `port`.
    pub(crate) fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// The index of the node named `name` (`NAME@localhost`).
    pub(crate) fn index_of_name(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name() == name)
    }

    /// The first node that is up: where `rabbitmqctl` calls go.
    pub(crate) fn via(&self) -> &PrivateNode {
        let index = self
            .up
            .iter()
            .position(|&up| up)
            .expect("a node of the cluster is up");
        &self.nodes[index]
    }

    /// `rabbitmqctl ARGS` through [`Self::via`], bounded.
    pub(crate) async fn ctl(&self, args: &[&str]) -> Result<String, String> {
        bounded(self.via().ctl(args)).await
    }

    /// Kills node `index`'s VM with SIGKILL (a crash: nothing flushed, no
    /// client told, the other nodes see it vanish).
    pub(crate) async fn kill9(&mut self, index: usize) {
        self.nodes[index].kill9().await;
        self.up[index] = false;
    }

    /// Starts a killed node again on its directories and waits until it
    /// runs in the cluster again (it rejoins by itself).
    pub(crate) async fn restart(&mut self, index: usize) {
        self.nodes[index].restart().await;
        self.up[index] = true;
        let size = self.nodes.len();
        self.await_running(size).await;
    }

    /// The names of the nodes the cluster says are running.
    pub(crate) async fn running(&self) -> Result<Vec<String>, String> {
        let status = self.ctl(&["cluster_status", "--formatter", "json"]).await?;
        let status: serde_json::Value = serde_json::from_str(&status)
            .map_err(|e| format!("cluster_status is not JSON ({e}): {status}"))?;
        Ok(strings(&status["running_nodes"]))
    }

    /// Waits until `count` nodes run in the cluster.
    async fn await_running(&self, count: usize) {
        let started = Instant::now();
        loop {
            match self.running().await {
                Ok(running) if running.len() >= count => return,
                Ok(running) if started.elapsed() > FORMATION => {
                    panic!("the cluster did not form within {FORMATION:?}: running {running:?}")
                }
                Err(e) if started.elapsed() > FORMATION => {
                    panic!("the cluster did not form within {FORMATION:?}: {e}")
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Where every quorum queue whose name starts with `prefix` stands.
    pub(crate) async fn placements(
        &self,
        prefix: &str,
    ) -> Result<BTreeMap<String, Placement>, String> {
        let listing = self
            .ctl(&[
                "list_queues",
                "name",
                "type",
                "leader",
                "online",
                "members",
                "--formatter",
                "json",
            ])
            .await?;
        let listing: serde_json::Value = serde_json::from_str(&listing)
            .map_err(|e| format!("list_queues is not JSON ({e}): {listing}"))?;
        let mut placements = BTreeMap::new();
        for queue in listing.as_array().into_iter().flatten() {
            let Some(name) = queue["name"].as_str() else {
                continue;
            };
            if !name.starts_with(prefix) || queue["type"].as_str() != Some("quorum") {
                continue;
            }
            let indexes = |value: &serde_json::Value| -> Vec<usize> {
                let mut indexes: Vec<usize> = strings(value)
                    .iter()
                    .filter_map(|n| self.index_of_name(n))
                    .collect();
                indexes.sort_unstable();
                indexes
            };
            let leader = queue["leader"].as_str().and_then(|n| self.index_of_name(n));
            placements.insert(
                name.to_owned(),
                Placement {
                    leader,
                    online: indexes(&queue["online"]),
                    members: indexes(&queue["members"]),
                },
            );
        }
        Ok(placements)
    }

    /// The messages in every queue whose name starts with `prefix`
    /// (ready, unacknowledged, and on a quorum queue also those its
    /// dead-letter worker holds).
    pub(crate) async fn messages(&self, prefix: &str) -> Result<BTreeMap<String, u64>, String> {
        let listing = self
            .ctl(&["list_queues", "name", "messages", "--formatter", "json"])
            .await?;
        let listing: serde_json::Value = serde_json::from_str(&listing)
            .map_err(|e| format!("list_queues is not JSON ({e}): {listing}"))?;
        Ok(listing
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|queue| {
                let name = queue["name"].as_str()?;
                let messages = queue["messages"].as_u64()?;
                name.starts_with(prefix)
                    .then(|| (name.to_owned(), messages))
            })
            .collect())
    }

    /// Waits until every quorum queue whose name starts with `prefix` (at
    /// least `at_least` of them) has a leader on a node that is up, and
    /// returns where they stand; `Err` with the last listing after
    /// `bound`.
    pub(crate) async fn await_leaders(
        &self,
        prefix: &str,
        at_least: usize,
        bound: Duration,
    ) -> Result<BTreeMap<String, Placement>, String> {
        let started = Instant::now();
        loop {
            let last = self.placements(prefix).await;
            if let Ok(placements) = &last {
                let led = placements.values().all(|p| {
                    p.leader
                        .is_some_and(|l| self.up[l] && p.online.contains(&l))
                });
                if led && placements.len() >= at_least {
                    return last;
                }
            }
            if started.elapsed() > bound {
                return Err(format!(
                    "the queues `{prefix}*` had no leader on a live node within {bound:?}: {last:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Stops and restarts the Raft member of quorum queue `queue` on its
    /// leader's node, so that another member leads it: the operator's
    /// remedy for a quorum queue whose at-least-once dead-lettering stalled
    /// after a leader change on RabbitMQ 3.10.8 (its dead-letter worker is
    /// started again with the new leader). Returns the node that led it.
    pub(crate) async fn restart_leader(&self, queue: &str) -> Result<usize, String> {
        let placements = self.placements(queue).await?;
        let leader = placements
            .get(queue)
            .and_then(|p| p.leader)
            .ok_or_else(|| format!("`{queue}` has no leader: {placements:?}"))?;
        let expression = restart_member_expression(queue)?;
        bounded(self.nodes[leader].ctl(&["eval", &expression])).await?;
        Ok(leader)
    }

    /// The node each of the named connections is on (by the AMQP port it
    /// reached); connections not listed are left out.
    pub(crate) async fn connection_nodes(
        &self,
        names: &[&str],
    ) -> Result<BTreeMap<String, usize>, String> {
        let listing = self
            .ctl(&[
                "list_connections",
                "client_properties",
                "port",
                "--formatter",
                "json",
            ])
            .await?;
        let listing: serde_json::Value = serde_json::from_str(&listing)
            .map_err(|e| format!("list_connections is not JSON ({e}): {listing}"))?;
        let mut found = BTreeMap::new();
        for connection in listing.as_array().into_iter().flatten() {
            let properties = connection["client_properties"].to_string();
            let Some(port) = connection["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
            else {
                continue;
            };
            for name in names {
                // The name is one of the client properties; matched whole,
                // quoted, so that one name never matches a longer one.
                if properties.contains(&format!("\"{name}\""))
                    && let Some(index) = self.index_of_port(port)
                {
                    found.insert((*name).to_owned(), index);
                }
            }
        }
        Ok(found)
    }
}

impl Drop for Cluster {
    /// Stops every node at once (each in a thread of its own: a node's
    /// stop takes seconds) and removes their directories.
    fn drop(&mut self) {
        let stopping: Vec<_> = self
            .nodes
            .drain(..)
            .map(|node| std::thread::spawn(move || drop(node)))
            .collect();
        for thread in stopping {
            let _ = thread.join();
        }
    }
}

/// The `rabbitmqctl eval` expression that stops and restarts the Raft
/// member of quorum queue `queue` (in the default virtual host) on the node
/// it runs on: the remedy for a quorum queue whose at-least-once
/// dead-lettering stalled, since the member's next term as leader starts a
/// fresh dead-letter worker.
pub(crate) fn restart_member_expression(queue: &str) -> Result<String, String> {
    if queue.contains(['"', '\\']) {
        return Err(format!("`{queue}` cannot be quoted for eval"));
    }
    Ok(format!(
        "{{ok, Q}} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"/\">>, queue, <<\"{queue}\">>)), \
         {{Name, _}} = amqqueue:get_pid(Q), \
         ok = ra:stop_server(quorum_queues, {{Name, node()}}), \
         ra:restart_server(quorum_queues, {{Name, node()}})."
    ))
}

/// The strings of a JSON array (anything else: none).
fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Bounds a `rabbitmqctl` call by [`CTL_BOUND`].
async fn bounded(
    call: impl std::future::Future<Output = Result<String, String>>,
) -> Result<String, String> {
    tokio::time::timeout(CTL_BOUND, call)
        .await
        .unwrap_or_else(|_| Err(format!("rabbitmqctl did not return within {CTL_BOUND:?}")))
}
