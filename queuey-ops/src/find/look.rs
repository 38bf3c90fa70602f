//! Reading one queue for one job: from its head, at most a given number of
//! messages, stopping at the job, every message handed back.

use std::ops::ControlFlow;

use queuey_core::{Envelope, Uuid};

use super::answer::{Hit, Role, Searched};
use crate::amqp::Amqp;
use crate::browse::{Cursor, Held};
use crate::dead::DeadLetter;
use crate::error::{OpsError, Result};

/// Whether `held` is job `id`: its envelope's job id, else (a body that is
/// no envelope) its message id.
fn job_of(held: &Held, id: Uuid) -> Option<Option<Envelope>> {
    match Envelope::decode(&held.body) {
        Ok(envelope) => (envelope.job_id == id).then_some(Some(envelope)),
        Err(_) => {
            let message_id = held.properties.message_id().as_ref()?;
            (Uuid::try_parse(message_id.as_str()).ok()? == id).then_some(None)
        }
    }
}

/// Reads `queue` (a `role` place of `shard`) for job `id`, at most `max`
/// messages; a queue that does not exist is reported as absent.
pub(super) async fn look(
    amqp: &Amqp,
    queue: &str,
    role: Role,
    shard: Option<u16>,
    max: usize,
    id: Uuid,
) -> Result<(Option<Hit>, Searched)> {
    let mut cursor = match Cursor::open(amqp, queue, Some(max)).await {
        Ok(cursor) => cursor,
        Err(OpsError::UnknownQueue(_)) => return Ok((None, Searched::absent(queue, role, shard))),
        Err(e) => return Err(e),
    };
    let mut hit = None;
    let walked: Result<()> = async {
        while let Some(held) = cursor.next().await? {
            if let Some(envelope) = job_of(&held, id) {
                hit = Some(Hit { held, envelope });
                break;
            }
        }
        Ok(())
    }
    .await;
    let messages = u64::from(cursor.counts().messages);
    let read = cursor.read() as u64;
    cursor.release().await;
    walked?;
    let searched = Searched::read(queue, role, shard, messages, read, hit.is_some());
    Ok((hit, searched))
}

/// Reads the dead-letter queue `dead_queue` (of `shard`) for job `id`, at
/// most `max` letters, as the dead-letter commands read it.
pub(super) async fn look_dead(
    amqp: &Amqp,
    dead_queue: &str,
    shard: Option<u16>,
    max: usize,
    id: Uuid,
) -> Result<(Option<DeadLetter>, Searched)> {
    let mut found = None;
    let pass = crate::dead::scan(amqp, dead_queue, Some(max), |letter| {
        if letter.job_id() == Some(id) {
            found = Some(letter);
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .await;
    let pass = match pass {
        Ok(pass) => pass,
        Err(OpsError::UnknownQueue(_)) => {
            return Ok((None, Searched::absent(dead_queue, Role::Dead, shard)));
        }
        Err(e) => return Err(e),
    };
    let searched = Searched::read(
        dead_queue,
        Role::Dead,
        shard,
        pass.total as u64,
        pass.read as u64,
        found.is_some(),
    );
    Ok((found, searched))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::BasicProperties;

    fn held(body: Vec<u8>, properties: BasicProperties) -> Held {
        Held {
            tag: 1,
            position: 1,
            body,
            properties,
        }
    }

    #[test]
    fn a_job_is_known_by_its_envelope_else_by_its_message_id() {
        let raw = serde_json::value::to_raw_value(&serde_json::json!({})).unwrap();
        let envelope = Envelope::new("mail", "q", raw);
        let id = envelope.job_id;
        let message = held(envelope.encode().unwrap(), BasicProperties::default());
        assert_eq!(job_of(&message, id).unwrap().unwrap().job_type, "mail");
        assert!(job_of(&message, Uuid::new_v4()).is_none());

        let by_message_id = held(
            b"not json".to_vec(),
            BasicProperties::default().with_message_id(id.to_string().into()),
        );
        assert!(matches!(job_of(&by_message_id, id), Some(None)));
        let neither = held(b"not json".to_vec(), BasicProperties::default());
        assert!(job_of(&neither, id).is_none());
    }
}
