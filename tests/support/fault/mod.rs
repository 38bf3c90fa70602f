//! The fault kit: what the fault scenarios (`tests/faults/`) and the `soak`
//! example share. A TCP proxy that breaks connections ([`proxy`]), a
//! private RabbitMQ node a test may stop and kill, with a TLS listener and
//! certificates made for it when asked ([`node`], [`certs`]), a cluster of
//! such nodes ([`cluster`]), the total-queue ledger ([`ledger`]), workers
//! that handle each job once ([`once`]), the faults and their pace
//! ([`plan`], [`chaos`], [`child`]), the scenario runner ([`scenario`]),
//! the cluster failover scenario ([`failover`], [`leaders`]), the
//! restart-under-a-backlog scenario ([`backlog`]), and worker processes
//! running side by side ([`fleet`]) with the ledger of their runs
//! ([`runs`]).
//!
//! Included with `#[path]` by each user, so every item is `pub(crate)` and
//! not every user uses every item.
#![allow(dead_code)]

pub(crate) mod backlog;
pub(crate) mod certs;
pub(crate) mod chaos;
pub(crate) mod child;
pub(crate) mod cluster;
pub(crate) mod failover;
pub(crate) mod failover_report;
pub(crate) mod fleet;
pub(crate) mod leaders;
pub(crate) mod ledger;
pub(crate) mod node;
pub(crate) mod once;
pub(crate) mod plan;
#[path = "../../../queuey-redis/tests/support/private_redis.rs"]
pub(crate) mod private_redis;
pub(crate) mod proxy;
pub(crate) mod runs;
pub(crate) mod scenario;
