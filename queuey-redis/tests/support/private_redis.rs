//! A private `redis-server` for tests: its own port and directory, nothing
//! kept on disk, plaintext or TLS only, killed when dropped. Tests that
//! stop or kill Redis use one of these and never touch a shared server.
//! Shared by the test suites and benchmarks of the workspace, each
//! including this file as a module of its own and using part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` this test started.
#[derive(Debug)]
pub(crate) struct PrivateRedis {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Serves TLS only, with the files written into `dir`.
    tls: bool,
}

impl PrivateRedis {
    /// Starts one on a free port and waits until it answers.
    ///
    /// # Panics
    ///
    /// When `redis-server` is not installed or does not come up; this is
    /// for tests only.
    pub(crate) fn start() -> PrivateRedis {
        let port = queuey_core::__private::free_local_port().expect("a free port");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut redis = PrivateRedis {
            port,
            dir,
            child: None,
            tls: false,
        };
        redis.restart();
        redis
    }

    /// Starts one that serves TLS only (`--port 0 --tls-port P`), with this
    /// certificate and key (PEM) and trusting `ca` (PEM); clients need no
    /// certificate.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start), and when `redis-server` is built without
    /// TLS.
    pub(crate) fn start_tls(certificate: &str, key: &str, ca: &str) -> PrivateRedis {
        let port = queuey_core::__private::free_local_port().expect("a free port");
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (name, pem) in [
            ("server.crt", certificate),
            ("server.key", key),
            ("ca.crt", ca),
        ] {
            std::fs::write(dir.path().join(name), pem).expect("the TLS files are written");
        }
        let mut redis = PrivateRedis {
            port,
            dir,
            child: None,
            tls: true,
        };
        redis.restart();
        redis
    }

    /// `redis://127.0.0.1:PORT` (`rediss://` for a TLS server).
    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (`SIGKILL`) and waits for it to be gone.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (empty: it keeps nothing).
    pub(crate) fn restart(&mut self) {
        self.kill();
        let mut command = Command::new("redis-server");
        let port = self.port.to_string();
        if self.tls {
            let file = |name: &str| self.dir.path().join(name);
            command
                .args(["--port", "0", "--tls-port", &port])
                .arg("--tls-cert-file")
                .arg(file("server.crt"))
                .arg("--tls-key-file")
                .arg(file("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(file("ca.crt"))
                .args(["--tls-auth-clients", "no"]);
        } else {
            command.args(["--port", &port]);
        }
        let child = command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (is it installed?)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it answers `PING` (a TLS server: whether it takes a TCP
    /// connection; the TLS tests then speak TLS to it).
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls {
            return true;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}
