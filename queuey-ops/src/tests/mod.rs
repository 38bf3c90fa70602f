//! The `queuey` binary and its operations against a real RabbitMQ.
//!
//! Every test skips with a notice unless `AMQP_URL` is set
//! (`QUEUEY_REQUIRE_BROKER=1` turns the skip into a failure). Queue names
//! carry a fresh UUID and are deleted at the end, even when a test fails.
//!
//! The tests that run the binary take the one cargo built in `target/debug/`
//! (above this test binary, in `target/debug/deps/`): `cargo test -p
//! queuey-ops` builds it, for `tests/cli.rs`; with `--bin queuey` alone,
//! run `cargo build -p queuey-ops` first.

mod helpers;
mod support;

mod letters;

mod dead;
mod dead_output;
mod dead_reads;
mod dead_safety;
mod dead_story;
mod delivery_limit;
mod doctor;
mod find;
mod fleet;
mod holds;
mod measure_reads;
mod output;
mod private;
mod queues;
mod schedules;
mod secrets;
mod shards;
mod tls;
mod web;
mod web_exposure;
mod web_scope;
mod web_unheard;

use crate::{check_suffixes, dead_queue_of, work_queue_of};

#[test]
fn an_empty_or_shared_suffix_is_refused() {
    assert_eq!(dead_queue_of("emails", ".dead").unwrap(), "emails.dead");
    assert_eq!(
        dead_queue_of("emails.dead", ".dead").unwrap(),
        "emails.dead"
    );
    assert_eq!(work_queue_of("emails.dead", ".dead").unwrap(), "emails");
    assert_eq!(work_queue_of("emails", ".dead").unwrap(), "emails");
    let err = dead_queue_of("emails", "").unwrap_err().to_string();
    assert!(err.contains("empty") && err.contains("`emails`"), "{err}");
    assert!(work_queue_of("emails", "").is_err());

    assert!(check_suffixes(".dead", ".deferred", ".suspect").is_ok());
    for (dead, deferred, suspect, named) in [
        ("", ".deferred", ".suspect", "dead_suffix"),
        (".dead", "", ".suspect", "deferred_suffix"),
        (".dead", ".deferred", "", "suspect_suffix"),
        (".x", ".deferred", ".x", "suspect_suffix"),
        (".x", ".x", ".suspect", "deferred_suffix"),
        (".dead", ".x", ".x", "suspect_suffix"),
    ] {
        let err = check_suffixes(dead, deferred, suspect)
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{err}");
    }
}
