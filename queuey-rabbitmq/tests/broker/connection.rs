//! Losing the connection, closing the backend, and keeping the password
//! secret.

use std::time::{Duration, Instant};

use futures::StreamExt;
use queuey_core::backend::Backend;
use queuey_core::{BackendErrorKind, Error, QueueConfig};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::{self, DeleteUser, envelope, kind, within};

/// A connection closed by the broker: the backend connects again, the
/// stream goes on consuming (no error item), a delivery taken on the old
/// connection cannot be settled (and says so), nothing was acknowledged,
/// and publishing works on the new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_replaced_and_the_stream_goes_on() {
    let broker = broker!("a_lost_connection_is_replaced_and_the_stream_goes_on");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("loss");
    let config = QueueConfig::new(&q).prefetch(2);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    for n in 0..3 {
        within("publish", backend.publish(&envelope(&q, n)))
            .await
            .unwrap();
    }
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    let held = within("delivery", stream.next()).await.unwrap().unwrap();
    assert!(!held.redelivered());

    broker
        .close_connection(&broker.connection_name("backend"))
        .await;

    // Settling a delivery of the dead connection fails, never reports success.
    let e = within("ack", held.ack()).await.unwrap_err();
    assert!(
        matches!(
            kind(&e),
            BackendErrorKind::NotSettled | BackendErrorKind::ConnectionLost
        ),
        "{e}"
    );

    // The stream carries on: every job comes again, from the new connection.
    let mut seen = std::collections::BTreeSet::new();
    let mut redelivered = 0;
    while seen.len() < 3 {
        let delivery = within("delivery after the reconnect", stream.next())
            .await
            .expect("the stream goes on after a reconnect")
            .expect("no error item for a connection that healed");
        let n = support::n_of(delivery.envelope());
        if delivery.redelivered() {
            redelivered += 1;
        }
        match within("ack", delivery.ack()).await {
            Ok(()) => {
                seen.insert(n);
            }
            // Buffered from the old connection: it comes again.
            Err(e) => assert_eq!(kind(&e), BackendErrorKind::NotSettled, "{e}"),
        }
    }
    assert!(redelivered >= 2, "the unacked jobs came back redelivered");
    assert!(backend.is_connected());
    within(
        "publish after the reconnect",
        backend.publish(&envelope(&q, 9)),
    )
    .await
    .unwrap();
    let next = within("the new job", stream.next()).await.unwrap().unwrap();
    within("ack", next.ack()).await.unwrap();
    broker.wait_ready(&q, 0).await;
}

/// A queue deleted while the backend was cut off is declared again on the
/// new connection, before anything is published to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_queues_are_replayed_on_a_new_connection() {
    let broker = broker!("declared_queues_are_replayed_on_a_new_connection");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("replay");
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    broker.delete_raw(&q).await;
    assert!(!broker.exists(&q).await);
    broker
        .close_connection(&broker.connection_name("backend"))
        .await;
    // The publish waits for the reconnect, which declares `q` first.
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();
    broker.wait_ready(&q, 1).await;
}

/// Several addresses: a dead one first, then the broker. The backend
/// connects through the one that answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_addresses_are_tried_in_turn() {
    let broker = broker!("several_addresses_are_tried_in_turn");
    let dead = "amqp://guest:guest@127.0.0.1:1/%2f".to_owned();
    let options = RabbitMqOptions::default()
        .connection_name(broker.connection_name("addresses"))
        .connect_timeout(std::time::Duration::from_secs(2));
    let backend = within(
        "connect",
        RabbitMqBackend::with_options([dead.as_str(), broker.url.as_str()], options),
    )
    .await
    .unwrap();
    assert!(backend.is_connected());
    let q = broker.queue("addresses");
    within(
        "declare",
        backend.declare(std::slice::from_ref(&QueueConfig::new(&q))),
    )
    .await
    .unwrap();
    within("close", backend.close()).await.unwrap();
}

/// A port that was free a moment ago: nothing listens on it.
/// A port where nothing listens, below the range the kernel picks the
/// local ports of outgoing connections from: a port of that range can
/// become a connection's own source port, and a connect to it then reaches
/// itself and hangs in the handshake instead of being refused.
fn unused_port() -> u16 {
    queuey_core::__private::free_local_port().expect("a free local port")
}

/// A port where nothing listens, with the wait turned off: the error comes
/// at once, names the address, password masked, and says what to check.
/// Needs no broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_says_to_check_that_rabbitmq_runs_there() {
    let port = unused_port();
    let url = format!("amqp://guest:refused-SECRET@127.0.0.1:{port}/%2f");
    let fail_fast = RabbitMqOptions::default().connect_wait(Duration::ZERO);
    let started = Instant::now();
    let e = within(
        "connect",
        RabbitMqBackend::with_options(url.as_str(), fail_fast),
    )
    .await
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no wait: {:?}",
        started.elapsed()
    );
    assert_eq!(kind(&e), BackendErrorKind::ConnectionLost, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "connecting to RabbitMQ at `amqp://guest:***@127.0.0.1:{port}/%2f`: "
        )),
        "{text}"
    );
    assert!(
        text.contains("check that RabbitMQ runs at that address and port"),
        "{text}"
    );
    assert!(text.contains("`AMQP_URL`"), "{text}");
    assert!(!text.contains("refused-SECRET"), "{text}");
}

/// Nothing listens, and the backend waits for it: never less than the
/// connect wait, then the last error, naming the bound; one WARN line for
/// the first failure, not one per attempt, and never the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_is_waited_for_up_to_the_connect_wait() {
    // The harness installs the log capture.
    let _broker = broker!("an_unreachable_broker_is_waited_for_up_to_the_connect_wait");
    let port = unused_port();
    let url = format!("amqp://guest:waiting-SECRET@127.0.0.1:{port}/%2f");
    let wait = Duration::from_millis(1_500);
    let options = RabbitMqOptions::default()
        .connect_wait(wait)
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(200));
    let started = Instant::now();
    let e = within(
        "connect",
        RabbitMqBackend::with_options(url.as_str(), options),
    )
    .await
    .unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= wait, "gave up early, after {waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert_eq!(kind(&e), BackendErrorKind::ConnectionLost, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "connecting to RabbitMQ at `amqp://guest:***@127.0.0.1:{port}/%2f`: "
        )),
        "{text}"
    );
    assert!(
        text.contains("check that RabbitMQ runs at that address and port"),
        "{text}"
    );
    assert!(text.contains("connect wait of 1.5s"), "{text}");
    assert!(text.contains("`RabbitMqOptions::connect_wait`"), "{text}");
    assert!(!text.contains("waiting-SECRET"), "{text}");
    let attempts: u32 = text
        .split(" attempts)")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no attempt count in: {text}"));
    assert!(attempts > 3, "{attempts} attempts in 1.5 s: {text}");
    let warnings = support::warnings_mentioning(&format!("127.0.0.1:{port}"));
    assert_eq!(warnings.len(), 1, "throttled to one line: {warnings:?}");
    assert!(
        warnings[0].contains("cannot be reached yet") && warnings[0].contains("guest:***@"),
        "{warnings:?}"
    );
    assert!(!warnings[0].contains("waiting-SECRET"), "{warnings:?}");
}

/// A broker that starts listening while the backend waits is connected to,
/// and works: a port that refuses for 1.5 s, then forwards to the broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_comes_up_during_the_wait_is_connected_to() {
    let broker = broker!("a_broker_that_comes_up_during_the_wait_is_connected_to");
    // The broker's `host:port`, as its URL names it.
    let (scheme, rest) = broker.url.split_once("://").expect("scheme://");
    let (credentials, rest) = rest.rsplit_once('@').unwrap_or(("", rest));
    let (authority, vhost) = rest.split_once('/').unwrap_or((rest, ""));
    let target = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:5672")
    };
    let port = unused_port();
    let url = format!("{scheme}://{credentials}@127.0.0.1:{port}/{vhost}");
    let opens = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the port is still free");
        while let Ok((mut client, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    let options = RabbitMqOptions::default()
        .connection_name(broker.connection_name("late"))
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(200));
    let started = Instant::now();
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(url.as_str(), options),
    )
    .await
    .expect("connects once the port answers");
    assert!(started.elapsed() >= Duration::from_millis(1_500));
    assert!(backend.is_connected());
    let q = broker.queue("late");
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();
    broker.wait_ready(&q, 1).await;
    within("close", backend.close()).await.unwrap();
    opens.abort();
}

/// Refused credentials and a virtual host that does not exist fail at
/// once, although the backend would wait minutes for a broker that is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_and_a_missing_virtual_host_fail_without_waiting() {
    let broker = broker!("refused_credentials_and_a_missing_virtual_host_fail_without_waiting");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let wrong_password = broker.url_as("guest", &format!("wrong-{id}"));
    let (base, _vhost) = broker.url.rsplit_once('/').expect("a vhost in the URL");
    let missing_vhost = format!("{base}/queuey-missing-{id}");
    for url in [wrong_password, missing_vhost] {
        let started = Instant::now();
        let e = within("connect", RabbitMqBackend::connect(url.as_str()))
            .await
            .unwrap_err();
        assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "waited {:?} for an answer that cannot change: {e}",
            started.elapsed()
        );
        assert!(!e.to_string().contains("connect wait"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_streams_and_later_calls_fail() {
    let broker = broker!("close_ends_streams_and_later_calls_fail");
    let backend = broker.backend(RabbitMqOptions::default()).await;
    let q = broker.queue("close");
    let config = QueueConfig::new(&q);
    within("declare", backend.declare(std::slice::from_ref(&config)))
        .await
        .unwrap();
    let mut stream = within("consume", backend.consume(&config)).await.unwrap();
    within("close", backend.close()).await.unwrap();
    within("close twice", backend.close()).await.unwrap();
    assert!(within("stream end", stream.next()).await.is_none());
    let e = within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::ShutDown), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_never_shows_in_debug_errors_or_logs() {
    let broker = broker!("the_password_never_shows_in_debug_errors_or_logs");
    let (scheme, rest) = broker.url.split_once("://").expect("scheme://");
    let host_and_vhost = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let id = uuid::Uuid::new_v4().simple().to_string();

    // A wrong password: the error names the broker, never the secret.
    let wrong = format!("Wr0ng-{id}");
    support::watch_secret(&wrong);
    let url = format!("{scheme}://guest:{wrong}@{host_and_vhost}");
    let e = within("connect", RabbitMqBackend::connect(&url))
        .await
        .unwrap_err();
    for shown in [e.to_string(), format!("{e:?}")] {
        assert!(!shown.contains(&wrong), "{shown}");
        assert!(shown.contains("***"), "{shown}");
    }

    // A real user with a secret password.
    let user = format!("queuey-test-{id}");
    let secret = format!("S3cret-{id}");
    support::watch_secret(&secret);
    broker.rabbitmqctl(&["add_user", &user, &secret]).await;
    let _user_cleanup = DeleteUser(user.clone());
    broker
        .rabbitmqctl(&[
            "set_permissions",
            "-p",
            "/",
            &user,
            "^queuey-test\\.",
            "^(queuey-test\\..*|amq\\.default)$",
            "^queuey-test\\.",
        ])
        .await;
    let url = format!("{scheme}://{user}:{secret}@{host_and_vhost}");
    let options = RabbitMqOptions::default().connection_name(broker.connection_name("secret"));
    let backend = within(
        "connect",
        RabbitMqBackend::with_options(&url, options.clone()),
    )
    .await
    .expect("the temporary user connects");
    let q = broker.queue("secret");
    within("declare", backend.declare(&[QueueConfig::new(&q)]))
        .await
        .unwrap();
    within("publish", backend.publish(&envelope(&q, 1)))
        .await
        .unwrap();
    let missing = broker.queue("secret-missing");
    let e = within("publish", backend.publish(&envelope(&missing, 1)))
        .await
        .unwrap_err();
    for shown in [
        format!("{backend:?}"),
        format!("{options:?}"),
        e.to_string(),
        format!("{e:?}"),
    ] {
        assert!(!shown.contains(&secret), "{shown}");
    }
    assert!(
        format!("{backend:?}").contains(&format!("{user}:***@")),
        "{backend:?}"
    );
    within("close", backend.close()).await.unwrap();

    let (leaks, events) = support::log_leaks();
    assert!(events > 0, "no log events were captured");
    // At trace level lapin logs the login frame, whose bytes are the
    // password (`LongString([0, 113, ...])`): the one known leak, and only
    // from the AMQP client's own targets, never from queuey's.
    let ours: Vec<&String> = leaks
        .iter()
        .filter(|line| {
            !line
                .split_whitespace()
                .nth(1)
                .is_some_and(|t| t.starts_with("lapin"))
        })
        .collect();
    assert!(
        ours.is_empty(),
        "the password reached queuey's logs: {ours:?}"
    );
    assert!(
        leaks
            .iter()
            .any(|line| line.contains(&support::secret_forms(&secret)[1])),
        "lapin's trace log no longer shows the login frame's bytes; if a lapin upgrade \
         fixed that, update the logging docs of queuey-rabbitmq and this test: {leaks:?}"
    );
    // The documented directive keeps every such line out, at any level of
    // everything else.
    let filtered = support::filtered_log_leaks();
    assert!(
        filtered.is_empty(),
        "the password passed the documented filter `{}`: {filtered:?}",
        queuey_rabbitmq::SECRET_SAFE_LOG_DIRECTIVE
    );
}

#[test]
fn a_secret_is_searched_for_as_text_and_as_bytes() {
    let forms = support::secret_forms("S3c");
    assert_eq!(
        forms,
        ["S3c", "83, 51, 99", "533363", "533363", "0x53, 0x33, 0x63"]
    );
    // As lapin's trace log prints the login frame's response field.
    let frame = format!(
        "{:?}",
        lapin::types::LongString::from(b"\0user\0S3c".to_vec())
    );
    assert!(
        forms.iter().any(|form| frame.contains(form.as_str())),
        "{frame}"
    );
}
