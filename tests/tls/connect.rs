//! What an `amqps://` connection verifies: the CA, the server name, the
//! client certificate; and that an encrypted connection carries jobs like a
//! plain one.

use std::time::Duration;

use futures::StreamExt;
use queuey::backend::Backend;
use queuey::handler::Disposition;
use queuey::queue::QueueConfig;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions, TlsOptions};

use crate::fault::certs::{CLIENT_USER, OTHER_NAME};
use crate::fault::node::{PrivateNode, free_port};
use crate::support::{envelope, n_of, within};

fn options(label: &str, tls: TlsOptions) -> RabbitMqOptions {
    RabbitMqOptions::default()
        .connection_name(format!("queuey-tls-{label}"))
        .connect_timeout(Duration::from_secs(10))
        .tls(tls)
}

async fn connects(url: &str, label: &str, tls: TlsOptions) -> Result<RabbitMqBackend, String> {
    within(
        label,
        RabbitMqBackend::with_options(url, options(label, tls)),
    )
    .await
    .map_err(|e| e.to_string())
}

async fn refused(url: &str, label: &str, tls: TlsOptions) -> String {
    match connects(url, label, tls).await {
        Ok(backend) => {
            let _ = backend.close().await;
            panic!("{label}: connected to {url}, which must be refused")
        }
        Err(text) => text,
    }
}

/// The node's connections as `user auth_mechanism ssl` lines.
async fn connections(node: &PrivateNode) -> Vec<String> {
    node.ctl(&[
        "list_connections",
        "user",
        "auth_mechanism",
        "ssl",
        "--no-table-headers",
    ])
    .await
    .expect("list_connections")
    .lines()
    .filter(|l| !l.trim().is_empty() && !l.starts_with("Listing"))
    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_is_verified_before_anything_is_sent_and_carries_jobs() {
    let node = private_tls_node!("amqps_is_verified_before_anything_is_sent", false);
    let certs = &node.tls().certs;
    let trusted = TlsOptions::default().ca_file(&certs.ca);
    let by_name = node.amqps_url("localhost");

    // A round trip over TLS, the first address being one that does not
    // answer: several addresses work as over TCP.
    let dead = format!("amqps://guest:guest@localhost:{}/%2f", free_port());
    let backend = RabbitMqBackend::with_options(
        vec![dead, by_name.clone()],
        options("round-trip", trusted.clone()),
    )
    .await
    .expect("connects over TLS with the test CA");
    let queue = QueueConfig::new(format!("tls-{}", uuid::Uuid::new_v4().simple()));
    within("declare", backend.declare(std::slice::from_ref(&queue)))
        .await
        .expect("declare");
    for n in 0..3 {
        within("publish", backend.publish(&envelope(queue.name(), n)))
            .await
            .expect("a confirmed publish over TLS");
    }
    let mut deliveries = within("consume", backend.consume(&queue))
        .await
        .expect("consume");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let delivery = within("a delivery", deliveries.next())
            .await
            .expect("the stream goes on")
            .expect("a delivery");
        seen.push(n_of(delivery.envelope()));
        within("ack", delivery.settle(Disposition::Ack))
            .await
            .expect("ack");
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1, 2]);
    let listed = connections(&node).await;
    assert!(
        !listed.is_empty() && listed.iter().all(|l| l.ends_with("true")),
        "every connection to the node is TLS: {listed:?}"
    );
    drop(deliveries);
    backend.close().await.expect("close");

    // No CA given: the platform's roots do not know the test CA.
    let text = refused(&by_name, "no-ca", TlsOptions::default()).await;
    assert!(text.contains("ca_file"), "says what to do: {text}");
    assert!(!text.contains(":guest@"), "no password: {text}");
    // A CA that did not sign the broker's certificate.
    refused(
        &by_name,
        "rogue-ca",
        TlsOptions::default().ca_file(&certs.rogue_ca),
    )
    .await;

    // The certificate names localhost and broker.test, not 127.0.0.1.
    let by_ip = node.amqps_url("127.0.0.1");
    let text = refused(&by_ip, "wrong-name", trusted.clone()).await;
    assert!(text.contains("server_name"), "says what to do: {text}");
    refused(
        &by_name,
        "other-name",
        trusted.clone().server_name("elsewhere.test"),
    )
    .await;
    let by_other_name = connects(
        &by_ip,
        "server-name",
        trusted.clone().server_name(OTHER_NAME),
    )
    .await
    .expect("the name given is verified instead of the URL's host");
    by_other_name.close().await.expect("close");

    // The plain port given as amqps://: the handshake fails.
    let plain = format!("amqps://guest:guest@localhost:{}/%2f", node.port());
    let text = refused(&plain, "plain-port", trusted.clone()).await;
    assert!(text.contains("does not speak TLS"), "{text}");

    // Mutual TLS: no password in the URI, so the certificate alone
    // authenticates (EXTERNAL), as the user its name maps to.
    let no_password = format!("amqps://localhost:{}/%2f", node.tls().port);
    let mtls = connects(
        &no_password,
        "mtls",
        trusted
            .clone()
            .client_cert_files(&certs.client_cert, &certs.client_key),
    )
    .await
    .expect("mutual TLS with EXTERNAL");
    let listed = connections(&node).await;
    assert!(
        listed
            .iter()
            .any(|l| l == &format!("{CLIENT_USER} EXTERNAL true")),
        "the broker sees the certificate's user: {listed:?}"
    );
    mtls.close().await.expect("close");
    // A client certificate from a CA the broker does not trust.
    refused(
        &no_password,
        "rogue-client",
        trusted
            .clone()
            .client_cert_files(&certs.rogue_client_cert, &certs.rogue_client_key),
    )
    .await;
    // EXTERNAL without a certificate: nothing to authenticate with.
    refused(
        &format!("{no_password}?auth_mechanism=external"),
        "external-without-cert",
        trusted.clone(),
    )
    .await;
    // A missing file is a configuration error naming it, before dialling.
    let text = refused(
        &by_name,
        "missing-ca",
        TlsOptions::default().ca_file("/nonexistent/queuey-ca.pem"),
    )
    .await;
    assert!(text.contains("/nonexistent/queuey-ca.pem"), "{text}");
}
