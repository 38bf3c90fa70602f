//! Cluster failover: a producer and a worker connected to node 1 of a
//! three-node RabbitMQ cluster (the other two given as fallbacks) carry jobs
//! through a quorum work queue, a quorum dead-letter queue and quorum holds
//! (every third job fails once and waits in a hold); node 1, which leads
//! every one of those queues, is killed with SIGKILL while jobs flow. Both
//! clients must carry on through another node and every confirmed job must
//! be handled: 0 lost, duplicates counted and printed.
//!
//! On RabbitMQ 3.10.8 a quorum hold whose leader was killed can keep its
//! expired jobs (at-least-once dead-lettering stalls after the leader
//! change; nothing is lost, the jobs wait) until the dead node is back, so
//! the run restarts the killed node before its final count and prints how
//! many jobs were still waiting then. The full-size run is
//! `cargo run --release --example soak -- cluster JOBS`.

use crate::fault::failover::{self, FailoverPlan};
use crate::fault::scenario::fault_queue;

fault_queue!(
    ClusterQueues,
    ClusterJob,
    "cluster",
    crate::fault::failover::quorum_config
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_killed_under_load_loses_no_job() {
    let mut cluster = private_cluster!("failover", 3);
    let (started, joined) = cluster.formed_in();
    let report = failover::run::<ClusterJob>(&FailoverPlan::ci(), &mut cluster).await;
    let stopping = std::time::Instant::now();
    drop(cluster);
    eprintln!(
        "{report}\n  cluster: nodes started in {:.1} s, joined in {:.1} s, stopped in {:.1} s\n{}",
        started.as_secs_f64(),
        joined.as_secs_f64(),
        stopping.elapsed().as_secs_f64(),
        report.row()
    );
    report.assert_nothing_lost();
}
