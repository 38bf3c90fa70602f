//! A TCP proxy between a client and the broker that a test can break:
//! reset every connection (RST), refuse new ones, black-hole traffic
//! (stop forwarding without closing anything), or delay it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A proxy listening on a free loopback port. Stops on drop, resetting
/// whatever it still carries.
pub(crate) struct Proxy {
    address: SocketAddr,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

struct State {
    upstream: SocketAddr,
    /// Bumped by every cut; each connection resets when it changes.
    cuts: watch::Sender<u64>,
    /// While set, nothing is read or written in either direction.
    black_hole: watch::Sender<bool>,
    /// While set, new connections are reset as soon as they are accepted.
    refusing: AtomicBool,
    /// Delay added to every chunk, in microseconds.
    latency_us: AtomicU64,
    /// Connections carried now.
    open: AtomicUsize,
    /// Connections accepted so far.
    accepted: AtomicUsize,
}

impl Proxy {
    /// Starts a proxy to `upstream` (a `host:port` on this machine).
    pub(crate) async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the proxy binds a loopback port");
        let address = listener.local_addr().expect("the proxy's address");
        let state = Arc::new(State {
            upstream,
            cuts: watch::Sender::new(0),
            black_hole: watch::Sender::new(false),
            refusing: AtomicBool::new(false),
            latency_us: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&state)));
        Proxy {
            address,
            state,
            accept,
        }
    }

    /// Starts a proxy to the broker of an `amqp://` URL; returns it and the
    /// URL that goes through it.
    pub(crate) async fn in_front_of(url: &str) -> (Proxy, String) {
        let upstream = broker_address(url);
        let proxy = Proxy::start(upstream).await;
        let through = proxy.rewrite(url);
        (proxy, through)
    }

    /// `url` with its host and port replaced by the proxy's.
    pub(crate) fn rewrite(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("an amqp:// URL");
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((userinfo, rest)) => (format!("{userinfo}@"), rest),
            None => (String::new(), rest),
        };
        let path = rest.find('/').map_or("", |i| &rest[i..]);
        format!("{scheme}://{userinfo}{}{path}", self.address)
    }

    /// Resets every connection the proxy carries now (RST to both sides).
    pub(crate) fn cut(&self) {
        self.state.cuts.send_modify(|n| *n += 1);
    }

    /// Stops (`true`) or resumes (`false`) forwarding, without closing
    /// anything: a silent partition. New connections are accepted but
    /// hear nothing while it lasts.
    pub(crate) fn black_hole(&self, on: bool) {
        self.state.black_hole.send_replace(on);
    }

    /// Resets new connections as soon as they arrive (`true`), as a broker
    /// that is down would refuse them, or accepts them again (`false`).
    pub(crate) fn refuse(&self, on: bool) {
        self.state.refusing.store(on, Ordering::Release);
    }

    /// Delays every chunk of data, both ways, by `delay`.
    pub(crate) fn latency(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.state.latency_us.store(micros, Ordering::Release);
    }

    /// Connections the proxy carries now.
    pub(crate) fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::Acquire)
    }

    /// Connections accepted since the proxy started.
    pub(crate) fn accepted_connections(&self) -> usize {
        self.state.accepted.load(Ordering::Acquire)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.state.black_hole.send_replace(false);
        self.cut();
    }
}

/// The `host:port` of an `amqp://` URL (port 5672 when absent).
pub(crate) fn broker_address(url: &str) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let authority = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:5672")
    };
    let authority = authority.replace("localhost", "127.0.0.1");
    authority
        .parse()
        .unwrap_or_else(|e| panic!("`{authority}` is not a socket address: {e}"))
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        state.accepted.fetch_add(1, Ordering::AcqRel);
        if state.refusing.load(Ordering::Acquire) {
            let _ = client.set_zero_linger();
            drop(client);
            continue;
        }
        tokio::spawn(carry(client, Arc::clone(&state)));
    }
}

/// Carries one connection until either side closes or the proxy cuts it.
async fn carry(client: TcpStream, state: Arc<State>) {
    let Ok(server) = TcpStream::connect(state.upstream).await else {
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    state.open.fetch_add(1, Ordering::AcqRel);
    let mut cuts = state.cuts.subscribe();
    cuts.mark_unchanged();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, Arc::clone(&state));
    let down = pump(server_read, client_write, Arc::clone(&state));
    let (mut up, mut down) = (tokio::spawn(up), tokio::spawn(down));
    tokio::select! {
        _ = cuts.changed() => {}
        _ = &mut up => {}
        _ = &mut down => {}
    }
    // Aborting the pumps drops the sockets' halves; with a zero linger the
    // kernel answers both peers with RST instead of FIN.
    up.abort();
    down.abort();
    state.open.fetch_sub(1, Ordering::AcqRel);
}

/// Copies one direction, honouring the black hole and the latency. Sets a
/// zero linger on both sockets first, so that however the copy ends (a cut
/// aborts it) both peers see a reset rather than an orderly close.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, state: Arc<State>) {
    let _ = from.as_ref().set_zero_linger();
    let _ = to.as_ref().set_zero_linger();
    let mut hole = state.black_hole.subscribe();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // Black hole: neither read nor write until it lifts.
        if hole.wait_for(|on| !*on).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            // Stop reading as soon as the hole opens, even mid-wait.
            _ = hole.wait_for(|on| *on) => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let latency = state.latency_us.load(Ordering::Acquire);
        if latency > 0 {
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        if hole.wait_for(|on| !*on).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
