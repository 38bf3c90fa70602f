//! CPU time from `/proc`: of the child processes this process has reaped,
//! and of the server a system keeps its jobs in.

use std::collections::HashSet;

/// Linux reports CPU time in units of 1/100 s (`USER_HZ`, fixed at 100
/// for user space).
pub(crate) const TICKS_PER_SECOND: u64 = 100;

/// The server processes whose CPU time a run counts.
#[derive(Clone, Debug)]
pub(crate) enum ServerProcesses {
    /// One process (the RabbitMQ node, a private redis-server).
    Pid(u32),
    /// Every process with this command name, with the time of the children
    /// they reaped: PostgreSQL's backends come and go with their
    /// connections, and the time of one that exited moves to the
    /// postmaster's count of its children.
    Named(&'static str),
    /// Not found on this machine: no server figure.
    Unknown,
}

impl ServerProcesses {
    /// Their CPU time so far, in ticks.
    pub(crate) fn ticks(&self) -> Option<u64> {
        match self {
            ServerProcesses::Pid(pid) => stat_ticks(&pid.to_string(), false),
            ServerProcesses::Named(name) => Some(
                pids_named(name)
                    .iter()
                    .filter_map(|pid| stat_ticks(&pid.to_string(), true))
                    .sum(),
            ),
            ServerProcesses::Unknown => None,
        }
    }
}

/// CPU time of the child processes this process has waited for, in ticks:
/// a child run's whole time once it has exited and been reaped.
pub(crate) fn reaped_children_ticks() -> Option<u64> {
    let fields = stat_fields("self")?;
    // cutime and cstime are fields 16 and 17 of /proc/PID/stat.
    Some(field(&fields, 16)? + field(&fields, 17)?)
}

/// utime + stime of `pid` (with `children`, also cutime + cstime).
fn stat_ticks(pid: &str, children: bool) -> Option<u64> {
    let fields = stat_fields(pid)?;
    let own = field(&fields, 14)? + field(&fields, 15)?;
    if children {
        Some(own + field(&fields, 16)? + field(&fields, 17)?)
    } else {
        Some(own)
    }
}

/// The fields of `/proc/{pid}/stat` after the command name, which sits in
/// parentheses and may hold spaces; the first of them is field 3.
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Field `number` (counted from 1, as `man proc` does) of `fields`.
fn field(fields: &[String], number: usize) -> Option<u64> {
    fields.get(number.checked_sub(3)?)?.parse().ok()
}

/// Pids of the processes whose command name is `name`.
fn pids_named(name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim() == name).then_some(pid)
        })
        .collect()
}

/// The RabbitMQ node listening on `port` of this machine, if it is
/// visible: the `beam.smp` process that holds the listening socket.
pub(crate) fn broker_process(port: u16) -> ServerProcesses {
    let listening = listening_inodes(port);
    let holder = pids_named("beam.smp").into_iter().find(|pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|target| {
                    let target = target.to_str()?.to_owned();
                    let inode = target.strip_prefix("socket:[")?.strip_suffix(']')?;
                    inode.parse::<u64>().ok()
                })
                .is_some_and(|inode| listening.contains(&inode))
        })
    });
    holder.map_or(ServerProcesses::Unknown, ServerProcesses::Pid)
}

/// Inodes of the sockets listening on TCP `port` (IPv4 and IPv6).
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address is `ADDR:PORT` in hex, st 0A is LISTEN, the
            // inode is the tenth field.
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let listens_here = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                == Some(port);
            if listens_here
                && *state == "0A"
                && let Ok(inode) = inode.parse()
            {
                inodes.insert(inode);
            }
        }
    }
    inodes
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
