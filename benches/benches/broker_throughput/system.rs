//! What the benchmark reports about its surroundings: the machine, its load,
//! who used the CPU during a run, and the broker's version.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use lapin::types::{AMQPValue, FieldTable};
use lapin::uri::{AMQPScheme, AMQPUri};

/// Linux reports process and system CPU time in units of 1/100 s
/// (`USER_HZ`, fixed at 100 for user space).
pub(crate) const TICKS_PER_SECOND: f64 = 100.0;

/// The machine the benchmark runs on.
#[derive(Debug)]
pub(crate) struct Machine {
    pub(crate) cores: usize,
    pub(crate) memory_gib: f64,
    pub(crate) cpu_model: String,
}

impl Machine {
    pub(crate) fn read() -> Machine {
        let cores = std::thread::available_parallelism().map_or(0, usize::from);
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
            .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Machine {
            cores,
            memory_gib,
            cpu_model,
        }
    }
}

/// Resets this process's peak resident set size (`VmHWM`) to its current
/// size and returns that size, in bytes.
pub(crate) fn reset_peak_rss() -> Result<u64, String> {
    std::fs::write("/proc/self/clear_refs", "5")
        .map_err(|e| format!("cannot reset the peak RSS (/proc/self/clear_refs): {e}"))?;
    status_bytes("VmHWM:")
}

/// This process's peak resident set size since the last reset, in bytes.
pub(crate) fn peak_rss() -> Result<u64, String> {
    status_bytes("VmHWM:")
}

fn status_bytes(field: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| format!("no {field} in /proc/self/status"))
}

/// The 1-minute load average, if the system reports one.
pub(crate) fn load() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU time used so far: by this process, by the broker (when it runs on
/// this machine and is visible), and by the whole machine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuSample {
    at: Instant,
    client: u64,
    broker: Option<u64>,
    machine: u64,
}

/// CPU used between two samples, in percent of one core.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuUse {
    /// This process: the client library under test and the benchmark.
    pub(crate) client: f64,
    /// The broker's process, if it was found.
    pub(crate) broker: Option<f64>,
    /// Everything else on the machine (other processes, the kernel's own
    /// threads): a disturbance when it is high.
    pub(crate) other: f64,
}

impl CpuSample {
    pub(crate) fn now(broker_pid: Option<u32>) -> CpuSample {
        CpuSample {
            at: Instant::now(),
            client: process_ticks("self").unwrap_or(0),
            broker: broker_pid.and_then(|pid| process_ticks(&pid.to_string())),
            machine: machine_busy_ticks().unwrap_or(0),
        }
    }

    /// What was used from `self` until now.
    pub(crate) fn until_now(&self, broker_pid: Option<u32>) -> CpuUse {
        let end = CpuSample::now(broker_pid);
        let wall = end.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let percent = |ticks: u64| ticks as f64 / TICKS_PER_SECOND / wall * 100.0;
        let client = end.client.saturating_sub(self.client);
        let broker = match (self.broker, end.broker) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let machine = end.machine.saturating_sub(self.machine);
        let other = machine
            .saturating_sub(client)
            .saturating_sub(broker.unwrap_or(0));
        CpuUse {
            client: percent(client),
            broker: broker.map(percent),
            other: percent(other),
        }
    }
}

/// User plus system time of a process, from `/proc/{pid}/stat`.
pub(crate) fn process_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: count the
    // fields after the last `)`. utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// The time counters of all cores together, from the first line of
/// `/proc/stat`: user nice system idle iowait irq softirq steal ...
pub(crate) fn all_cores_ticks() -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    Some(
        line.split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect(),
    )
}

/// Busy time of all cores together, from the first line of `/proc/stat`.
pub(crate) fn machine_busy_ticks() -> Option<u64> {
    let values = all_cores_ticks()?;
    // user nice system idle iowait irq softirq steal (guest time is already
    // counted in user): everything but idle and iowait is busy.
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| values.get(i))
        .sum();
    Some(busy)
}

/// The pid of the RabbitMQ node running on this machine, if one is
/// visible: the `beam.smp` started with `-s rabbit` (the command-line
/// tools run `beam.smp` too).
pub(crate) fn broker_pid() -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            if comm.trim() != "beam.smp" {
                return None;
            }
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.windows(2)
                .any(|w| w[0] == b"-s" && w[1] == b"rabbit")
                .then_some(pid)
        })
}

/// The broker's product and version, as it announces them when a client
/// connects.
///
/// lapin does not expose the server's properties, so this speaks the
/// opening of AMQP 0-9-1 itself: it reads `connection.start`, then logs in
/// with a connection name like every other connection of the benchmark,
/// opens the vhost and closes the connection cleanly. Plain `amqp://` only.
pub(crate) fn broker_version(
    uri: &AMQPUri,
    connection_name: &str,
    timeout: Duration,
) -> Result<String, String> {
    if uri.scheme != AMQPScheme::AMQP {
        return Err("not probed over TLS".to_owned());
    }
    let address = (uri.authority.host.as_str(), uri.authority.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving the broker's address: {e}"))?
        .next()
        .ok_or("the broker's host name has no address")?;
    let stream = TcpStream::connect_timeout(&address, timeout).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    let mut amqp = Handshake { stream };
    amqp.write_raw(b"AMQP\x00\x00\x09\x01")?;

    let start = amqp.expect(CONNECTION, START)?;
    // Two version bytes, then the server-properties table.
    let (_, properties) = start
        .get(2..)
        .and_then(|table| lapin::types::parsing::parse_field_table(table).ok())
        .ok_or("connection.start has no readable server properties")?;
    let product = text(&properties, "product").unwrap_or_else(|| "broker".to_owned());
    let version = text(&properties, "version").ok_or("the broker announced no version")?;

    let user = &uri.authority.userinfo;
    let mut client = Vec::new();
    client_properties(&mut client, &[("connection_name", connection_name)])?;
    short_string(&mut client, "PLAIN")?;
    long_string(
        &mut client,
        format!("\0{}\0{}", user.username, user.password).as_bytes(),
    );
    short_string(&mut client, "en_US")?;
    amqp.send(CONNECTION, START_OK, &client)?;

    let tune = amqp.expect(CONNECTION, TUNE)?;
    let (channel_max, frame_max) = match tune.get(..6) {
        Some(t) => (&t[..2], &t[2..6]),
        None => return Err("connection.tune is too short".to_owned()),
    };
    let mut tune_ok = Vec::new();
    tune_ok.extend_from_slice(channel_max);
    tune_ok.extend_from_slice(frame_max);
    tune_ok.extend_from_slice(&0u16.to_be_bytes()); // no heartbeats
    amqp.send(CONNECTION, TUNE_OK, &tune_ok)?;

    let mut open = Vec::new();
    short_string(&mut open, &uri.vhost)?;
    short_string(&mut open, "")?;
    open.push(0);
    amqp.send(CONNECTION, OPEN, &open)?;
    amqp.expect(CONNECTION, OPEN_OK)?;

    let mut close = Vec::new();
    close.extend_from_slice(&200u16.to_be_bytes());
    short_string(&mut close, "version probe done")?;
    close.extend_from_slice(&[0, 0, 0, 0]);
    amqp.send(CONNECTION, CLOSE, &close)?;
    amqp.expect(CONNECTION, CLOSE_OK)?;
    Ok(format!("{product} {version}"))
}

const CONNECTION: u16 = 10;
const START: u16 = 10;
const START_OK: u16 = 11;
const TUNE: u16 = 30;
const TUNE_OK: u16 = 31;
const OPEN: u16 = 40;
const OPEN_OK: u16 = 41;
const CLOSE: u16 = 50;
const CLOSE_OK: u16 = 51;
const FRAME_METHOD: u8 = 1;
const FRAME_END: u8 = 0xCE;

/// A blocking AMQP connection that only knows connection-class methods on
/// channel 0.
struct Handshake {
    stream: TcpStream,
}

impl Handshake {
    fn write_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream.write_all(bytes).map_err(|e| e.to_string())
    }

    fn send(&mut self, class: u16, method: u16, arguments: &[u8]) -> Result<(), String> {
        let size = u32::try_from(arguments.len() + 4).map_err(|_| "frame too large")?;
        let mut frame = vec![FRAME_METHOD, 0, 0];
        frame.extend_from_slice(&size.to_be_bytes());
        frame.extend_from_slice(&class.to_be_bytes());
        frame.extend_from_slice(&method.to_be_bytes());
        frame.extend_from_slice(arguments);
        frame.push(FRAME_END);
        self.write_raw(&frame)
    }

    /// Reads the next method frame and checks it is `class.method`; returns
    /// its arguments. A `connection.close` from the broker is an error with
    /// its reply text.
    fn expect(&mut self, class: u16, method: u16) -> Result<Vec<u8>, String> {
        let mut header = [0u8; 7];
        self.stream
            .read_exact(&mut header)
            .map_err(|e| format!("reading from the broker: {e}"))?;
        let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]) as usize;
        let mut payload = vec![0u8; size + 1];
        self.stream
            .read_exact(&mut payload)
            .map_err(|e| format!("reading from the broker: {e}"))?;
        if header[0] != FRAME_METHOD || payload.pop() != Some(FRAME_END) || payload.len() < 4 {
            return Err("the broker sent an unexpected frame".to_owned());
        }
        let got = (
            u16::from_be_bytes([payload[0], payload[1]]),
            u16::from_be_bytes([payload[2], payload[3]]),
        );
        let arguments = payload.split_off(4);
        if got == (CONNECTION, CLOSE) {
            let text_len = arguments.get(2).copied().unwrap_or(0) as usize;
            let text = arguments.get(3..3 + text_len).unwrap_or_default();
            return Err(format!(
                "the broker closed the connection: {}",
                String::from_utf8_lossy(text)
            ));
        }
        if got != (class, method) {
            return Err(format!(
                "expected method {class}.{method}, got {}.{}",
                got.0, got.1
            ));
        }
        Ok(arguments)
    }
}

fn short_string(buffer: &mut Vec<u8>, s: &str) -> Result<(), String> {
    let len = u8::try_from(s.len()).map_err(|_| format!("`{s}` is over 255 bytes"))?;
    buffer.push(len);
    buffer.extend_from_slice(s.as_bytes());
    Ok(())
}

fn long_string(buffer: &mut Vec<u8>, bytes: &[u8]) {
    buffer.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    buffer.extend_from_slice(bytes);
}

/// A field table of long-string values.
fn client_properties(buffer: &mut Vec<u8>, entries: &[(&str, &str)]) -> Result<(), String> {
    let mut table = Vec::new();
    for (key, value) in entries {
        short_string(&mut table, key)?;
        table.push(b'S');
        long_string(&mut table, value.as_bytes());
    }
    long_string(buffer, &table);
    Ok(())
}

fn text(table: &FieldTable, key: &str) -> Option<String> {
    match table.inner().get(key)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        _ => None,
    }
}
