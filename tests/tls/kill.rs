//! A broker killed with `kill -9` and restarted while jobs flow over TLS:
//! the backend reconnects over TLS, and no confirmed job is lost.

use queuey::rabbitmq::TlsOptions;

use crate::fault::scenario::{self, Fault, Plan, Site, fault_queue};

fault_queue!(TlsKillQueues, TlsKillJob, "tls-kill-9");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_under_load_over_tls_loses_nothing() {
    let mut node = private_tls_node!("a_broker_killed_under_load_over_tls_loses_nothing", false);
    let url = node.amqps_url("localhost");
    let tls = TlsOptions::default().ca_file(&node.tls().certs.ca);
    let report = scenario::run::<TlsKillJob>(
        &Plan::ci(Fault::Kill9),
        Site {
            url,
            tls,
            node: Some(&mut node),
            child: None,
        },
    )
    .await;
    eprintln!("{report}\n{}", report.row());
    report.assert_nothing_lost();
}
