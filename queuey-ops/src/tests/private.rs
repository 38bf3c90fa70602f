//! The private RabbitMQ node of the workspace's fault kit (with its TLS
//! listener and certificates), shared with the library's suites.

#[allow(dead_code)]
#[path = "../../../tests/support/fault/certs.rs"]
pub(crate) mod certs;

#[allow(dead_code)]
#[path = "../../../tests/support/fault/node.rs"]
pub(crate) mod node;
