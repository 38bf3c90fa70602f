//! Cluster failover: a producer and a worker connected to node 1 of a
//! three-node RabbitMQ cluster (the other two given as fallbacks) carry jobs
//! through a quorum work queue, a quorum dead-letter queue and a quorum
//! hold (every third job fails once and waits in the hold); node 1 is
//! killed with SIGKILL while jobs flow. Both clients must carry on through
//! another node and every confirmed job must be handled.
//!
//! The CI test declares every queue through node 2 first, so node 2 leads
//! them and the kill takes the clients' node only: 0 jobs lost, direct and
//! held, nothing left in any queue. The leader-kill variant (node 1 leads
//! every queue, the hold included) is ignored: on RabbitMQ 3.10.8 a quorum
//! hold whose leader was killed can keep its expired jobs until the dead
//! node is back, or for good (RELIABILITY.md has the counts), so it only
//! checks that nothing is unaccounted for. Its full-size run is
//! `cargo run -p queuey --release --example soak -- cluster JOBS`.

use crate::fault::cluster::Cluster;
use crate::fault::failover::{self, FailoverPlan, FailoverReport};
use crate::fault::scenario::fault_queue;

fault_queue!(
    ClusterQueues,
    ClusterJob,
    "cluster",
    crate::fault::failover::quorum_config
);

/// Runs `plan` on `cluster`, stops the cluster and prints the report.
async fn run(plan: &FailoverPlan, mut cluster: Cluster) -> FailoverReport {
    let (started, joined) = cluster.formed_in();
    let report = failover::run::<ClusterJob>(plan, &mut cluster).await;
    let stopping = std::time::Instant::now();
    drop(cluster);
    eprintln!(
        "{report}\n  cluster: nodes started in {:.1} s, joined in {:.1} s, stopped in {:.1} s\n{}",
        started.as_secs_f64(),
        joined.as_secs_f64(),
        stopping.elapsed().as_secs_f64(),
        report.row()
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_killed_under_load_loses_no_job() {
    let _one = crate::private::one_cluster_at_a_time().await;
    let cluster = private_cluster!("failover", 3);
    run(&FailoverPlan::ci(), cluster)
        .await
        .assert_nothing_lost();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "RabbitMQ 3.10.8 can strand held jobs in a quorum hold whose leader was killed \
            (RELIABILITY.md); CI's RabbitMQ 4.3 pass runs it, and on 3.10 run it alone to \
            measure it"]
async fn the_node_leading_every_queue_killed_under_load_leaves_nothing_unaccounted() {
    let _one = crate::private::one_cluster_at_a_time().await;
    let cluster = private_cluster!("leaderkill", 3);
    let plan = FailoverPlan::ci().led_by(failover::CLIENT_NODE);
    run(&plan, cluster).await.assert_nothing_unaccounted();
}
