//! The private RabbitMQ nodes and the cluster of the test suites' fault kit
//! (`tests/support/fault/`), shared as the TLS rows of `broker_throughput`
//! share its node. Needs root and the `rabbitmq-server` package.

#[allow(dead_code)]
#[path = "../../../tests/support/fault/certs.rs"]
mod certs;
#[allow(dead_code)]
#[path = "../../../tests/support/fault/cluster.rs"]
pub(crate) mod cluster;
#[allow(dead_code)]
#[path = "../../../tests/support/fault/node.rs"]
pub(crate) mod node;
