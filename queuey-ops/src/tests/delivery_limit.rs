//! Delivery limits of queuey's quorum queues: a dead letter survives any
//! number of reads by the tool, and the queues an older version created
//! without a limit are found by `doctor` and `topology verify` and given a
//! policy by `topology apply`; so is a control stream an older version
//! created without a bound in bytes.
//!
//! The management API is the one derived from `AMQP_URL`, or
//! `QUEUEY_MGMT_URL` when set (a broker whose API is elsewhere).

use std::time::Duration;

use lapin::BasicProperties;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use queuey_core::{QueueConfig, QueueType};
use queuey_rabbitmq::topology as names;
use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions};

use crate::mgmt::Management;
use crate::tests::support::{harness, within};
use crate::topology::{self, AtRisk, ProblemKind, QueueSpec, TopologySpec};

fn management(url: &str) -> Management {
    let base = std::env::var("QUEUEY_MGMT_URL")
        .ok()
        .filter(|u| !u.is_empty());
    Management::for_amqp_url(url, base.as_deref()).expect("a management client")
}

/// Removes the test's policies on drop, even when the test fails, through
/// the management API of the broker at the AMQP URL it holds. The client
/// is made on the cleaning thread: one made on the test's runtime keeps its
/// connections there, and that runtime is blocked in this drop.
struct Policies(String, Vec<String>);

impl Drop for Policies {
    fn drop(&mut self) {
        let (url, names) = (self.0.clone(), std::mem::take(&mut self.1));
        let cleaned = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let mgmt = management(&url);
                for name in names {
                    if let Err(e) = mgmt.delete_policy(&name).await {
                        eprintln!("could not remove the test's policy `{name}`: {e}");
                    }
                }
            });
        })
        .join();
        if cleaned.is_err() {
            eprintln!("removing the test's policies panicked");
        }
    }
}

#[tokio::test]
async fn a_quorum_dead_letter_survives_a_thousand_reads_by_the_tool() {
    let h = harness!("dead_letter_thousand_reads");
    let queue = h.queue("thousand-reads");
    let backend = within(
        "backend",
        RabbitMqBackend::with_options(
            &h.url,
            RabbitMqOptions::default().connection_name(format!("queuey-ops-test-{queue}")),
        ),
    )
    .await
    .expect("backend connects");
    let config = QueueConfig::new(&queue).queue_type(QueueType::Quorum);
    within(
        "declare",
        queuey_core::backend::Backend::declare(&backend, std::slice::from_ref(&config)),
    )
    .await
    .expect("declare");
    let dead = format!("{queue}.dead");
    h.publish_raw(&dead, b"a dead letter", BasicProperties::default())
        .await;
    // Each read takes the letter and hands it back, one delivery each; a
    // quorum queue makes it ready again a moment after the reader's
    // channel is closed.
    for read in 1..=1_000 {
        within("the letter is ready", async {
            while h.ready(&dead).await != 1 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await;
        let letters = within("read", crate::tests::helpers::read_dead(&h.amqp, &dead, 10))
            .await
            .unwrap_or_else(|e| panic!("read {read}: {e}"));
        assert_eq!(letters.len(), 1, "read {read}");
        assert_eq!(letters[0].body, b"a dead letter");
    }
    within("the letter is ready", async {
        while h.ready(&dead).await != 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert_eq!(h.ready(&dead).await, 1);
    backend.close().await.unwrap();
}

/// The doctor's check `name` on the broker at `url`.
async fn doctor_check(url: &str, name: &str) -> crate::doctor::Check {
    crate::doctor::doctor(
        url,
        std::env::var("QUEUEY_MGMT_URL").ok().as_deref(),
        &crate::TlsFiles::default(),
        ".dead",
        ".deferred",
    )
    .await
    .into_iter()
    .find(|c| c.name == name)
    .unwrap_or_else(|| panic!("the doctor has a check `{name}`"))
}

fn table(args: &[(&str, AMQPValue)]) -> FieldTable {
    let mut table = FieldTable::default();
    for (k, v) in args {
        table.insert((*k).into(), v.clone());
    }
    table
}

#[tokio::test]
async fn queues_on_the_default_limit_are_found_and_given_a_policy() {
    let h = harness!("default_delivery_limit");
    let queue = h.queue("default-limit");
    let dead = format!("{queue}.dead");
    let schedule = names::schedule_queue_name(&queue, "beat");
    h.track(&schedule);
    let mgmt = management(&h.url);
    let version = mgmt.overview().await.expect("overview")["rabbitmq_version"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    let four = topology::broker_has_default_limit(&version);
    // The queues as a version before delivery limits declared them.
    let spec = TopologySpec {
        dead_suffix: ".dead".into(),
        deferred_suffix: ".deferred".into(),
        suspect_suffix: ".suspect".into(),
        queues: vec![QueueSpec {
            queue_type: QueueType::Quorum,
            suspect_queue: false,
            ..QueueSpec::new(&queue)
        }],
    };
    let quorum = AMQPValue::LongString(LongString::from("quorum"));
    let channel = h.amqp.channel().await.expect("channel");
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let work = names::work_queue_arguments(&spec.queues[0].config(), Some(&dead));
    for (name, args) in [
        (
            queue.as_str(),
            queuey_rabbitmq::__private::field_table(&work),
        ),
        (dead.as_str(), table(&[("x-queue-type", quorum.clone())])),
        (
            schedule.as_str(),
            table(&[
                ("x-queue-type", quorum.clone()),
                (names::SINGLE_ACTIVE_CONSUMER, AMQPValue::Boolean(true)),
            ]),
        ),
    ] {
        channel
            .queue_declare(name.into(), durable, args)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    // verify: on RabbitMQ 4 both are problems, with what they risk; on 3.x
    // (no default limit) neither; never a mere argument difference.
    let problems = topology::verify(&mgmt, Some(&h.amqp), &spec)
        .await
        .expect("verify");
    let limited: Vec<&str> = problems
        .iter()
        .filter(|p| p.kind == ProblemKind::DefaultDeliveryLimit)
        .map(|p| p.queue.as_str())
        .collect();
    if four {
        assert_eq!(limited, [dead.as_str(), schedule.as_str()], "{problems:?}");
        let detail = &problems
            .iter()
            .find(|p| p.queue == dead)
            .expect("the dead-letter queue")
            .detail;
        assert!(detail.contains("read 20 times"), "{detail}");
        assert!(detail.contains("topology apply --yes"), "{detail}");
    } else {
        assert!(limited.is_empty(), "{problems:?}");
    }
    assert!(
        problems
            .iter()
            .all(|p| p.kind != ProblemKind::WrongArguments),
        "{problems:?}"
    );

    // doctor: warns on RabbitMQ 4, says what to do before upgrading on 3.x.
    let check = doctor_check(&h.url, "delivery limits").await;
    let expected = if four {
        crate::doctor::Status::Warn
    } else {
        crate::doctor::Status::Ok
    };
    assert_eq!(check.status, expected, "{}", check.detail);

    // apply: a policy for each, then nothing on the default any more.
    let plan = topology::plan_limit_policies(&mgmt, &spec.work_queues(), ".dead")
        .await
        .expect("plan");
    let kinds: Vec<(&str, AtRisk)> = plan.iter().map(|p| (p.queue.as_str(), p.kind)).collect();
    assert_eq!(
        kinds,
        [
            (dead.as_str(), AtRisk::DeadLetterQueue),
            (schedule.as_str(), AtRisk::ScheduleQueue)
        ]
    );
    let _policies = Policies(h.url.clone(), plan.iter().map(|p| p.name.clone()).collect());
    let set = topology::apply_limit_policies(&mgmt, &plan)
        .await
        .expect("apply");
    assert_eq!(set.len(), 2);
    within("the policies apply", async {
        loop {
            let left = topology::plan_limit_policies(&mgmt, &spec.work_queues(), ".dead")
                .await
                .expect("plan");
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    let problems = topology::verify(&mgmt, Some(&h.amqp), &spec)
        .await
        .expect("verify");
    assert!(
        problems
            .iter()
            .all(|p| p.kind != ProblemKind::DefaultDeliveryLimit),
        "{problems:?}"
    );
}

#[tokio::test]
async fn a_control_stream_without_a_bound_in_bytes_is_found_and_given_a_policy() {
    let h = harness!("unbounded_control_stream");
    let stream = h.queue("unbounded-control");
    let mgmt = management(&h.url);
    // The stream as a version before the bound declared it.
    let mut older = names::control_stream_arguments();
    older.remove("x-max-length-bytes");
    let channel = h.amqp.channel().await.expect("channel");
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(
            stream.as_str().into(),
            durable,
            queuey_rabbitmq::__private::field_table(&older),
        )
        .await
        .expect("the older stream");

    let doctor_names_it = || async {
        doctor_check(&h.url, "control streams")
            .await
            .detail
            .contains(&stream)
    };
    assert!(doctor_names_it().await, "the doctor names the stream");
    let plan = topology::plan_control_stream_policy(&mgmt, &stream)
        .await
        .expect("plan")
        .expect("a policy for the unbounded stream");
    assert_eq!(plan.kind, AtRisk::UnboundedControlStream);
    assert!(
        plan.advice().contains("max-length-bytes"),
        "{}",
        plan.advice()
    );
    let _policies = Policies(h.url.clone(), vec![plan.name.clone()]);
    let set = topology::apply_limit_policies(&mgmt, std::slice::from_ref(&plan))
        .await
        .expect("apply");
    assert_eq!(set.len(), 1);
    within("the policy applies", async {
        while topology::plan_control_stream_policy(&mgmt, &stream)
            .await
            .expect("plan")
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    assert!(!doctor_names_it().await, "bounded now");
    // A stream declared by this version has its bound already.
    let bounded = h.queue("bounded-control");
    channel
        .queue_declare(
            bounded.as_str().into(),
            durable,
            queuey_rabbitmq::__private::field_table(&names::control_stream_arguments()),
        )
        .await
        .expect("a stream of this version");
    assert!(
        topology::plan_control_stream_policy(&mgmt, &bounded)
            .await
            .expect("plan")
            .is_none()
    );
}
