//! Behaviour of `#[derive(Queues)]`: every key, alone and combined, yields
//! exactly the `QueueConfig` built by hand with the core's builders.

use std::time::Duration;

use queuey_core::{Backoff, QueueConfig, Queues, RetryPolicy};

const SECOND: Duration = Duration::from_secs(1);

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "shop")]
enum Shop {
    #[queue(
        name = "mail",
        prefetch = 32,
        durable = true,
        message_ttl = "30s",
        max_priority = 10,
        retry(
            max_attempts = 5,
            backoff = "exponential",
            base = "1s",
            factor = 2,
            max = "5m",
            jitter = true
        )
    )]
    Emails,
    WebhookCalls,
    #[queue(prefetch = 1)]
    Prefetch,
    #[queue(durable = false)]
    Transient,
    #[queue(message_ttl = "500ms")]
    TtlMillis,
    #[queue(message_ttl = "5m")]
    TtlMinutes,
    #[queue(message_ttl = "1h")]
    TtlHours,
    #[queue(message_ttl = "2d")]
    TtlDays,
    #[queue(max_priority = 0)]
    NoPriorities,
    #[queue(max_priority = 255)]
    TopPriority,
    #[queue(retry())]
    RetryDefault,
    #[queue(retry(max_attempts = 1))]
    RetryOnce,
    #[queue(retry(backoff = "none"))]
    RetryNone,
    #[queue(retry(backoff = "fixed", delay = "10s", max_attempts = 3))]
    RetryFixed,
    #[queue(retry(base = "200ms"))]
    RetryBase,
    #[queue(retry(factor = 3))]
    RetryFactorInt,
    #[queue(retry(factor = 1.25))]
    RetryFactorFloat,
    #[queue(retry(max = "1m"))]
    RetryMax,
    #[queue(retry(jitter = false))]
    RetryNoJitter,
    #[queue(retry(jitter = true, backoff = "exponential"))]
    RetryJitter,
}

fn exponential(base: Duration, factor: f64, max: Duration) -> Backoff {
    Backoff::exponential(base, factor, max).expect("valid backoff")
}

fn policy(max_attempts: u32, backoff: Backoff) -> RetryPolicy {
    RetryPolicy::new(max_attempts, backoff).expect("valid policy")
}

fn default_exponential() -> Backoff {
    exponential(SECOND, 2.0, SECOND * 300)
}

/// Each variant with its name and its configuration built by hand.
fn expected() -> Vec<(Shop, &'static str, QueueConfig)> {
    let q = QueueConfig::new;
    vec![
        (
            Shop::Emails,
            "shop.mail",
            q("shop.mail")
                .prefetch(32)
                .durable(true)
                .message_ttl(SECOND * 30)
                .max_priority(10)
                .retry(policy(5, default_exponential())),
        ),
        (
            Shop::WebhookCalls,
            "shop.webhook_calls",
            q("shop.webhook_calls"),
        ),
        (
            Shop::Prefetch,
            "shop.prefetch",
            q("shop.prefetch").prefetch(1),
        ),
        (
            Shop::Transient,
            "shop.transient",
            q("shop.transient").durable(false),
        ),
        (
            Shop::TtlMillis,
            "shop.ttl_millis",
            q("shop.ttl_millis").message_ttl(Duration::from_millis(500)),
        ),
        (
            Shop::TtlMinutes,
            "shop.ttl_minutes",
            q("shop.ttl_minutes").message_ttl(SECOND * 300),
        ),
        (
            Shop::TtlHours,
            "shop.ttl_hours",
            q("shop.ttl_hours").message_ttl(SECOND * 3600),
        ),
        (
            Shop::TtlDays,
            "shop.ttl_days",
            q("shop.ttl_days").message_ttl(SECOND * 2 * 86_400),
        ),
        (
            Shop::NoPriorities,
            "shop.no_priorities",
            q("shop.no_priorities").max_priority(0),
        ),
        (
            Shop::TopPriority,
            "shop.top_priority",
            q("shop.top_priority").max_priority(255),
        ),
        (
            Shop::RetryDefault,
            "shop.retry_default",
            q("shop.retry_default").retry(RetryPolicy::default()),
        ),
        (
            Shop::RetryOnce,
            "shop.retry_once",
            q("shop.retry_once").retry(policy(1, default_exponential())),
        ),
        (
            Shop::RetryNone,
            "shop.retry_none",
            q("shop.retry_none").retry(policy(5, Backoff::none())),
        ),
        (
            Shop::RetryFixed,
            "shop.retry_fixed",
            q("shop.retry_fixed").retry(policy(3, Backoff::fixed(SECOND * 10).unwrap())),
        ),
        (
            Shop::RetryBase,
            "shop.retry_base",
            q("shop.retry_base").retry(policy(
                5,
                exponential(Duration::from_millis(200), 2.0, SECOND * 300),
            )),
        ),
        (
            Shop::RetryFactorInt,
            "shop.retry_factor_int",
            q("shop.retry_factor_int").retry(policy(5, exponential(SECOND, 3.0, SECOND * 300))),
        ),
        (
            Shop::RetryFactorFloat,
            "shop.retry_factor_float",
            q("shop.retry_factor_float").retry(policy(5, exponential(SECOND, 1.25, SECOND * 300))),
        ),
        (
            Shop::RetryMax,
            "shop.retry_max",
            q("shop.retry_max").retry(policy(5, exponential(SECOND, 2.0, SECOND * 60))),
        ),
        (
            Shop::RetryNoJitter,
            "shop.retry_no_jitter",
            q("shop.retry_no_jitter").retry(policy(5, default_exponential().without_jitter())),
        ),
        (
            Shop::RetryJitter,
            "shop.retry_jitter",
            q("shop.retry_jitter").retry(policy(5, default_exponential())),
        ),
    ]
}

#[test]
fn all_lists_the_variants_in_declaration_order() {
    let expected: Vec<Shop> = expected().into_iter().map(|(queue, _, _)| queue).collect();
    assert_eq!(Shop::ALL, expected.as_slice());
}

#[test]
fn names_are_prefixed_and_snake_cased() {
    for (queue, name, _) in expected() {
        assert_eq!(queue.name(), name, "{queue:?}");
    }
}

#[test]
fn every_config_equals_the_hand_built_one() {
    for (queue, name, config) in expected() {
        let derived = queue.config();
        assert_eq!(derived, config, "{queue:?}");
        assert_eq!(derived.name(), name, "{queue:?}");
        derived
            .validate()
            .expect("derived configurations are valid");
    }
    assert_eq!(
        Shop::configs(),
        expected()
            .into_iter()
            .map(|(_, _, c)| c)
            .collect::<Vec<_>>()
    );
}

#[test]
fn settings_read_back() {
    let emails = Shop::Emails.config();
    assert_eq!(emails.settings().prefetch(), 32);
    assert!(emails.settings().durable());
    assert_eq!(emails.settings().message_ttl(), Some(SECOND * 30));
    assert_eq!(emails.priority_levels(), Some(10));
    let retry = emails.settings().retry().expect("a retry policy");
    assert_eq!(retry.max_attempts(), 5);
    match retry.backoff() {
        Backoff::Exponential(e) => {
            assert_eq!(e.base(), SECOND);
            assert_eq!(e.factor(), 2.0);
            assert_eq!(e.max(), SECOND * 300);
            assert!(e.jitter());
        }
        other => panic!("expected exponential backoff, got {other:?}"),
    }
    let plain = Shop::WebhookCalls.config();
    assert_eq!(plain.settings().prefetch(), QueueConfig::DEFAULT_PREFETCH);
    assert_eq!(plain.settings().message_ttl(), None);
    assert_eq!(plain.settings().retry(), None);
    assert_eq!(Shop::NoPriorities.config().top_priority(), 0);
    assert_eq!(
        Shop::RetryFixed
            .config()
            .settings()
            .retry()
            .map(|p| p.delay_after(7)),
        Some(SECOND * 10)
    );
}

/// A set without prefix, declared inside a function.
#[test]
fn local_set_without_prefix() {
    #[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
    enum Local {
        Only,
    }
    assert_eq!(Local::ALL, &[Local::Only]);
    assert_eq!(Local::Only.name(), "only");
    assert_eq!(Local::Only.config(), QueueConfig::new("only"));
}
