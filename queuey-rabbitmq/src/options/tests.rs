//! The builder: defaults, each method, and what reads them back.

use std::time::Duration;

use super::*;
use crate::HoldQueues;
use queuey_core::Error;

#[test]
fn defaults() {
    let o = RabbitMqOptions::default();
    assert_eq!(o.settings().connection_name(), None);
    assert!(o.settings().client_properties().is_empty());
    assert_eq!(o.settings().locale(), None);
    assert_eq!(o.settings().dead_suffix(), ".dead");
    assert!(o.settings().declare_dead_letter_queues());
    assert_eq!(o.settings().deferred_suffix(), ".deferred");
    assert_eq!(o.settings().suspect_suffix(), ".suspect");
    assert_eq!(o.settings().poison_guard(), Some(5));
    assert_eq!(o.guard_in_use(), Some((".suspect", 5)));
    assert_eq!(o.settings().hold_queues(), HoldQueues::Quorum);
    assert_eq!(o.settings().retry_granularity(), DEFAULT_QUORUM_GRANULARITY);
    assert_eq!(
        o.settings().deferred_granularity(),
        DEFAULT_QUORUM_GRANULARITY
    );
    assert_eq!(
        o.settings().publish_concurrency(),
        DEFAULT_PUBLISH_CONCURRENCY
    );
    assert_eq!(o.publish_window, DEFAULT_PUBLISH_WINDOW);
    assert_eq!(o.settings().max_message_size(), 16 * 1024 * 1024);
    assert!(o.validate().is_ok());
}

#[test]
fn builders_set_each_value() {
    let o = RabbitMqOptions::default()
        .connection_name("n")
        .client_property("k", "v")
        .locale("de_DE")
        .dead_suffix("-dlq")
        .declare_dead_letter_queues(false)
        .deferred_suffix(".wait")
        .suspect_suffix("-suspects")
        .poison_guard(None)
        .retry_granularity(Duration::from_secs(10))
        .deferred_granularity(Duration::ZERO)
        .publish_concurrency(1)
        .max_message_size(1024);
    assert_eq!(o.settings().connection_name(), Some("n"));
    assert_eq!(
        o.settings()
            .client_properties()
            .get("k")
            .map(String::as_str),
        Some("v")
    );
    assert_eq!(o.settings().locale(), Some("de_DE"));
    assert_eq!(o.settings().dead_suffix(), "-dlq");
    assert!(!o.settings().declare_dead_letter_queues());
    assert_eq!(o.dead_suffix_in_use(), None);
    assert_eq!(o.settings().deferred_suffix(), ".wait");
    assert_eq!(o.settings().suspect_suffix(), "-suspects");
    assert_eq!(o.settings().poison_guard(), None);
    assert_eq!(o.suspect_suffix_in_use(), None);
    assert_eq!(
        o.settings().retry_granularity(),
        Duration::from_secs(10).into()
    );
    assert_eq!(o.settings().deferred_granularity(), Duration::ZERO.into());
    assert_eq!(o.settings().publish_concurrency(), 1);
    assert_eq!(o.settings().max_message_size(), 1024);
    assert!(o.validate().is_ok());
}

#[test]
fn connection_properties_set_name_properties_and_locale_at_once() {
    let o = RabbitMqOptions::default()
        .client_property("old", "gone")
        .connection_properties(
            crate::ConnectionProperties::default()
                .with_connection_name("n")
                .with_client_property("k", "v")
                .with_locale("de_DE"),
        );
    assert_eq!(o.settings().connection_name(), Some("n"));
    assert_eq!(o.settings().client_properties().len(), 1);
    assert_eq!(
        o.settings()
            .client_properties()
            .get("k")
            .map(String::as_str),
        Some("v")
    );
    assert_eq!(o.settings().locale(), Some("de_DE"));
    let long = RabbitMqOptions::default().connection_properties(
        crate::ConnectionProperties::default().with_client_property("k".repeat(256), "v"),
    );
    assert!(matches!(long.validate(), Err(Error::InvalidConfig(_))));
}

#[test]
fn the_default_granularity_follows_the_hold_queues_and_a_set_one_wins() {
    let classic = RabbitMqOptions::default().hold_queues(HoldQueues::Classic);
    assert_eq!(
        classic.settings().retry_granularity(),
        Duration::from_secs(1).into()
    );
    assert_eq!(
        classic.settings().deferred_granularity(),
        Duration::from_secs(1).into()
    );
    let set = RabbitMqOptions::default()
        .retry_granularity(Duration::from_secs(5))
        .hold_queues(HoldQueues::Classic)
        .hold_queues(HoldQueues::Quorum);
    assert_eq!(
        set.settings().retry_granularity(),
        Duration::from_secs(5).into()
    );
    assert_eq!(
        set.settings().deferred_granularity(),
        DEFAULT_QUORUM_GRANULARITY
    );
}
