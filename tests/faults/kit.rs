//! The fault proxy itself, against a local echo server (no broker needed):
//! each fault does what the scenarios rely on.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::fault::proxy::Proxy;

/// An echo server on a free loopback port.
async fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = socket.read(&mut buffer).await {
                    if n == 0 || socket.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

async fn round_trip(client: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    client.write_all(b"ping").await?;
    let mut answer = vec![0u8; 4];
    client.read_exact(&mut answer).await?;
    Ok(answer)
}

const BOUND: Duration = Duration::from_secs(5);

#[tokio::test]
async fn the_proxy_carries_delays_resets_refuses_and_black_holes() {
    let proxy = Proxy::start(echo_server().await).await;
    let address = proxy.rewrite("amqp://u:p@127.0.0.1:1/%2f");
    assert!(address.starts_with("amqp://u:p@127.0.0.1:") && address.ends_with("/%2f"));
    let target = crate::fault::proxy::broker_address(&address);

    // Carries.
    let mut client = TcpStream::connect(target).await.unwrap();
    assert_eq!(round_trip(&mut client).await.unwrap(), b"ping");
    assert_eq!(proxy.open_connections(), 1);

    // Latency: both ways, per chunk.
    proxy.latency(Duration::from_millis(100));
    let started = Instant::now();
    round_trip(&mut client).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    proxy.latency(Duration::ZERO);

    // Black hole: nothing comes back, nothing is closed; it resumes after.
    proxy.black_hole(true);
    client.write_all(b"ping").await.unwrap();
    let mut answer = vec![0u8; 4];
    let silent =
        tokio::time::timeout(Duration::from_millis(500), client.read_exact(&mut answer)).await;
    assert!(silent.is_err(), "data crossed a black hole");
    proxy.black_hole(false);
    tokio::time::timeout(BOUND, client.read_exact(&mut answer))
        .await
        .expect("the held data arrives once the hole lifts")
        .unwrap();
    assert_eq!(answer, b"ping");

    // Cut: the client sees a reset, not an orderly close.
    proxy.cut();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(BOUND, client.read(&mut byte))
        .await
        .unwrap();
    let error = read.expect_err("a cut connection resets");
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");

    // Refuse: new connections are reset at once; then accepted again.
    proxy.refuse(true);
    let mut refused = TcpStream::connect(target).await.unwrap();
    assert!(
        tokio::time::timeout(BOUND, round_trip(&mut refused))
            .await
            .unwrap()
            .is_err()
    );
    proxy.refuse(false);
    let mut again = TcpStream::connect(target).await.unwrap();
    assert_eq!(round_trip(&mut again).await.unwrap(), b"ping");
    assert!(proxy.accepted_connections() >= 3);
}
