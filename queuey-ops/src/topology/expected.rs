//! The queues a queue set declares, with the arguments the backend
//! declares them with.

use queuey_rabbitmq::topology::{self as names, QueueArguments};

use super::TopologySpec;

/// What a queue of the set must look like.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    pub(super) name: String,
    pub(super) durable: bool,
    pub(super) arguments: QueueArguments,
}

/// The queues `spec` declares: work, dead-letter and suspect queues, of a
/// sharded queue's lane and each shard, each with the arguments of its own
/// [`QueueConfig::physical`](queuey_core::QueueConfig::physical) settings, as
/// the backend declares it (hold queues are checked by [`verify`] as found).
pub(super) fn expected(spec: &TopologySpec) -> Vec<Expected> {
    let mut out = Vec::new();
    for q in &spec.queues {
        for config in q.config().physical() {
            let name = config.name();
            let dead = q
                .dead_letters
                .then(|| names::dead_letter_queue_name(name, &spec.dead_suffix));
            out.push(Expected {
                name: name.to_owned(),
                durable: q.durable,
                arguments: names::work_queue_arguments(&config, dead.as_deref()),
            });
            if q.suspect_queue {
                out.push(Expected {
                    name: names::suspect_queue_name(name, &spec.suspect_suffix),
                    durable: q.durable,
                    arguments: names::suspect_queue_arguments(&config, dead.as_deref()),
                });
            }
            if let Some(dead) = dead {
                out.push(Expected {
                    name: dead,
                    durable: q.durable,
                    arguments: names::dead_letter_queue_arguments(&config),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_rabbitmq::topology::ArgumentValue;

    #[test]
    fn the_set_includes_each_suspect_queue_unless_it_is_off() {
        let spec: TopologySpec = toml::from_str(
            r#"
            [[queue]]
            name = "emails"
            max_priority = 3
            [[queue]]
            name = "reports"
            suspect_queue = false
            [[queue]]
            name = "payments"
            queue_type = "quorum"
            [[queue]]
            name = "orders"
            queue_type = "quorum"
            shards = 2
            suspect_queue = false
            "#,
        )
        .expect("a queue set");
        assert_eq!(spec.suspect_suffix, ".suspect");
        let names: Vec<String> = expected(&spec).into_iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "emails",
                "emails.suspect",
                "emails.dead",
                "reports",
                "reports.dead",
                "payments",
                "payments.suspect",
                "payments.dead",
                "orders",
                "orders.dead",
                "orders.s0",
                "orders.s0.dead",
                "orders.s1",
                "orders.s1.dead",
            ]
        );
        // A quorum shard spreads its leader; the lane is an ordinary queue.
        let leader = |name: &str| {
            expected(&spec)
                .into_iter()
                .find(|e| e.name == name)
                .expect(name)
                .arguments
                .get("x-queue-leader-locator")
                .cloned()
        };
        assert_eq!(leader("orders"), None);
        assert_eq!(
            leader("orders.s1"),
            Some(ArgumentValue::Text("balanced".into()))
        );
        let shard = expected(&spec)
            .into_iter()
            .find(|e| e.name == "orders.s1")
            .expect("a shard");
        assert_eq!(
            shard.arguments.get("x-dead-letter-routing-key"),
            Some(&ArgumentValue::Text("orders.s1.dead".into()))
        );
        let suspect = expected(&spec)
            .into_iter()
            .find(|e| e.name == "emails.suspect")
            .expect("the suspect queue");
        assert!(suspect.durable);
        assert!(!suspect.arguments.contains_key("x-max-priority"));
        assert_eq!(
            suspect.arguments,
            names::suspect_queue_arguments(&spec.queues[0].config(), Some("emails.dead"))
        );
        // A quorum queue's suspect queue is quorum too and dead-letters into
        // the dead-letter queue past the same delivery limit.
        let suspect = expected(&spec)
            .into_iter()
            .find(|e| e.name == "payments.suspect")
            .expect("the quorum suspect queue");
        let text = |s: &str| ArgumentValue::Text(s.to_owned());
        assert_eq!(suspect.arguments.get("x-queue-type"), Some(&text("quorum")));
        assert_eq!(
            suspect.arguments.get("x-dead-letter-routing-key"),
            Some(&text("payments.dead"))
        );
        assert_eq!(
            suspect.arguments.get("x-delivery-limit"),
            Some(&ArgumentValue::Integer(names::QUORUM_DELIVERY_LIMIT))
        );
    }
}
