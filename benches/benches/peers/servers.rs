//! The servers the parent sets up: two private redis-servers (AOF
//! `everysec` and AOF `always`) and a fresh PostgreSQL database per child
//! run. Each goes when its value is dropped: at the end, on an error, on
//! Ctrl-C (the parent then returns through them) and on a panic.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cpu::ServerProcesses;
use crate::settings::Variant;
use crate::side::BoxError;

/// A redis-server of this run only, in a temporary directory, on a free
/// loopback port, with AOF on and no snapshots.
#[derive(Debug)]
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
    fsync: &'static str,
    /// Holds the AOF; deleted after the server stopped.
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts the server of `variant` and waits until it answers.
    pub(crate) fn start(variant: Variant) -> Result<RedisServer, BoxError> {
        let fsync = match variant {
            Variant::AofEverysec => "everysec",
            Variant::AofAlways => "always",
            Variant::Only => return Err("a private redis-server needs an AOF variant".into()),
        };
        let dir = tempfile::Builder::new()
            .prefix("queuey-peers-redis-")
            .tempdir()?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.path().join("redis.log"))?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "yes"])
            .args(["--appendfsync", fsync])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server (is it installed?): {e}"))?;
        let server = RedisServer {
            child,
            port,
            fsync,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server
            .command(&["PING"])
            .is_ok_and(|answer| answer == "+PONG")
        {
            if Instant::now() > deadline {
                return Err(
                    format!("the redis-server on port {port} did not answer in 10 s").into(),
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    /// `redis://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process whose CPU time counts as the server's.
    pub(crate) fn process(&self) -> ServerProcesses {
        ServerProcesses::Pid(self.child.id())
    }

    /// `appendfsync` of this server.
    pub(crate) fn fsync(&self) -> &'static str {
        self.fsync
    }

    /// Empties the server between two runs.
    pub(crate) fn flush(&self) -> Result<(), BoxError> {
        match self.command(&["FLUSHALL"])?.as_str() {
            "+OK" => Ok(()),
            other => Err(format!("FLUSHALL answered `{other}`").into()),
        }
    }

    /// Sends one command and reads the first line of the answer.
    fn command(&self, words: &[&str]) -> Result<String, BoxError> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut request = format!("*{}\r\n", words.len());
        for word in words {
            request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
        }
        stream.write_all(request.as_bytes())?;
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n") {
            if stream.read(&mut byte)? == 0 {
                break;
            }
            answer.push(byte[0]);
        }
        Ok(String::from_utf8_lossy(&answer).trim_end().to_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now.
fn free_port() -> Result<u16, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A database of the shared PostgreSQL server made for one child run,
/// dropped with this value.
#[derive(Debug)]
pub(crate) struct Database {
    /// Where `psql` connects to make and drop it.
    admin_url: String,
    name: String,
    url: String,
}

impl Database {
    /// Makes `queuey_peers_{uuid}` on the server of `admin_url` (a URL of
    /// the server with a database that exists, such as `postgres`).
    pub(crate) fn create(admin_url: &str) -> Result<Database, BoxError> {
        let name = format!("queuey_peers_{}", uuid::Uuid::new_v4().simple());
        let url = with_database(admin_url, &name)?;
        psql(admin_url, &format!("CREATE DATABASE \"{name}\""))?;
        Ok(Database {
            admin_url: admin_url.to_owned(),
            name,
            url,
        })
    }

    /// The database's URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let drop = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        if let Err(e) = psql(&self.admin_url, &drop) {
            eprintln!("peers: could not drop database {}: {e}", self.name);
        }
    }
}

/// `url` with its database (the path after the host) replaced by `name`;
/// any query is kept.
fn with_database(url: &str, name: &str) -> Result<String, BoxError> {
    let scheme_end = url
        .find("://")
        .ok_or_else(|| format!("not a PostgreSQL URL: `{url}`"))?
        + 3;
    let (base, rest) = url.split_at(scheme_end);
    let (authority, query) = match rest.find(['/', '?']) {
        Some(at) => {
            let (authority, tail) = rest.split_at(at);
            (authority, tail.find('?').map_or("", |q| &tail[q..]))
        }
        None => (rest, ""),
    };
    Ok(format!("{base}{authority}/{name}{query}"))
}

/// Runs one SQL statement with `psql` on `url`.
fn psql(url: &str, sql: &str) -> Result<(), BoxError> {
    let output = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run psql (is the PostgreSQL client installed?): {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql `{sql}`: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into())
    }
}
