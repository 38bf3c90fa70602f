//! The job exchange ([`RabbitMqOptions::job_exchange`](crate::RabbitMqOptions::job_exchange)):
//! declared with the work queues, and each queue a job is published to
//! (a work queue, a shard, a hold queue) bound to it under its own name, so
//! that a job published to the exchange with the queue's name as routing
//! key lands in that queue and nowhere else.

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ExchangeKind};
use queuey_core::Error;

use crate::error::{Failure, code};
use crate::properties::short;

/// Declares the job exchange `exchange`: durable, `direct`, waiting for
/// the broker's answer.
pub(crate) async fn declare_exchange(
    connection: &Connection,
    channel: &Channel,
    exchange: &str,
) -> Result<(), Error> {
    let options = ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    };
    channel
        .exchange_declare(
            short(exchange),
            ExchangeKind::Direct,
            options,
            FieldTable::default(),
        )
        .await
        .map_err(|e| explain_exchange(Failure::of(&e, connection.status().connected()), exchange))
}

/// Binds `queue` to the job exchange `exchange` under its own name,
/// waiting for the broker's answer. Binding a queue that is bound already
/// changes nothing.
pub(crate) async fn bind(
    connection: &Connection,
    channel: &Channel,
    queue: &str,
    exchange: &str,
) -> Result<(), Error> {
    channel
        .queue_bind(
            short(queue),
            short(exchange),
            short(queue),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| {
            explain_binding(
                Failure::of(&e, connection.status().connected()),
                queue,
                exchange,
            )
        })
}

fn explain_exchange(failure: Failure, exchange: &str) -> Error {
    let hint = match failure.reply_code {
        Some(code::ACCESS_REFUSED) => format!(
            "the user needs the configure permission on the exchange `{exchange}` to declare \
             it (or an operator declares it once: durable, type direct)"
        ),
        Some(code::PRECONDITION_FAILED) => format!(
            "an exchange `{exchange}` exists with another type or durability; the job exchange \
             must be a durable direct exchange: delete it or name another one"
        ),
        _ => String::new(),
    };
    let what = format!("declaring the job exchange `{exchange}`");
    failure.hinted(&hint).into_error(&what)
}

fn explain_binding(failure: Failure, queue: &str, exchange: &str) -> Error {
    let hint = match failure.reply_code {
        Some(code::ACCESS_REFUSED) => format!(
            "binding needs the write permission on the queue `{queue}` and the read \
             permission on the exchange `{exchange}`"
        ),
        Some(code::NOT_FOUND) => format!(
            "the exchange `{exchange}` does not exist: declaring the work queues \
             (`Producer::new`, `WorkerBuilder::build`, `Backend::declare`) declares it"
        ),
        _ => String::new(),
    };
    let what = format!("binding queue `{queue}` to the job exchange `{exchange}`");
    failure.hinted(&hint).into_error(&what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16) -> Failure {
        Failure {
            reply_code: Some(code),
            connection_lost: false,
            text: format!("{code} refused"),
        }
    }

    #[test]
    fn refusals_say_which_permission_or_object_is_missing() {
        let e = explain_binding(refused(code::ACCESS_REFUSED), "app.q", "app.jobs").to_string();
        assert!(e.contains("write permission on the queue `app.q`"), "{e}");
        assert!(
            e.contains("read permission on the exchange `app.jobs`"),
            "{e}"
        );
        let e = explain_binding(refused(code::NOT_FOUND), "app.q", "app.jobs").to_string();
        assert!(e.contains("`app.jobs` does not exist"), "{e}");
        let e = explain_exchange(refused(code::PRECONDITION_FAILED), "app.jobs").to_string();
        assert!(e.contains("durable direct exchange"), "{e}");
        let e = explain_exchange(refused(code::ACCESS_REFUSED), "app.jobs").to_string();
        assert!(e.contains("configure permission"), "{e}");
    }
}
