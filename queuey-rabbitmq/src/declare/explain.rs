//! What a refused declaration tells the user to do.

use queuey_core::{Error, QueueConfig};

use crate::error::{Failure, code};

/// The error for a refused declaration of `queue`, with what to do about it.
pub(super) fn explain(failure: Failure, queue: &str, config: &QueueConfig) -> Error {
    let what = format!("declaring queue `{queue}`");
    let transient = !config.settings().durable();
    if transient && failure.reply_code == Some(code::INTERNAL_ERROR) {
        // RabbitMQ 4.3 refuses a transient non-exclusive queue by closing
        // the connection: a refusal of the configuration, which trying
        // again (on a new connection) can never change.
        return Error::invalid_config(format!(
            "{what}: the broker refused it and closed the connection ({}): the queue is \
             transient (durable = false), which RabbitMQ 4.3 and later refuse (the deprecated \
             feature `transient_nonexcl_queues`); declare it durable",
            failure.text
        ));
    }
    let hint = if failure.reply_code == Some(code::ACCESS_REFUSED) {
        "the user lacks a permission: declaring a queue needs configure on it, and a queue \
         that dead-letters (a quorum work queue, a hold) also needs read on it and write on \
         the default exchange (`amq.default`); a producer without those (behind a job \
         exchange) uses `Producer::new_undeclared` and lets the workers declare"
    } else if transient && failure.connection_lost {
        "the queue is transient (durable = false), which RabbitMQ 4.3 and later refuse; \
         declare it durable"
    } else if failure.reply_code != Some(code::PRECONDITION_FAILED) {
        ""
    } else if failure.text.contains("x-queue-type") {
        "the queue exists as another queue type, and RabbitMQ cannot change a queue's \
         type in place; keep its type in the config, or move its jobs to a queue of \
         the new type (CHANGELOG.md says how)"
    } else if failure.text.contains("x-delivery-limit") {
        "the queue exists with another delivery limit (a quorum queue created before \
         queuey set one runs on the broker's default, 20 on RabbitMQ 4), and RabbitMQ \
         cannot change it in place; `queuey topology apply` sets a `delivery-limit` \
         policy on it, and to declare it again drain and delete it \
         (`queuey dead purge --export`, then `queuey dead import` for a dead-letter queue)"
    } else if failure.text.contains("x-max-priority") {
        "the queue exists with other priority settings (a queue created before priorities \
         has no x-max-priority); drain and delete it so it can be declared again, or set \
         max_priority(0) to declare it as before"
    } else if config.is_quorum() {
        "a queue of this name exists with other arguments; if it is a classic queue, \
         RabbitMQ cannot turn it into a quorum queue in place: keep it classic, or move \
         its jobs to a new quorum queue (CHANGELOG.md says how)"
    } else {
        "a queue of this name exists with other arguments, and RabbitMQ never changes \
         an existing queue's arguments; delete it or use another name"
    };
    failure.hinted(hint).into_error(&what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuey_core::BackendErrorKind;

    #[test]
    fn refusals_say_what_to_do() {
        let failure = |code, lost, text: &str| Failure {
            reply_code: code,
            connection_lost: lost,
            text: text.to_owned(),
        };
        let config = QueueConfig::new("q");
        let e = explain(
            failure(
                Some(406),
                false,
                "PRECONDITION_FAILED - inequivalent arg 'x-max-priority'",
            ),
            "q",
            &config,
        );
        assert!(matches!(&e, Error::Backend(b) if b.kind() == BackendErrorKind::Refused));
        let text = e.to_string();
        assert!(
            text.starts_with("declaring queue `q`: PRECONDITION_FAILED"),
            "{text}"
        );
        assert!(text.contains("max_priority(0)"), "{text}");

        let e = explain(
            failure(Some(406), false, "inequivalent arg 'x-message-ttl'"),
            "q",
            &config,
        );
        assert!(e.to_string().contains("other arguments"), "{e}");

        let e = explain(
            failure(
                Some(406),
                false,
                "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': \
                 received the value 'quorum' of type 'longstr' but current is none",
            ),
            "q",
            &config,
        );
        assert!(e.to_string().contains("CHANGELOG.md says how"), "{e}");

        let e = explain(
            failure(
                Some(406),
                false,
                "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'q.dead' in \
                 vhost '/': received the value '1000000' of type 'signedint' but current is none",
            ),
            "q.dead",
            &QueueConfig::new("q").queue_type(queuey_core::QueueType::Quorum),
        );
        assert!(e.to_string().contains("`delivery-limit` policy"), "{e}");

        let e = explain(
            failure(
                Some(403),
                false,
                "ACCESS_REFUSED - access to queue 'q' in vhost '/' refused for user 'producer'",
            ),
            "q",
            &QueueConfig::new("q").queue_type(queuey_core::QueueType::Quorum),
        );
        assert!(e.to_string().contains("`Producer::new_undeclared`"), "{e}");

        let transient = QueueConfig::new("q").durable(false);
        let e = explain(failure(Some(541), true, "INTERNAL_ERROR"), "q", &transient);
        assert!(e.to_string().contains("declare it durable"), "{e}");
        assert!(
            matches!(e, Error::InvalidConfig(_)),
            "a refusal of the configuration is never retried: {e:?}"
        );
        assert!(!e.is_connection_lost() && !e.is_transient(), "{e:?}");
    }
}
