//! The `queuey` tool over TLS: `doctor`, `dead ls` and `holds` against a
//! private RabbitMQ node reached by `amqps://`, with its management API over
//! https only; what it says when the CA is missing; and a plaintext port
//! given as `amqps://`. The node needs root and `rabbitmq-server`, as in the
//! library's TLS suite.

use std::process::{Command, Output};

use queuey_core::backend::Backend;
use queuey_core::{Disposition, Envelope, QueueConfig};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions, TlsOptions};

use crate::tests::private::node::{self, PrivateNode};
use crate::tests::support::{amqp_url, queuey_bin, within};

async fn tls_node(test: &str) -> Option<PrivateNode> {
    amqp_url(test)?;
    node::may_start(test, "a private RabbitMQ node").then_some(())?;
    Some(PrivateNode::start_tls(test, true).await)
}

fn queuey(args: &[&str]) -> (Option<i32>, String) {
    let out: Output = Command::new(queuey_bin())
        .args(args)
        .env_remove("AMQP_URL")
        .env_remove("QUEUEY_MGMT_URL")
        .output()
        .expect("the queuey binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_works_over_amqps_and_https_management() {
    let Some(node) = tls_node("the_tool_works_over_amqps_and_https").await else {
        return;
    };
    let certs = &node.tls().certs;
    let ca = certs.ca.to_str().unwrap().to_owned();
    let url = node.amqps_url("localhost");

    // One dead letter to list, made through the library over TLS.
    let queue = format!("tls-tool.{}", uuid::Uuid::new_v4().simple());
    let backend = RabbitMqBackend::with_options(
        &url,
        RabbitMqOptions::default().tls(TlsOptions::default().ca_file(&certs.ca)),
    )
    .await
    .expect("the library connects over TLS");
    let config = QueueConfig::new(&queue);
    backend
        .declare(std::slice::from_ref(&config))
        .await
        .expect("declare");
    let payload = serde_json::value::to_raw_value(&serde_json::json!({"n": 1})).unwrap();
    let envelope = Envelope::new("tls_job", &queue, payload);
    backend.publish(&envelope).await.expect("publish");
    let mut deliveries = backend.consume(&config).await.expect("consume");
    let delivery = within("a delivery", futures::StreamExt::next(&mut deliveries))
        .await
        .expect("a delivery")
        .expect("ok");
    let reason = "gave up over TLS".to_owned();
    delivery
        .settle(Disposition::DeadLetter {
            reason: reason.clone(),
        })
        .await
        .expect("dead-lettered");
    drop(deliveries);
    backend.close().await.expect("close");

    // doctor: encrypted AMQP, and the management API over https (the
    // node's port is not the default 15671, so it is given).
    let https = node.mgmt_https_url();
    let (code, out) = queuey(&[
        "--url",
        &url,
        "--tls-ca",
        &ca,
        "--mgmt-url",
        &https,
        "doctor",
    ]);
    assert!(!out.contains("FAIL"), "{out}");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("encrypted"), "{out}");
    assert!(out.contains(&node.mgmt_https_url()), "{out}");
    assert!(!out.contains(":guest@"), "no password: {out}");

    let (code, out) = queuey(&["--url", &url, "--tls-ca", &ca, "dead", "ls", &queue]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&envelope.job_id.to_string()), "{out}");
    assert!(out.contains(&reason), "{out}");

    let (code, out) = queuey(&[
        "--url",
        &url,
        "--tls-ca",
        &ca,
        "--mgmt-url",
        &https,
        "holds",
        &queue,
    ]);
    assert_eq!(code, Some(0), "{out}");

    // The management URL given explicitly, with its own credentials.
    let mgmt = node
        .mgmt_https_url()
        .replace("https://", "https://guest:guest@");
    let (code, out) = queuey(&[
        "--url",
        &url,
        "--tls-ca",
        &ca,
        "--mgmt-url",
        &mgmt,
        "holds",
        &queue,
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains(":guest@"), "no password: {out}");

    // Without the CA: both connections refuse the certificate, and say
    // what to do.
    let (code, out) = queuey(&["--url", &url, "--mgmt-url", &https, "doctor"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(!out.contains("ok    management"), "{out}");
    assert!(out.contains("ca_file") || out.contains("CA"), "{out}");
    let (code, out) = queuey(&["--url", &url, "dead", "ls", &queue]);
    assert_eq!(code, Some(1), "{out}");

    // The plain port given as amqps://: refused, without the password.
    let secret = format!("SECRETPASS{}", uuid::Uuid::new_v4().simple());
    let plain = format!("amqps://guest:{secret}@localhost:{}/%2f", node.port());
    let (code, out) = queuey(&["--url", &plain, "--tls-ca", &ca, "dead", "ls", &queue]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("does not speak TLS"), "{out}");
    assert!(!out.contains(&secret), "{out}");
}
