//! A private RabbitMQ node that a test starts, breaks and stops itself,
//! so that stopping or killing a broker never touches the shared one.
//!
//! The node gets its own name, AMQP and distribution ports (free ones,
//! picked when it starts), and a temporary directory owned by the
//! `rabbitmq` user holding its mnesia and log directories, pid file,
//! config and enabled-plugins files. [`PrivateNode::start`] is the one
//! place that starts the server and waits for it; dropping the node stops
//! it (also when the test panics) and removes the directory. Nothing here
//! ever signals a process by name: the server's pid comes from its own pid
//! file.
//!
//! The server is the machine's `rabbitmq-server`, or with
//! `QUEUEY_TEST_RABBITMQ_ROOT=DIR` the one installed in the Debian root
//! `DIR` (how CI runs these tests on RabbitMQ 4.3: `.ci/rabbitmq4.sh`
//! installs it and mounts the root's `/proc` and `/sys`). Such a node runs
//! chrooted into `DIR` as the root's `rabbitmq` user, its directory lives
//! in the root's `/tmp`, its `rabbitmqctl` calls go through the root's own
//! CLI, and it denies transient non-exclusive queues as upstream's 4.3
//! does (Debian's package permits them again).

use std::path::{Path, PathBuf};

use super::certs::{self, Certs};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may take to come up.
const STARTUP: Duration = Duration::from_secs(90);

/// One private node. See the module documentation.
pub(crate) struct PrivateNode {
    name: String,
    port: u16,
    dist_port: u16,
    dir: PathBuf,
    server: Option<Child>,
    tls: Option<NodeTls>,
    /// Settings of the `rabbit` application given on the server's command
    /// line (`-rabbit KEY VALUE`), e.g. ones `rabbitmq.conf` has no key for.
    rabbit_env: Vec<(String, String)>,
    /// The management API's plain http port, when the plugin is on that way.
    mgmt_port: Option<u16>,
}

/// What the node offers over TLS: an AMQPS listener (peer certificates
/// verified when presented, `EXTERNAL` offered), and the management API
/// over https when asked for.
pub(crate) struct NodeTls {
    /// The AMQPS port.
    pub(crate) port: u16,
    /// The management API's https port, when the plugin is on.
    pub(crate) mgmt_port: Option<u16>,
    /// The certificates, in the node's directory.
    pub(crate) certs: Certs,
}

/// The environment variable naming a Debian root whose RabbitMQ the
/// private nodes run instead of the machine's.
pub(crate) const ROOT_VAR: &str = "QUEUEY_TEST_RABBITMQ_ROOT";

/// The Debian root the private nodes run from (see the module
/// documentation), if one is given.
pub(crate) fn rabbitmq_root() -> Option<PathBuf> {
    std::env::var_os(ROOT_VAR)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// Whether this machine can run a private node (the server is installed,
/// a `rabbitmq` user exists, and we may hand it a directory).
pub(crate) fn available() -> Result<(), String> {
    let me = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("cannot run id: {e}"))?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return Err(
            "a private node needs root, to hand its directory to the rabbitmq user".to_owned(),
        );
    }
    let Some(root) = rabbitmq_root() else {
        let found = Command::new("sh")
            .args([
                "-c",
                "command -v rabbitmq-server && command -v rabbitmqctl && id -u rabbitmq",
            ])
            .env("PATH", path())
            .output()
            .map_err(|e| format!("cannot run sh: {e}"))?;
        if !found.status.success() {
            return Err("rabbitmq-server, rabbitmqctl or the rabbitmq user is missing".to_owned());
        }
        return Ok(());
    };
    for (path, what) in [
        ("usr/lib/rabbitmq/bin/rabbitmq-server", "rabbitmq-server"),
        ("usr/lib/rabbitmq/bin/rabbitmqctl", "rabbitmqctl"),
        (
            "proc/self",
            "mounted /proc (`.ci/rabbitmq4.sh start` mounts it)",
        ),
    ] {
        if !root.join(path).exists() {
            return Err(format!("{ROOT_VAR}={}: no {what} there", root.display()));
        }
    }
    Ok(())
}

/// Whether `test` may start `what` (a private node, a cluster): true where
/// [`available`] says so; else a skip notice, or a failure under
/// `QUEUEY_REQUIRE_BROKER=1`.
pub(crate) fn may_start(test: &str, what: &str) -> bool {
    match available() {
        Ok(()) => true,
        Err(why) if std::env::var("QUEUEY_REQUIRE_BROKER").as_deref() == Ok("1") => {
            panic!("{test}: cannot start {what}: {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: cannot start {what}: {why}");
            false
        }
    }
}

fn path() -> String {
    let inherited = std::env::var("PATH").unwrap_or_default();
    format!("{inherited}:/usr/sbin:/usr/bin:/sbin:/bin")
}

/// A free loopback port, outside the range outgoing connections take
/// theirs from (so that none takes it before the node binds it).
pub(crate) fn free_port() -> u16 {
    queuey_core::__private::free_local_port().expect("a free loopback port")
}

impl PrivateNode {
    /// Starts a node labelled `label` and waits until it accepts AMQP
    /// connections.
    pub(crate) async fn start(label: &str) -> PrivateNode {
        let label = label.to_owned();
        blocking(move || PrivateNode::start_blocking(&label, None, Vec::new())).await
    }

    /// Starts a node whose `rabbit` application gets `env` on the command
    /// line (`consumer_timeout`, `channel_tick_interval`, ...), and waits
    /// until it accepts AMQP connections.
    pub(crate) async fn start_with_rabbit_env(label: &str, env: &[(&str, &str)]) -> PrivateNode {
        let label = label.to_owned();
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        blocking(move || PrivateNode::start_blocking(&label, None, env)).await
    }

    /// A node made ready (name, ports, directory) but not started, so that
    /// its URL is known before it runs; [`Self::restart`] starts it.
    pub(crate) async fn planned(label: &str) -> PrivateNode {
        let label = label.to_owned();
        blocking(move || {
            let node = PrivateNode::new_blocking(&label, None, Vec::new());
            node.prepare_dir();
            node
        })
        .await
    }

    /// Starts a node with the management API over plain http on a port of
    /// its own ([`Self::mgmt_http_url`]), and waits until both AMQP and the
    /// API answer.
    pub(crate) async fn start_with_management(label: &str) -> PrivateNode {
        let label = label.to_owned();
        blocking(move || {
            let mut node = PrivateNode::new_blocking(&label, None, Vec::new());
            node.mgmt_port = Some(free_port());
            node.prepare_dir();
            node.spawn_server();
            node.await_startup();
            node
        })
        .await
    }

    /// Starts a node with a TLS listener beside its plain one, certificates
    /// made for it, a user for the client certificate ([`certs::CLIENT_USER`],
    /// no password), and with `management` the management API over https
    /// only.
    pub(crate) async fn start_tls(label: &str, management: bool) -> PrivateNode {
        let label = label.to_owned();
        blocking(move || {
            let node = PrivateNode::start_blocking(&label, Some(management), Vec::new());
            let user = certs::CLIENT_USER;
            for args in [
                vec!["add_user", user, "unused-password"],
                vec!["clear_password", user],
                vec!["set_permissions", "-p", "/", user, ".*", ".*", ".*"],
            ] {
                node.ctl_blocking(&args).expect("the certificate's user");
            }
            node
        })
        .await
    }

    fn start_blocking(
        label: &str,
        tls_management: Option<bool>,
        rabbit_env: Vec<(String, String)>,
    ) -> PrivateNode {
        let mut node = PrivateNode::new_blocking(label, tls_management, rabbit_env);
        node.prepare_dir();
        node.spawn_server();
        node.await_startup();
        node
    }

    /// The node's name, ports and certificates; nothing on disk yet but
    /// the certificates.
    fn new_blocking(
        label: &str,
        tls_management: Option<bool>,
        rabbit_env: Vec<(String, String)>,
    ) -> PrivateNode {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let short = &id[..8];
        let base = rabbitmq_root().map_or_else(std::env::temp_dir, |root| root.join("tmp"));
        let dir = base.join(format!("queuey-node-{label}-{short}"));
        PrivateNode {
            name: format!("queuey-{label}-{short}@localhost"),
            port: free_port(),
            dist_port: free_port(),
            tls: tls_management.map(|management| NodeTls {
                port: free_port(),
                mgmt_port: management.then(free_port),
                certs: Certs::generate(&dir.join("certs")),
            }),
            dir,
            server: None,
            rabbit_env,
            mgmt_port: None,
        }
    }

    fn prepare_dir(&self) {
        let dir = &self.dir;
        for sub in ["mnesia", "log"] {
            std::fs::create_dir_all(dir.join(sub)).expect("the node's directories");
        }
        let mut plugins = Vec::new();
        let mut config = format!(
            "listeners.tcp.local = 127.0.0.1:{}\nloopback_users = none\n\
             log.console = true\nlog.console.level = warning\nlog.file = false\n",
            self.port
        );
        if let Some(tls) = &self.tls {
            let c = &tls.certs;
            plugins.push("rabbitmq_auth_mechanism_ssl");
            config.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{}\n\
                 ssl_options.cacertfile = {}\nssl_options.certfile = {}\n\
                 ssl_options.keyfile = {}\nssl_options.verify = verify_peer\n\
                 ssl_options.fail_if_no_peer_cert = false\n\
                 auth_mechanisms.1 = PLAIN\nauth_mechanisms.2 = AMQPLAIN\n\
                 auth_mechanisms.3 = EXTERNAL\nssl_cert_login_from = common_name\n",
                tls.port,
                seen_by_server(&c.ca).display(),
                seen_by_server(&c.server_cert).display(),
                seen_by_server(&c.server_key).display()
            ));
            if let Some(mgmt) = tls.mgmt_port {
                plugins.push("rabbitmq_management");
                config.push_str(&format!(
                    "management.ssl.port = {mgmt}\nmanagement.ssl.ip = 127.0.0.1\n\
                     management.ssl.cacertfile = {}\nmanagement.ssl.certfile = {}\n\
                     management.ssl.keyfile = {}\n",
                    seen_by_server(&c.ca).display(),
                    seen_by_server(&c.server_cert).display(),
                    seen_by_server(&c.server_key).display()
                ));
            }
        }
        if let Some(port) = self.mgmt_port {
            plugins.push("rabbitmq_management");
            config.push_str(&format!(
                "management.tcp.port = {port}\nmanagement.tcp.ip = 127.0.0.1\n"
            ));
        }
        if rabbitmq_root().is_some() {
            // Upstream's default on 4.3, which Debian's package turns back.
            config.push_str("deprecated_features.permit.transient_nonexcl_queues = false\n");
        }
        std::fs::write(
            dir.join("enabled_plugins"),
            format!("[{}].\n", plugins.join(",")),
        )
        .expect("enabled_plugins");
        std::fs::write(dir.join("rabbitmq.conf"), config).expect("rabbitmq.conf");
        // The root's `rabbitmq` user need not have the machine's uid.
        let mut chown = match rabbitmq_root() {
            Some(root) => {
                let mut chown = Command::new("chroot");
                chown.arg(root).arg("chown");
                chown
            }
            None => Command::new("chown"),
        };
        run_checked(
            chown
                .args(["-R", "rabbitmq:rabbitmq"])
                .arg(seen_by_server(dir)),
            "chown the node's directory",
        );
    }

    /// Starts the server in a session of its own, in the foreground (its
    /// `-detached` mode starts nothing here), with its output in the
    /// node's directory.
    fn spawn_server(&mut self) {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.out"))
            .expect("server.out");
        let err = out.try_clone().expect("server.out");
        let dir = &self.dir;
        let erl_args: Vec<String> = self
            .rabbit_env
            .iter()
            .map(|(key, value)| format!("-rabbit {key} {value}"))
            .collect();
        let seen = seen_by_server(dir);
        let settings = [
            ("RABBITMQ_NODENAME", self.name.clone()),
            ("RABBITMQ_NODE_PORT", self.port.to_string()),
            ("RABBITMQ_DIST_PORT", self.dist_port.to_string()),
            ("RABBITMQ_MNESIA_BASE", path_text(&seen.join("mnesia"))),
            ("RABBITMQ_LOG_BASE", path_text(&seen.join("log"))),
            ("RABBITMQ_PID_FILE", path_text(&seen.join("pid"))),
            (
                "RABBITMQ_ENABLED_PLUGINS_FILE",
                path_text(&seen.join("enabled_plugins")),
            ),
            (
                "RABBITMQ_CONFIG_FILE",
                path_text(&seen.join("rabbitmq.conf")),
            ),
            ("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", erl_args.join(" ")),
        ];
        let mut command = Command::new("setsid");
        match rabbitmq_root() {
            // As the root's `rabbitmq` user, with the root's environment
            // only, past Debian's wrapper (which would switch users itself).
            Some(root) => {
                command
                    .arg("chroot")
                    .arg("--userspec=rabbitmq:rabbitmq")
                    .arg(root)
                    .args(["/usr/bin/env", "-i"])
                    .args(root_environment())
                    .args(settings.iter().map(|(key, value)| format!("{key}={value}")))
                    .arg("/usr/lib/rabbitmq/bin/rabbitmq-server");
            }
            None => {
                command.arg("rabbitmq-server").envs(settings);
            }
        }
        let child = command
            .env("PATH", path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("rabbitmq-server starts");
        self.server = Some(child);
    }

    /// Waits until the node runs its application and its AMQP port answers.
    fn await_startup(&mut self) {
        let started = Instant::now();
        loop {
            if let Some(server) = self.server.as_mut()
                && let Ok(Some(status)) = server.try_wait()
            {
                panic!(
                    "the private node {} exited with {status} while starting:\n{}",
                    self.name,
                    self.output_tail()
                );
            }
            let up = self
                .ctl_blocking(&["await_startup", "--timeout", "5"])
                .is_ok()
                && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && self
                    .tls_ports()
                    .iter()
                    .all(|port| std::net::TcpStream::connect(("127.0.0.1", *port)).is_ok());
            if up {
                return;
            }
            if started.elapsed() > STARTUP {
                panic!(
                    "the private node {} did not start within {STARTUP:?}:\n{}",
                    self.name,
                    self.output_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The TLS ports the node listens on, if any, and its plain
    /// management port.
    fn tls_ports(&self) -> Vec<u16> {
        self.tls
            .iter()
            .flat_map(|t| std::iter::once(t.port).chain(t.mgmt_port))
            .chain(self.mgmt_port)
            .collect()
    }

    fn output_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.out")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The node's name (`NAME@localhost`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The AMQP URL of the node (guest may connect from loopback).
    pub(crate) fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// The node's AMQP port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// What the node offers over TLS (nodes from [`Self::start_tls`]).
    pub(crate) fn tls(&self) -> &NodeTls {
        self.tls.as_ref().expect("a node started with start_tls")
    }

    /// The node's AMQPS URL as guest, through `host` (`localhost`, which
    /// its certificate names, or `127.0.0.1`, which it does not).
    pub(crate) fn amqps_url(&self, host: &str) -> String {
        format!("amqps://guest:guest@{host}:{}/%2f", self.tls().port)
    }

    /// The management API over plain http (nodes from
    /// [`Self::start_with_management`]).
    pub(crate) fn mgmt_http_url(&self) -> String {
        let port = self
            .mgmt_port
            .expect("a node started with start_with_management");
        format!("http://127.0.0.1:{port}")
    }

    /// The management API over https, through `localhost`.
    pub(crate) fn mgmt_https_url(&self) -> String {
        let port = self
            .tls()
            .mgmt_port
            .expect("a node started with management");
        format!("https://localhost:{port}")
    }

    fn ctl_blocking(&self, args: &[&str]) -> Result<String, String> {
        let out = ctl_command(&self.name)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("rabbitmqctl does not run: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "rabbitmqctl -n {} {}: {}{}",
                self.name,
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Runs `rabbitmqctl -n NODE ARGS`, returning its output or its error.
    pub(crate) async fn ctl(&self, args: &[&str]) -> Result<String, String> {
        let name = self.name.clone();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        blocking(move || {
            let out = ctl_command(&name)
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("rabbitmqctl does not run: {e}"))?;
            if out.status.success() {
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            } else {
                Err(format!(
                    "rabbitmqctl -n {name} {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        })
        .await
    }

    /// Stops the RabbitMQ application (the Erlang node stays up): clients
    /// are disconnected and new connections refused until [`Self::start_app`].
    pub(crate) async fn stop_app(&self) {
        self.ctl(&["stop_app"]).await.expect("stop_app");
    }

    /// Starts the application again and waits until AMQP answers.
    pub(crate) async fn start_app(&self) {
        self.ctl(&["start_app"]).await.expect("start_app");
        let port = self.port;
        blocking(move || {
            let started = Instant::now();
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    started.elapsed() < STARTUP,
                    "AMQP did not come back after start_app"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .await;
    }

    /// The Erlang VM's pid (to measure its CPU).
    pub(crate) fn os_pid(&self) -> Option<u32> {
        self.vm_pid()
    }

    /// The Erlang VM's pid, from the node's pid file.
    fn vm_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills the node's VM with SIGKILL (a crash: nothing is flushed, no
    /// client is told) and reaps its launcher.
    pub(crate) async fn kill9(&mut self) {
        let pid = self.vm_pid().expect("the node's pid file");
        run_checked(
            Command::new("kill").args(["-KILL", &pid.to_string()]),
            "kill -9 the node",
        );
        let mut server = self.server.take();
        blocking(move || {
            if let Some(server) = server.as_mut() {
                let _ = server.wait();
            }
            // The VM is gone once its pid no longer exists.
            let started = Instant::now();
            while Path::new(&format!("/proc/{pid}")).exists() && started.elapsed() < STARTUP {
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .await;
        let _ = std::fs::remove_file(self.dir.join("pid"));
    }

    /// Starts the server on the node's directories (again, after
    /// [`Self::kill9`]; or for the first time, for a [planned](Self::planned)
    /// node), and waits for it.
    pub(crate) async fn restart(&mut self) {
        let mut node = std::mem::replace(
            self,
            PrivateNode {
                name: String::new(),
                port: 0,
                dist_port: 0,
                dir: PathBuf::new(),
                server: None,
                tls: None,
                rabbit_env: Vec::new(),
                mgmt_port: None,
            },
        );
        node = blocking(move || {
            node.spawn_server();
            node.await_startup();
            node
        })
        .await;
        *self = node;
    }

    /// Stops the node and removes its directory.
    fn stop_blocking(&mut self) {
        if self.name.is_empty() {
            return;
        }
        let _ = self.ctl_blocking(&["stop", "--timeout", "20"]);
        if let Some(pid) = self.vm_pid()
            && Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        if let Some(mut server) = self.server.take() {
            // The launcher ends with the VM; never wait for ever.
            let started = Instant::now();
            while matches!(server.try_wait(), Ok(None))
                && started.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(server.try_wait(), Ok(None)) {
                let _ = server.kill();
                let _ = server.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for PrivateNode {
    fn drop(&mut self) {
        self.stop_blocking();
    }
}

/// `rabbitmqctl -n NODE`, ready for its arguments: the machine's CLI, or
/// with [`ROOT_VAR`] set the root's own (run inside it as its `rabbitmq`
/// user, whose Erlang cookie the root's nodes share).
pub(crate) fn ctl_command(node: &str) -> Command {
    let mut command = match rabbitmq_root() {
        Some(root) => {
            let mut command = Command::new("chroot");
            command
                .arg("--userspec=rabbitmq:rabbitmq")
                .arg(root)
                .args(["/usr/bin/env", "-i"])
                .args(root_environment())
                .arg("rabbitmqctl");
            command
        }
        None => Command::new("rabbitmqctl"),
    };
    command.env("PATH", path()).arg("-n").arg(node);
    command
}

/// The environment of a RabbitMQ program run inside the root.
fn root_environment() -> [&'static str; 4] {
    [
        "HOME=/var/lib/rabbitmq",
        "LANG=C.UTF-8",
        "LC_ALL=C.UTF-8",
        "PATH=/usr/lib/rabbitmq/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ]
}

/// The environment variable naming the node behind `AMQP_URL`, for the
/// `rabbitmqctl` calls about the broker under test (rather than a private
/// node). Unset, they go to the machine's default node.
pub(crate) const NODE_VAR: &str = "QUEUEY_TEST_RABBITMQ_NODE";

/// `rabbitmqctl` for the broker under test (the one behind `AMQP_URL`),
/// ready for its arguments: `-n` [`NODE_VAR`] when that is set, through
/// the root's CLI when [`ROOT_VAR`] is set too.
pub(crate) fn broker_ctl_command() -> Command {
    match std::env::var(NODE_VAR) {
        Ok(node) if !node.is_empty() => ctl_command(&node),
        _ => {
            assert!(
                rabbitmq_root().is_none(),
                "{ROOT_VAR} is set: set {NODE_VAR} too, to the node behind AMQP_URL"
            );
            let mut command = Command::new("rabbitmqctl");
            command.env("PATH", path());
            command
        }
    }
}

/// `path` as the server sees it: inside the root (without the root's
/// prefix) when the node runs in one, else unchanged.
fn seen_by_server(path: &Path) -> PathBuf {
    match rabbitmq_root() {
        Some(root) => {
            let inside = path
                .strip_prefix(&root)
                .unwrap_or_else(|_| panic!("{} lies outside {}", path.display(), root.display()));
            Path::new("/").join(inside)
        }
        None => path.to_owned(),
    }
}

fn path_text(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_owned()
}

fn run_checked(command: &mut Command, what: &str) {
    let status = command
        .env("PATH", path())
        .status()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what}: {status}");
}

/// Runs blocking work off the runtime's threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
