//! A TCP proxy between a client and the broker that a test can break:
//! reset every connection (RST), refuse new ones, black-hole traffic
//! (stop forwarding without closing anything), or delay it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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

/// Directions that forward nothing: client to broker, broker to client.
#[derive(Clone, Copy, Default)]
struct Silence {
    up: bool,
    down: bool,
}

impl Silence {
    fn blocks(self, downstream: bool) -> bool {
        if downstream { self.down } else { self.up }
    }
}

struct State {
    upstream: SocketAddr,
    /// Bumped by every cut; each connection resets when it changes.
    cuts: watch::Sender<u64>,
    /// Which directions forward nothing while set.
    silence: watch::Sender<Silence>,
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
            silence: watch::Sender::new(Silence::default()),
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
        self.state
            .silence
            .send_replace(Silence { up: on, down: on });
    }

    /// Stops (`true`) or resumes (`false`) forwarding from the broker to
    /// the client only: what the client sends arrives, no answer comes back
    /// (a publish reaches the queue, its confirmation does not).
    pub(crate) fn mute_replies(&self, on: bool) {
        self.state.silence.send_modify(|s| s.down = on);
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
        self.state.silence.send_replace(Silence::default());
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
async fn carry(mut client: TcpStream, state: Arc<State>) {
    let Ok(mut server) = TcpStream::connect(state.upstream).await else {
        let _ = client.set_zero_linger();
        return;
    };
    // With a zero linger, closing a socket answers its peer with RST
    // instead of FIN; the halves below are borrowed, so dropping them
    // shuts nothing down on its own.
    for socket in [&client, &server] {
        let _ = socket.set_nodelay(true);
        let _ = socket.set_zero_linger();
    }
    state.open.fetch_add(1, Ordering::AcqRel);
    let mut cuts = state.cuts.subscribe();
    cuts.mark_unchanged();
    {
        let (mut client_read, mut client_write) = client.split();
        let (mut server_read, mut server_write) = server.split();
        let up = pump(&mut client_read, &mut server_write, &state, false);
        let down = pump(&mut server_read, &mut client_write, &state, true);
        tokio::select! {
            _ = cuts.changed() => {}
            () = up => {}
            () = down => {}
        }
    }
    drop(client);
    drop(server);
    state.open.fetch_sub(1, Ordering::AcqRel);
}

/// Copies one direction (broker to client if `downstream`), honouring the
/// silence and the latency, until either side fails or closes.
async fn pump(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    state: &State,
    downstream: bool,
) {
    let mut hole = state.silence.subscribe();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // Silence: neither read nor write until it lifts.
        if hole.wait_for(|s| !s.blocks(downstream)).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            // Stop reading as soon as the silence starts, even mid-wait.
            _ = hole.wait_for(|s| s.blocks(downstream)) => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let latency = state.latency_us.load(Ordering::Acquire);
        if latency > 0 {
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        if hole.wait_for(|s| !s.blocks(downstream)).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
