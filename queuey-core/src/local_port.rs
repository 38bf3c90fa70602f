//! A port on this machine for a private server that tests and benchmarks
//! start (a RabbitMQ node, a `redis-server`).
//!
//! A port from `bind` to port 0 lies in the outgoing range, where a
//! connection can take it before the server binds it ("address in use").
//! The ports given here lie below that range, are bindable when handed
//! out, and never handed out twice by one process.

use std::collections::BTreeSet;
use std::io;
use std::net::TcpListener;
use std::sync::Mutex;

/// The lowest port handed out.
const FLOOR: u16 = 10_000;

/// How many random ports are tried before giving up.
const TRIES: usize = 500;

/// Ports this process handed out.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A port on 127.0.0.1 that nothing listens on now, below the system's
/// range for outgoing connections, and not handed out before by this
/// process.
///
/// Where that range starts too low to leave room below it, the system
/// picks the port instead, as `bind` to port 0 does.
///
/// Processes that run at once each pick at random, so two could pick the
/// same port before either server binds it; give each its own range with
/// `QUEUEY_TEST_PORTS=LOW-HIGH` (for example `10000-20000` and
/// `20000-32000`) to rule that out.
pub fn free_local_port() -> io::Result<u16> {
    let (floor, ceiling) = std::env::var("QUEUEY_TEST_PORTS")
        .ok()
        .and_then(|range| parse_range(&range))
        .unwrap_or((FLOOR, outgoing_range_start().unwrap_or(32_768)));
    if ceiling < floor.saturating_add(1_000) {
        return TcpListener::bind("127.0.0.1:0")?
            .local_addr()
            .map(|address| address.port());
    }
    let mut handed_out = crate::lock(&HANDED_OUT);
    pick(floor, ceiling, &mut handed_out, || fastrand::u64(..)).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("no free port on 127.0.0.1 between {floor} and {ceiling} after {TRIES} tries"),
        )
    })
}

/// A random port of `floor..ceiling` that is bindable and not in
/// `handed_out`, added to it; `None` after [`TRIES`] tries.
fn pick(
    floor: u16,
    ceiling: u16,
    handed_out: &mut BTreeSet<u16>,
    mut random: impl FnMut() -> u64,
) -> Option<u16> {
    let span = u64::from(ceiling.checked_sub(floor).filter(|s| *s > 0)?);
    for _ in 0..TRIES {
        let port = floor + u16::try_from(random() % span).ok()?;
        if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed_out.insert(port);
            return Some(port);
        }
    }
    None
}

/// `LOW-HIGH`, with LOW below HIGH.
fn parse_range(range: &str) -> Option<(u16, u16)> {
    let (low, high) = range.trim().split_once('-')?;
    let (low, high) = (low.trim().parse().ok()?, high.trim().parse().ok()?);
    (low < high).then_some((low, high))
}

/// The first port of the range the system gives outgoing connections, on
/// Linux.
fn outgoing_range_start() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_of_ports_reads_low_dash_high() {
        assert_eq!(parse_range("10000-20000"), Some((10_000, 20_000)));
        assert_eq!(parse_range(" 20000 - 32000 "), Some((20_000, 32_000)));
        assert_eq!(parse_range("20000-10000"), None);
        assert_eq!(parse_range("20000"), None);
        assert_eq!(parse_range("a-b"), None);
    }

    #[test]
    fn ports_are_bindable_below_the_outgoing_range_and_never_repeated() {
        let ceiling = outgoing_range_start().unwrap_or(32_768);
        let mut seen = BTreeSet::new();
        for _ in 0..50 {
            let port = free_local_port().unwrap();
            if ceiling >= FLOOR + 1_000 {
                assert!((FLOOR..ceiling).contains(&port), "{port}");
            }
            assert!(seen.insert(port), "{port} handed out twice");
            TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }

    #[test]
    fn a_port_in_use_or_handed_out_is_skipped_and_none_left_is_none() {
        // Three ports that are free now, held so that nothing else takes them.
        let floor = free_local_port().unwrap();
        let mut held = TcpListener::bind(("127.0.0.1", floor)).ok();
        let free = (floor..floor.saturating_add(3))
            .all(|p| p == floor || TcpListener::bind(("127.0.0.1", p)).is_ok());
        if !free {
            return; // a neighbour is taken on this machine: nothing to show
        }
        let mut handed_out = BTreeSet::from([floor + 1]);
        let mut n = 0u64;
        let counter = || {
            n += 1;
            n
        };
        // floor is in use, floor + 1 handed out: only floor + 2 is given.
        assert_eq!(
            pick(floor, floor + 3, &mut handed_out, counter),
            Some(floor + 2)
        );
        assert_eq!(pick(floor, floor + 3, &mut handed_out, || 7), None);
        held.take();
        assert_eq!(pick(floor, floor + 3, &mut handed_out, || 0), Some(floor));
        assert_eq!(pick(floor, floor, &mut handed_out, || 0), None);
    }
}
