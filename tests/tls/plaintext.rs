//! `amqps://` to a port that does not speak TLS: the client fails the
//! handshake and never sends a credential. A listener of the test's own
//! stands in for a plaintext broker and records every byte it receives.

use std::time::Duration;

use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::secret_forms;

/// Accepts one connection, reads until the client pauses, answers as a
/// plaintext RabbitMQ answers a header it does not understand (its own
/// protocol header), closes, and returns what it read.
async fn plaintext_listener(listener: TcpListener) -> Vec<u8> {
    let (mut socket, _) = listener.accept().await.expect("the client connects");
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_millis(700), socket.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) if !received.is_empty() => break,
            Err(_) => {}
        }
    }
    let _ = socket.write_all(b"AMQP\x00\x00\x09\x01").await;
    let _ = socket.shutdown().await;
    // Whatever still arrives after the answer counts too.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.read_to_end(&mut rest)).await;
    received.extend(rest);
    received
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_port_given_as_amqps_never_sees_a_credential() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let recording = tokio::spawn(plaintext_listener(listener));
    let secret = format!("SECRETPASS{}", uuid::Uuid::new_v4().simple());
    let url = format!("amqps://guest:{secret}@127.0.0.1:{port}/%2f");
    let result = RabbitMqBackend::with_options(
        &url,
        RabbitMqOptions::default().connect_timeout(Duration::from_secs(10)),
    )
    .await;
    let received = tokio::time::timeout(Duration::from_secs(20), recording)
        .await
        .expect("the listener is done")
        .expect("the listener ran");

    let error = match result {
        Ok(_) => panic!("connected to a port that does not speak TLS"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("does not speak TLS"), "{error}");
    assert!(!error.contains(&secret), "{error}");
    assert!(
        received.first() == Some(&0x16),
        "the first byte sent is a TLS handshake record, not AMQP: {:?}",
        &received[..received.len().min(16)]
    );
    assert!(!contains(&received, b"AMQP"), "no AMQP header was sent");
    assert!(!contains(&received, b"guest"), "no user name was sent");
    for form in secret_forms(&secret) {
        assert!(
            !contains(&received, form.as_bytes()),
            "the password was sent (as {form})"
        );
    }
}
