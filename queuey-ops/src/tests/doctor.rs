//! `queuey doctor`, and what every tool says without the management API.

use crate::tests::support::{cli_with, harness, json, within};

/// The check called `name` in the doctor's JSON output.
fn named(checks: &serde_json::Value, name: &str) -> serde_json::Value {
    checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {checks}"))
        .clone()
}

#[tokio::test]
async fn doctor_reports_a_healthy_broker_and_never_prints_a_password() {
    let h = harness!("doctor");
    let checks = json(&h.cli(&["doctor", "--json"]));
    let by_name = |name: &str| named(&checks, name);
    for name in ["amqp", "heartbeat", "management", "same broker", "alarms"] {
        assert_eq!(by_name(name)["status"], "ok", "{name}");
    }
    assert!(
        by_name("version")["detail"]
            .as_str()
            .unwrap()
            .contains("RabbitMQ")
    );
    // The consumer-timeout check says what the workers check against.
    let timeout = by_name("consumer timeout");
    let detail = timeout["detail"].as_str().unwrap();
    assert!(
        detail.contains("RabbitMQ") && detail.contains("`RabbitMqOptions::consumer_timeout"),
        "{detail}"
    );
    // Deprecated features as the broker reports them, not as its version
    // suggests: the check agrees with what the management API lists.
    let mgmt = crate::mgmt::Management::for_amqp_url(
        &h.url,
        std::env::var("QUEUEY_MGMT_URL").ok().as_deref(),
    )
    .expect("a management client");
    let listed = mgmt
        .get("deprecated-features")
        .await
        .expect("the API answers");
    let deprecated = by_name("deprecated features");
    let detail = deprecated["detail"].as_str().unwrap();
    let transient = listed.as_ref().and_then(|list| {
        list.as_array()?
            .iter()
            .find(|f| f["name"] == "transient_nonexcl_queues")
            .map(|f| f["state"].as_str().unwrap_or("?").to_owned())
    });
    match transient.as_deref() {
        None => assert!(
            listed.is_none() == detail.contains("reports none"),
            "{detail}"
        ),
        Some("denied") => assert!(detail.contains("are refused"), "{detail}"),
        Some(_) => assert!(detail.contains("still permitted"), "{detail}"),
    }
    // Whatever the broker, the quorum-hold check names its version and
    // says whether held jobs are released reliably.
    let holds = by_name("quorum holds");
    let detail = holds["detail"].as_str().unwrap();
    assert!(detail.contains("RabbitMQ"), "{detail}");
    assert!(
        holds["status"] == "ok" || detail.contains("HoldQueues::Classic"),
        "{holds}"
    );
    // Every quorum hold of the vhost is looked at for a stall; one named
    // stalled comes with the remedy.
    let stalls = by_name("stalled holds");
    let detail = stalls["detail"].as_str().unwrap();
    assert!(
        (stalls["status"] == "ok" && detail.contains("quorum hold"))
            || (stalls["status"] == "fail" && detail.contains("ra:restart_server")),
        "{stalls}"
    );

    // Wrong credentials: a failure that names the problem, not the password.
    let secret = format!("pw-{}", uuid::Uuid::new_v4().simple());
    let (scheme, rest) = h.url.split_once("://").unwrap();
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let bad = format!("{scheme}://guest:{secret}@{host}");
    let out = cli_with(&bad, &["doctor"]);
    assert_eq!(out.status.code(), Some(3));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("ACCESS_REFUSED"), "{all}");
    assert!(all.contains("guest:***@"), "{all}");
    assert!(!all.contains(&secret), "{all}");
}

/// A queue whose own consumer timeout is below the backend's default is
/// named by the doctor, with a warning, where the broker has such timeouts
/// (3.12 and later); an older broker ignores the argument, and so does the
/// doctor.
#[tokio::test]
async fn doctor_names_a_queue_whose_own_consumer_timeout_is_below_the_backends() {
    use lapin::options::QueueDeclareOptions;
    use lapin::types::{AMQPValue, FieldTable, LongString};

    let h = harness!("doctor_timeout");
    let q = h.queue("short-consumer-timeout");
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    args.insert("x-consumer-timeout".into(), AMQPValue::LongLongInt(1_000));
    let channel = h.amqp.channel().await.expect("a channel");
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    within(
        "declare",
        channel.queue_declare(q.as_str().into(), durable, args),
    )
    .await
    .expect("a quorum queue with its own consumer timeout");

    let checks = json(&h.cli(&["doctor", "--json"]));
    let by_name = |name: &str| named(&checks, name);
    let version = by_name("version")["detail"].as_str().unwrap().to_owned();
    let numbers: Vec<u32> = version
        .split_once("RabbitMQ ")
        .map(|(_, v)| v)
        .unwrap_or(&version)
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let per_queue = (numbers[0], numbers[1]) >= (3, 12);
    let timeout = by_name("consumer timeout");
    let detail = timeout["detail"].as_str().unwrap();
    if per_queue {
        assert_eq!(timeout["status"], "warn", "{detail}");
        assert!(detail.contains(&format!("`{q}` 1s")), "{detail}");
    } else {
        assert!(!detail.contains(&q), "{detail}");
        assert!(detail.contains("no per-queue consumer timeout"), "{detail}");
    }
}

#[tokio::test]
async fn without_the_management_api_the_tools_say_how_to_enable_it() {
    let h = harness!("no_mgmt");
    for args in [
        vec!["--mgmt-url", "http://127.0.0.1:9", "holds", "some-queue"],
        vec![
            "--mgmt-url",
            "http://127.0.0.1:9",
            "topology",
            "verify",
            "--queue",
            "some-queue",
        ],
    ] {
        let out = h.cli(&args);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("management API is not reachable"), "{err}");
        assert!(
            err.contains("rabbitmq-plugins enable rabbitmq_management"),
            "{err}"
        );
    }
}

/// A management API that belongs to another broker than the AMQP URL's
/// (here: the test broker's API beside a private node's AMQP port) is a
/// failure the doctor names, not a report of the wrong broker's figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_fails_when_the_management_api_is_another_brokers() {
    use crate::tests::private::node::{self, PrivateNode};

    let test = "doctor_fails_when_the_management_api_is_another_brokers";
    let h = harness!(test);
    if !node::may_start(test, "a private RabbitMQ node") {
        return;
    }
    // The management API the tool would use for the test broker.
    let theirs = crate::mgmt::Management::for_amqp_url(&h.url, None)
        .expect("a management URL")
        .base()
        .to_owned();
    let elsewhere = PrivateNode::start(test).await;
    let out = cli_with(
        &elsewhere.url(),
        &["--mgmt-url", &theirs, "doctor", "--json"],
    );
    assert_eq!(out.status.code(), Some(3), "a failed check is a problem");
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let same = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "same broker")
        .unwrap_or_else(|| panic!("no same-broker check in {checks}"))
        .clone();
    assert_eq!(same["status"], "fail", "{same}");
    assert!(
        same["detail"]
            .as_str()
            .unwrap()
            .contains("belongs to another broker"),
        "{same}"
    );
}
