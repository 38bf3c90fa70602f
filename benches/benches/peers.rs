//! queuey beside the job systems a Rust team compares it with, on the same
//! machine, in one run: queuey (on its default queue, with priority
//! levels, and on one without, `queuey-fifo`) and a hand-written lapin
//! worker on RabbitMQ,
//! apalis-amqp 1 (RabbitMQ), apalis-redis 1 and bullmq-official 1.4
//! (Redis, each with AOF `everysec` and with AOF `always`), apalis-postgres
//! 1 and awa 0.6 (PostgreSQL).
//!
//! ```sh
//! cargo bench -p queuey-bench --bench peers
//! QUEUEY_PEER_SYSTEMS=queuey,lapin QUEUEY_PEER_ROWS=latency QUEUEY_PEER_RUNS=1 \
//!     cargo bench -p queuey-bench --bench peers
//! ```
//!
//! Every row of every system runs in a process of its own (this binary
//! again, with `QUEUEY_PEER_CHILD` set to what to run), so that one
//! system's threads, connections and memory never weigh on another's
//! figures, and the parent reads each process's CPU time. The runs are
//! interleaved: for each row, run 1 of every system, then run 2 of every
//! system, and so on, so a slow stretch of the machine falls on all of
//! them. The table gives the median over the runs with the range, and a
//! second table each system against queuey in the same run.
//!
//! Each system runs on its durable path, at its defaults otherwise, with
//! the same jobs: a JSON object with the job's index and 100 bytes of
//! padding.
//!
//! - **Enqueue**: 64 producers in a closed loop enqueue the jobs; nothing
//!   consumes. queuey: `Producer::enqueue` (publisher confirms, persistent
//!   messages); lapin: confirm channels, persistent messages; Redis: each
//!   enqueue acknowledged by a server writing its AOF `everysec` or
//!   `always`; PostgreSQL: `synchronous_commit = on`. Jobs per second.
//! - **Completions**: the jobs are enqueued first (not timed), then a
//!   worker with 100 job slots and a handler that does nothing runs them
//!   all: jobs per second from the worker's start to the last completion.
//!   queuey's worker has `concurrency(100)` and its queue a prefetch of 100
//!   (the default, 16, would give it 16 slots), every other setting at its
//!   default.
//! - **Latency**: the worker runs, given a second to start consuming, while
//!   producers enqueue open loop at a fixed rate, each enqueue a task of
//!   its own: for each job, from the instant its enqueue was due on the
//!   schedule to the instant its handler started, p50, p99 and p99.9. (Not
//!   from the instant `enqueue` returned: a broker delivers a persistent
//!   message before it confirms it, so most handlers would start "before"
//!   their enqueue returned; and a producer that falls behind its schedule
//!   shows here instead of hiding.) Once at 50 % of what each system
//!   sustains (the lower of its own Enqueue and Completions medians: a
//!   system offered more than its producers enqueue would only measure
//!   its producers' queue), once at a rate common to all (500 jobs/s); at
//!   most 10 s of jobs each.
//! - **Retry**: each job fails its first attempt and is retried after 1 s by
//!   the system's own retry: jobs per second from the worker's start to the
//!   last completion, and how late each second start came after the
//!   failure + 1 s (p50, p99), with a count of second starts that came
//!   early (a system that promises the delay must have none).
//! - **Memory**: 1,000 jobs of 20 KB are enqueued, then a worker with 1,000
//!   slots takes them all and each handler waits until all 1,000 have
//!   started: the process's peak resident set (VmHWM, reset once the jobs
//!   are enqueued), per 1,000 jobs.
//! - **CPU per job**: the child process of the Completions row (enqueue and
//!   worker) and the server over the same span, from `/proc`: RabbitMQ's
//!   `beam.smp`, the private redis-server, every `postgres` process.
//!
//! A system that cannot run a row says why; its cell reads `—` and the
//! reason is in the notes under the table, with each row's promise where
//! it differs from the enqueue path's.
//!
//! The parent starts two private redis-servers (AOF `everysec` and AOF
//! `always`, no snapshots, in temporary directories on free ports), empties
//! them after every run and stops them at the end (also on an error,
//! Ctrl-C or SIGTERM), makes a fresh database of the PostgreSQL server for
//! every run of a PostgreSQL system and drops it after, and uses the
//! RabbitMQ broker of `AMQP_URL`. Each side deletes what it created (queues
//! with their dead-letter and hold queues, its keys, its tables), also when
//! its run fails or times out. A bench stopped by Ctrl-C or SIGTERM kills
//! the child run in progress: the servers and the database still go, but
//! that run's RabbitMQ queues (named `queuey-peers…`) may stay behind. The
//! bench refuses to start while the machine's 1-minute load is above
//! `QUEUEY_PEER_MAX_LOAD`, and prints the load before each run.
//!
//! Environment:
//!
//! | variable | default |
//! |---|---|
//! | `QUEUEY_PEER_RUNS` | 3 runs of each row for each system |
//! | `QUEUEY_PEER_JOBS` | 20000 jobs a run (Memory: 1,000) |
//! | `QUEUEY_PEER_POSTGRES_JOBS` | 2000 jobs a run of a PostgreSQL system (Memory: 1,000) |
//! | `QUEUEY_PEER_SYSTEMS` | all: `queuey,queuey-fifo,lapin,apalis-amqp,apalis-redis,bullmq,apalis-postgres,awa` |
//! | `QUEUEY_PEER_ROWS` | all: `enqueue,completions,latency,retry,memory` (latency brings completions) |
//! | `QUEUEY_PEER_COMMON_RATE` | 500 jobs/s for every system's second Latency row |
//! | `QUEUEY_PEER_LATENCY_SECS` | 10: a Latency run offers at most this many seconds of jobs |
//! | `QUEUEY_PEER_MAX_LOAD` | 1.0 |
//! | `AMQP_URL` | `amqp://guest:guest@127.0.0.1:5672/%2f` |
//! | `QUEUEY_PEER_POSTGRES_URL` | `postgres://postgres@127.0.0.1:5432/postgres` (where each run's database is made; needs `psql`) |
//! | `RUST_LOG` | unset: no tracing subscriber in the child runs |
//!
//! Nothing here asserts a number.

#[path = "peers/amqp.rs"]
mod amqp;
#[path = "peers/apalis_amqp_side.rs"]
pub mod apalis_amqp_side;
#[path = "peers/apalis_postgres_side.rs"]
pub mod apalis_postgres_side;
#[path = "peers/apalis_redis_side.rs"]
pub mod apalis_redis_side;
#[path = "peers/awa_side.rs"]
pub mod awa_side;
#[path = "peers/bullmq_side.rs"]
pub mod bullmq_side;
#[path = "peers/child.rs"]
mod child;
#[path = "peers/cpu.rs"]
mod cpu;
#[path = "peers/lapin_side.rs"]
pub mod lapin_side;
#[path = "peers/load.rs"]
pub mod load;
#[path = "peers/parent.rs"]
mod parent;
#[path = "peers/queuey_side.rs"]
pub mod queuey_side;
#[path = "peers/redis_keys.rs"]
mod redis_keys;
#[path = "peers/report.rs"]
mod report;
#[path = "peers/servers.rs"]
mod servers;
#[path = "peers/settings.rs"]
mod settings;
#[path = "peers/side.rs"]
pub mod side;

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::var(child::CHILD) {
        Ok(json) => child::main(&json),
        Err(_) => parent::main(),
    }
}
