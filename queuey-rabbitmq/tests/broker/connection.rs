//! Losing the connection, closing the backend, and keeping the password
//! secret.

use futures::StreamExt;
use queuey_core::{Backend, BackendErrorKind, Error, QueueConfig};
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::support::{self, DeleteUser, envelope, kind, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_ends_streams_with_an_error_and_acks_nothing() {
    let broker = broker!("a_lost_connection_ends_streams_with_an_error_and_acks_nothing");
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

    broker
        .close_connection(&broker.connection_name("backend"))
        .await;

    // The stream may still hand out what was buffered, then one error, then the end.
    let mut error = None;
    while let Some(item) = within("stream after the close", stream.next()).await {
        if let Err(e) = item {
            error = Some(e);
            break;
        }
    }
    let error = error.expect("the stream yielded an error");
    assert_eq!(kind(&error), BackendErrorKind::ConnectionLost, "{error}");
    assert!(within("stream end", stream.next()).await.is_none());

    // Settling now is a failure, not a silent success.
    let e = within("ack", held.ack()).await.unwrap_err();
    assert!(
        matches!(
            kind(&e),
            BackendErrorKind::NotSettled | BackendErrorKind::ConnectionLost
        ),
        "{e}"
    );
    for result in [
        within("publish", backend.publish(&envelope(&q, 9))).await,
        within("declare", backend.declare(std::slice::from_ref(&config))).await,
        within("consume", backend.consume(&config)).await.map(drop),
    ] {
        let e = result.expect_err("calls fail once the connection is gone");
        assert!(e.is_connection_lost(), "{e}");
        assert_eq!(kind(&e), BackendErrorKind::ConnectionLost);
    }
    assert!(!backend.is_connected());

    // Nothing was acknowledged: all three are back on the queue.
    broker.wait_ready(&q, 3).await;
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
    assert!(leaks.is_empty(), "the password reached the logs: {leaks:?}");
}
