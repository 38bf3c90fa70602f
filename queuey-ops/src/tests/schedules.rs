//! `queuey schedules` against the real broker: a schedule led by one
//! process with another in line, then by none.

use std::time::{Duration, UNIX_EPOCH};

use queuey_core::periodic::Leadership;
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use serde_json::Value;

use crate::tests::support::{Harness, harness, within};
use crate::tests::web_exposure::{Dashboard, http};

async fn member(h: &Harness, label: &str) -> RabbitMqBackend {
    let options = RabbitMqOptions::default().connection_name(format!(
        "queuey-ops-test-schedules-{label}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    within("backend", RabbitMqBackend::with_options(&h.url, options))
        .await
        .expect("backend connects")
}

/// `queuey schedules --json QUEUE`, until `done` accepts its one schedule.
async fn schedules_until(h: &Harness, queue: &str, done: impl Fn(&Value) -> bool) -> (Value, i32) {
    within("the schedule as expected", async {
        loop {
            let out = h.cli(&["schedules", "--json", queue]);
            let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            if let Some(one) = listed.as_array().and_then(|a| a.first())
                && done(one)
            {
                return (one.clone(), out.status.code().unwrap_or(-1));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await
}

#[tokio::test]
async fn schedules_show_the_leader_the_line_and_the_ticks() {
    let h = harness!("schedules_show_the_leader_the_line_and_the_ticks");
    let queue = h.queue("schedules");
    let key = format!("{queue}.periodic.beat");
    h.track(&key);
    h.track(&format!("{key}.status"));
    let a = member(&h, "a").await;
    let b = member(&h, "b").await;

    let mut lease = within("a leads", a.lead(&key)).await.expect("a leads");
    let tick = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    within("record", lease.record(tick))
        .await
        .expect("recorded");
    let next = tick + Duration::from_secs(1);
    within("announce", lease.announce(Some(next), "every 1s"))
        .await
        .expect("announced");
    let waiting = tokio::spawn({
        let b = b.clone();
        let key = key.clone();
        async move { b.lead(&key).await.map(|l| l.last_tick()) }
    });

    // The management API fills a consumer's connection in from statistics
    // it gathers every few seconds: until then the leader is listed without
    // one.
    let (one, code) = schedules_until(&h, &queue, |s| {
        s["leader"]["connection"].is_string()
            && s["waiting"].as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    assert_eq!(code, 0);
    assert_eq!(one["job_queue"], queue.as_str());
    assert_eq!(one["name"], "beat");
    assert_eq!(one["schedule"], "every 1s");
    assert_eq!(one["last_tick_ms"], 1_700_000_000_000i64);
    assert_eq!(one["next_tick_ms"], 1_700_000_001_000i64);
    assert!(
        one["leader"]["connection"]
            .as_str()
            .is_some_and(|c| c.contains("schedules-a")),
        "{one}"
    );
    let table = h.cli(&["schedules", &queue]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("every 1s") && text.contains("beat"), "{text}");

    // The dashboard's page shows the same.
    let dashboard = Dashboard::start(h.web_config()).await;
    let page = within(
        "the schedules page",
        http().get(format!("{}/schedules", dashboard.base)).send(),
    )
    .await
    .expect("the dashboard answers");
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(&queue) && html.contains("every 1s"), "{html}");
    drop(dashboard);

    // The leader goes; the one in line takes over with the last tick.
    lease.release().await;
    let taken = within("b takes over", waiting)
        .await
        .unwrap()
        .expect("b leads");
    assert_eq!(taken, Some(tick));
    a.close().await.unwrap();
    b.close().await.unwrap();

    // Nobody leads: a problem, exit code 3.
    let (one, code) = schedules_until(&h, &queue, |s| s["leader"].is_null()).await;
    assert_eq!(code, 3, "{one}");
}

/// A status the tool cannot trust (unsigned, or from a user it does not
/// take for a worker) is not shown as the schedule's: a stranger cannot
/// make the tool report a tick that never fired.
#[tokio::test]
async fn a_status_from_a_stranger_is_not_shown() {
    use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;

    let h = harness!("a_status_from_a_stranger_is_not_shown");
    let queue = h.queue("stranger-status");
    let key = crate::tests::web_scope::schedule_queue(&h, &queue, "beat").await;
    let status = format!("{key}.status");
    h.track(&status);
    let channel = h.amqp.channel().await.expect("channel");
    channel
        .queue_declare(
            status.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("status queue");
    let forged = serde_json::json!({
        "v": 1, "last_tick_ms": 4_102_444_800_000_i64, "next_tick_ms": 4_102_444_801_000_i64,
        "schedule": "every 1s", "at_ms": 1
    });
    channel
        .basic_publish(
            "".into(),
            status.as_str().into(),
            BasicPublishOptions::default(),
            forged.to_string().as_bytes(),
            lapin::BasicProperties::default(),
        )
        .await
        .expect("publish")
        .await
        .expect("stored");
    let _ = channel.close(200, "done".into()).await;

    let out = h.cli(&["schedules", "--json", &queue]);
    let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let one = &listed[0];
    assert_eq!(one["untrusted_status_from"], "unsigned", "{one}");
    assert!(one["last_tick_ms"].is_null(), "{one}");
    assert!(one["schedule"].is_null(), "{one}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a user trusted as a worker"),
        "{stderr}"
    );
    assert!(!stderr.contains("in the future"), "{stderr}");
}
