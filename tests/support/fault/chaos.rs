//! Injecting a scenario's fault, again and again, and healing it at the end;
//! and the broker-side look at the queue (`rabbitmqctl`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lapin::options::QueueDeleteOptions;
use lapin::types::ShortString;
use lapin::{Connection, ConnectionProperties};

use super::child::Children;
use super::node::PrivateNode;
use super::plan::{Fault, Plan};
use super::proxy::Proxy;

/// The fault injector of one run.
pub(crate) struct Chaos<'a> {
    pub(crate) fault: Fault,
    pub(crate) plan: &'a Plan,
    pub(crate) proxy: Option<&'a Proxy>,
    pub(crate) node: Option<&'a mut PrivateNode>,
    pub(crate) children: Option<&'a mut Children>,
    /// The store of a run whose worker handles each job once.
    pub(crate) store: Option<&'a mut super::private_redis::PrivateRedis>,
    /// The names of the run's connections: the only ones ever closed.
    pub(crate) connections: [String; 2],
}

impl Chaos<'_> {
    /// Injects the fault every `plan.every` until `stop` is set; returns
    /// how many times it did.
    pub(crate) async fn run(&mut self, stop: &AtomicBool) -> u32 {
        if self.fault == Fault::None {
            return 0;
        }
        // At a fixed rate: an injection that took longer than `every`
        // (a `rabbitmqctl` call costs most of a second) is followed by the
        // next one at once.
        let mut injected = 0;
        let mut next = tokio::time::Instant::now() + self.plan.first;
        while injected < self.plan.max_faults {
            if !pause_until(next, stop).await {
                return injected;
            }
            self.inject().await;
            injected += 1;
            next = (next + self.plan.every).max(tokio::time::Instant::now());
        }
        injected
    }

    async fn inject(&mut self) {
        match self.fault {
            Fault::None => {}
            Fault::Close => {
                let node = self.node.as_deref().map(|n| n.name().to_owned());
                close_connections(node.as_deref(), &self.connections).await;
            }
            Fault::Reset => self.proxy.expect("a proxy").cut(),
            Fault::BlackHole => {
                let proxy = self.proxy.expect("a proxy");
                proxy.black_hole(true);
                tokio::time::sleep(self.plan.outage).await;
                proxy.black_hole(false);
            }
            Fault::StopApp => {
                let node = self.node.as_deref().expect("a private node");
                node.stop_app().await;
                tokio::time::sleep(self.plan.outage).await;
                node.start_app().await;
            }
            Fault::Kill9 => {
                let node = self.node.as_deref_mut().expect("a private node");
                node.kill9().await;
                tokio::time::sleep(self.plan.outage).await;
                node.restart().await;
            }
            Fault::WorkerCrash => {
                let children = self.children.as_deref_mut().expect("worker processes");
                children.kill();
                children.spawn();
            }
            Fault::StoreKill => {
                let store = self.store.as_deref_mut().expect("a private store");
                store.kill();
                tokio::time::sleep(self.plan.outage).await;
                store.restart();
            }
        }
    }

    /// Leaves the broker and the network whole (each injection already
    /// ends healed; this is for a run stopped mid-way).
    pub(crate) async fn heal(&mut self) {
        if let Some(proxy) = self.proxy {
            proxy.black_hole(false);
            proxy.refuse(false);
        }
    }
}

/// Sleeps until `until`, waking early when `stop` is set; false if it was.
async fn pause_until(until: tokio::time::Instant, stop: &AtomicBool) -> bool {
    while tokio::time::Instant::now() < until {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !stop.load(Ordering::Acquire)
}

/// `rabbitmqctl` on the broker under test (`None`) or a private node.
pub(crate) async fn ctl(node: Option<&str>, args: &[&str]) -> Result<String, String> {
    let node = node.map(str::to_owned);
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let run = tokio::task::spawn_blocking(move || {
        let mut command = match &node {
            Some(node) => super::node::ctl_command(node),
            None => super::node::broker_ctl_command(),
        };
        let out = command
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("rabbitmqctl does not run: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "rabbitmqctl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(format!("rabbitmqctl task: {e}")),
        Err(_) => Err("rabbitmqctl did not return within 60 s".to_owned()),
    }
}

/// Closes, from the broker's side, every connection whose client
/// properties hold one of `names` (only ever the run's own).
pub(crate) async fn close_connections(node: Option<&str>, names: &[String]) -> usize {
    let Ok(listing) = ctl(
        node,
        &[
            "list_connections",
            "pid",
            "client_properties",
            "-q",
            "--no-table-headers",
        ],
    )
    .await
    else {
        return 0;
    };
    let pids: Vec<String> = listing
        .lines()
        .filter(|line| names.iter().any(|name| line.contains(name.as_str())))
        .filter_map(|line| line.split('\t').next().map(str::to_owned))
        .collect();
    // A connection may be gone already: not an error here.
    futures::future::join_all(pids.iter().map(|pid| async move {
        ctl(
            node,
            &["close_connection", pid, "queuey fault test: forced close"],
        )
        .await
    }))
    .await;
    pids.len()
}

/// Ready and unacknowledged messages of `queue` (`None` when not listed).
pub(crate) async fn queue_depth(node: Option<&str>, queue: &str) -> Option<(u32, u32)> {
    let listing = ctl(
        node,
        &[
            "list_queues",
            "name",
            "messages_ready",
            "messages_unacknowledged",
            "-q",
            "--no-table-headers",
        ],
    )
    .await
    .ok()?;
    listing.lines().find_map(|line| {
        let mut fields = line.split('\t');
        if fields.next() != Some(queue) {
            return None;
        }
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    })
}

/// Deletes the run's queues (the work queue, its companions and holds).
pub(crate) async fn delete_queues(node: Option<&str>, url: &str, queue: &str) {
    let props = ConnectionProperties::default().with_connection_name("queuey-fault-cleanup".into());
    let Ok(Ok(connection)) =
        tokio::time::timeout(Duration::from_secs(10), Connection::connect(url, props)).await
    else {
        return;
    };
    // The work queue, its dead-letter and suspect queues, and the hold
    // queues its deferrals and retries went through (`{queue}.deferred.…`).
    let mut names = vec![
        queue.to_owned(),
        format!("{queue}.dead"),
        format!("{queue}.suspect"),
        // The control and heartbeat streams of its worker processes.
        super::child::control_stream(queue),
        format!("{}.workers", super::child::control_stream(queue)),
    ];
    if let Ok(listing) = ctl(node, &["list_queues", "name", "-q", "--no-table-headers"]).await {
        let holds = format!("{queue}.deferred.");
        names.extend(
            listing
                .lines()
                .map(str::trim)
                .filter(|name| name.starts_with(&holds))
                .map(str::to_owned),
        );
    }
    for name in names {
        if let Ok(channel) = connection.create_channel().await {
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                channel.queue_delete(name.as_str().into(), QueueDeleteOptions::default()),
            )
            .await;
        }
    }
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        connection.close(200, ShortString::default()),
    )
    .await;
}
