//! The queues a queue set declares, with the arguments the backend
//! declares them with.

use queuey_rabbitmq::topology::{self as names, ArgumentValue, QueueArguments};

use super::TopologySpec;

/// What a queue of the set must look like.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    pub(super) name: String,
    pub(super) durable: bool,
    pub(super) arguments: QueueArguments,
}

/// The queues `spec` declares (work, dead-letter and suspect queues; hold
/// queues are created on demand and checked by [`verify`] as they are
/// found).
pub(super) fn expected(spec: &TopologySpec) -> Vec<Expected> {
    let mut out = Vec::new();
    for q in &spec.queues {
        let config = q.config();
        let dead = q
            .dead_letters
            .then(|| names::dead_letter_queue_name(&q.name, &spec.dead_suffix));
        out.push(Expected {
            name: q.name.clone(),
            durable: q.durable,
            arguments: names::work_queue_arguments(&config, dead.as_deref()),
        });
        if q.suspect_queue {
            out.push(Expected {
                name: names::suspect_queue_name(&q.name, &spec.suspect_suffix),
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
    out
}

/// An argument's value as the tools print it.
pub(super) fn show(value: &ArgumentValue) -> String {
    match value {
        ArgumentValue::Integer(n) => n.to_string(),
        ArgumentValue::Text(t) => format!("{t:?}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ]
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
