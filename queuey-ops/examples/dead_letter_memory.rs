//! Peak memory of the `queuey` tool's dead-letter reads over a large
//! dead-letter queue, on the broker at `AMQP_URL`.
//!
//! ```sh
//! cargo build -p queuey-ops --bin queuey
//! AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//!     cargo run -p queuey-ops --example dead_letter_memory -- [LETTERS] [BYTES]
//! ```
//!
//! Fills a fresh dead-letter queue `queuey-ops-memory.<uuid>.dead` with
//! LETTERS dead letters (default 100,000) of about BYTES bytes (default
//! 6,144), published with confirms in batches; runs the built `queuey`
//! binary (next to this example, or `QUEUEY_BIN`) once per command and
//! samples its peak resident memory (`VmHWM` in `/proc/<pid>/status`, so
//! Linux only); starts `queuey web` on a free loopback port and measures
//! the dashboard's redrive preview; prints a table. Both queues are deleted
//! at the end, also after an error. A measurement, not a test: it asserts
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties};

type Error = Box<dyn std::error::Error>;

/// `println!` that does not panic when stdout is closed (`| head`), so that
/// the queues are still deleted.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Publishes in flight before waiting for their confirms.
const CONFIRM_BATCH: usize = 1_000;
/// How often a child's memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::var("AMQP_URL").map_err(|_| "set AMQP_URL to the broker to measure on")?;
    let mut args = std::env::args().skip(1);
    let letters: usize = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let bytes: usize = args.next().map_or(Ok(6_144), |a| a.parse())?;
    let bin = queuey_binary()?;
    let properties =
        ConnectionProperties::default().with_connection_name("queuey-ops-memory".into());
    let connection = Connection::connect(&url, properties).await?;
    let queue = format!("queuey-ops-memory.{}", uuid::Uuid::new_v4().simple());
    let dead = format!("{queue}.dead");
    let outcome = measure(&connection, &url, &bin, &queue, &dead, letters, bytes).await;
    let channel = connection.create_channel().await?;
    for name in [&queue, &dead] {
        let _ = channel
            .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    let _ = connection.close(200, ShortString::default()).await;
    outcome
}

/// The `queuey` binary: `QUEUEY_BIN`, else the one beside this example.
fn queuey_binary() -> Result<PathBuf, Error> {
    if let Some(bin) = std::env::var_os("QUEUEY_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("queuey"))
        .filter(|bin| bin.exists())
        .ok_or("no queuey binary next to this example: run `cargo build -p queuey-ops --bin queuey` first, or set QUEUEY_BIN")?;
    Ok(bin)
}

async fn measure(
    connection: &Connection,
    url: &str,
    bin: &Path,
    queue: &str,
    dead: &str,
    letters: usize,
    bytes: usize,
) -> Result<(), Error> {
    let started = Instant::now();
    let body = fill(connection, queue, dead, letters, bytes).await?;
    say!(
        "{letters} dead letters with bodies of {body} bytes in {dead}, published in {:.1?}",
        started.elapsed()
    );
    say!("binary: {}\n", bin.display());
    let mut rows = Vec::new();
    for (what, args) in [
        ("dead stats Q", vec!["dead", "stats", queue]),
        ("dead show Q '#1'", vec!["dead", "show", queue, "#1"]),
        ("dead ls Q", vec!["dead", "ls", queue]),
        ("dead redrive Q (preview)", vec!["dead", "redrive", queue]),
    ] {
        rows.push(run_cli(bin, url, what, &args).await?);
    }
    rows.extend(dashboard(bin, url, queue).await?);
    say!(
        "{:<40} {:>14} {:>9}  result",
        "command",
        "peak RSS (MiB)",
        "seconds"
    );
    for row in &rows {
        say!(
            "{:<40} {:>14.1} {:>9.1}  {}",
            row.what,
            row.peak_kib as f64 / 1024.0,
            row.seconds,
            row.result
        );
    }
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let ready = connection
        .create_channel()
        .await?
        .queue_declare(dead.into(), passive, FieldTable::default())
        .await?
        .message_count() as usize;
    say!("\n{dead} holds {ready} of {letters} dead letters after the reads");
    Ok(())
}

/// Declares the work queue and its dead-letter queue and fills the latter;
/// the size of the last body.
async fn fill(
    connection: &Connection,
    queue: &str,
    dead: &str,
    letters: usize,
    bytes: usize,
) -> Result<usize, Error> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    for name in [queue, dead] {
        channel
            .queue_declare(name.into(), durable, FieldTable::default())
            .await?;
    }
    let blob = "x".repeat(bytes.saturating_sub(180));
    let mut pending = Vec::with_capacity(CONFIRM_BATCH);
    let mut size = 0;
    for i in 0..letters {
        let payload =
            serde_json::value::to_raw_value(&serde_json::json!({ "i": i, "blob": blob }))?;
        let body = queuey_core::Envelope::new("report", queue, payload).encode()?;
        size = body.len();
        let reason = match i % 4 {
            0 => format!("HTTP 503 from upstream after {} ms", i % 1000),
            1 => format!("order {i} not found"),
            2 => "timeout".to_owned(),
            _ => format!("user {} is locked", uuid::Uuid::new_v4()),
        };
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death-reason".into(),
            AMQPValue::LongString(reason.into()),
        );
        headers.insert(
            "x-original-queue".into(),
            AMQPValue::LongString(queue.into()),
        );
        headers.insert("x-attempts".into(), AMQPValue::LongLongInt(3));
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_headers(headers);
        let confirm = channel
            .basic_publish(
                ShortString::default(),
                dead.into(),
                BasicPublishOptions::default(),
                &body,
                properties,
            )
            .await?;
        pending.push(confirm);
        if pending.len() == CONFIRM_BATCH {
            for confirm in pending.drain(..) {
                if !confirm.await?.is_ack() {
                    return Err("the broker refused a publish".into());
                }
            }
        }
    }
    for confirm in pending {
        if !confirm.await?.is_ack() {
            return Err("the broker refused a publish".into());
        }
    }
    let _ = channel.close(200, ShortString::default()).await;
    Ok(size)
}

/// One line of the table.
struct Row {
    what: String,
    peak_kib: u64,
    seconds: f64,
    result: String,
}

/// The peak resident memory of a live process, in KiB.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Waits for `child`, sampling its peak memory; the last sample and how it
/// exited.
async fn watch(child: &mut Child) -> Result<(u64, ExitStatus), Error> {
    let mut peak = 0;
    loop {
        if let Some(kib) = peak_kib(child.id()) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            return Ok((peak, status));
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

async fn run_cli(bin: &Path, url: &str, what: &str, args: &[&str]) -> Result<Row, Error> {
    let out = tempfile::NamedTempFile::new()?;
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .env("AMQP_URL", url)
        .stdout(Stdio::from(out.reopen()?))
        .stderr(Stdio::null())
        .spawn()?;
    let (peak_kib, status) = watch(&mut child).await?;
    let seconds = started.elapsed().as_secs_f64();
    let printed = std::fs::read_to_string(out.path())?;
    let result = if status.success() {
        printed
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .chars()
            .take(70)
            .collect()
    } else {
        format!("failed: {status}")
    };
    Ok(Row {
        what: what.to_owned(),
        peak_kib,
        seconds,
        result,
    })
}

/// A `queuey web` process, stopped on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The queue page (for the CSRF token), then the redrive preview.
async fn dashboard(bin: &Path, url: &str, queue: &str) -> Result<Vec<Row>, Error> {
    let port = queuey_core::__private::free_local_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let mut server = Server(
        Command::new(bin)
            .args(["web", "--listen", &listen, "--queue", queue])
            .env("AMQP_URL", url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let pid = server.0.id();
    let up = Instant::now();
    while tokio::net::TcpStream::connect(&listen).await.is_err() {
        if let Some(status) = server.0.try_wait()? {
            return Err(format!("queuey web exited: {status}").into());
        }
        if up.elapsed() > Duration::from_secs(30) {
            return Err("queuey web does not listen".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = reqwest::Client::builder().build()?;
    let origin = base.clone();
    let path = format!("/queue/{queue}");

    let started = Instant::now();
    let page = client
        .get(format!("{base}{path}"))
        .header("Origin", &origin)
        .send()
        .await?;
    let cookies: Vec<String> = page
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(str::to_owned)
        .collect();
    let status = page.status();
    let html = page.text().await?;
    let after_page = Row {
        what: "dashboard: GET /queue/Q".to_owned(),
        peak_kib: peak_kib(pid).unwrap_or(0),
        seconds: started.elapsed().as_secs_f64(),
        result: format!("HTTP {status}"),
    };
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or("no CSRF token on the queue page")?
        .to_owned();

    let started = Instant::now();
    let mut preview = client
        .post(format!("{base}{path}/redrive"))
        .header("Origin", &origin)
        .header("Referer", format!("{base}{path}"))
        .form(&[("csrf", csrf.as_str())]);
    if !cookies.is_empty() {
        preview = preview.header(reqwest::header::COOKIE, cookies.join("; "));
    }
    let response = preview.send().await?;
    let status = response.status();
    let html = response.text().await?;
    let moved = html
        .split("id=\"would-move\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or("");
    let after_preview = Row {
        what: "dashboard: POST redrive preview".to_owned(),
        peak_kib: peak_kib(pid).unwrap_or(0),
        seconds: started.elapsed().as_secs_f64(),
        result: format!("HTTP {status} {moved}"),
    };
    drop(server);
    Ok(vec![after_page, after_preview])
}
