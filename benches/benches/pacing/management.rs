//! The broker's own count of deliveries from a queue, read from RabbitMQ's
//! management HTTP API (`message_stats.deliver_get` of
//! `/api/queues/{vhost}/{queue}`) with `curl`, as a cross-check of the
//! workers' count. The API is taken to be on the broker's host, port
//! 15672, with the AMQP user; `None` when it cannot be read from here.
//!
//! The credentials go to `curl` on its standard input (`-K -`), never on
//! its command line.

use std::process::Stdio;
use std::time::Duration;

use lapin::uri::AMQPUri;
use tokio::io::AsyncWriteExt;

/// The management API's port over plain HTTP.
const PORT: u16 = 15672;
/// How long the request may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How often the broker refreshes the statistics the API serves (its
/// default `collect_statistics_interval`, 5 s), with a margin.
pub(crate) const STATS_LAG: Duration = Duration::from_secs(6);

/// Deliveries the broker made from `queue` so far, as the API last
/// counted them.
pub(crate) async fn deliveries(amqp_url: &str, queue: &str) -> Option<u64> {
    let uri = amqp_url.parse::<AMQPUri>().ok()?;
    let url = format!(
        "http://{}:{PORT}/api/queues/{}/{}",
        uri.authority.host,
        encode(&uri.vhost),
        encode(queue)
    );
    let user = &uri.authority.userinfo;
    let config = format!(
        "user = \"{}:{}\"\n",
        quote(&user.username),
        quote(&user.password)
    );
    let mut curl = tokio::process::Command::new("curl")
        .args(["-s", "-f", "--max-time"])
        .arg(TIMEOUT.as_secs().to_string())
        .args(["-K", "-", &url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stdin = curl.stdin.take()?;
    stdin.write_all(config.as_bytes()).await.ok()?;
    drop(stdin);
    let output = curl.wait_with_output().await.ok()?;
    if !output.status.success() {
        return None;
    }
    let body: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    body.get("message_stats")?.get("deliver_get")?.as_u64()
}

/// `text` as one path segment of a URL.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `text` inside double quotes of a `curl` config file.
fn quote(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
