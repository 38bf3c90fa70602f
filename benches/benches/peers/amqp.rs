//! What the RabbitMQ sides share: deleting every queue a run created.

use lapin::options::QueueDeleteOptions;
use lapin::{Connection, ConnectionProperties};

use crate::side::BoxError;

/// Deletes `queues` (one already gone counts as deleted), then any other
/// queue named `{name}.…` that `rabbitmqctl` lists, if it reaches the
/// broker from here.
pub(crate) async fn delete_queues(
    url: &str,
    name: &str,
    mut queues: Vec<String>,
) -> Result<(), BoxError> {
    if let Some(listed) = listed_queues().await {
        let prefix = format!("{name}.");
        for queue in listed.into_iter().filter(|q| q.starts_with(&prefix)) {
            if !queues.contains(&queue) {
                queues.push(queue);
            }
        }
    }
    let properties =
        ConnectionProperties::default().with_connection_name(format!("{name}-cleanup").into());
    let connection = Connection::connect(url, properties).await?;
    let mut failed = Vec::new();
    for queue in &queues {
        // A channel each: a refusal closes the channel it ran on.
        let deleted = async {
            let channel = connection.create_channel().await?;
            let deleted = channel
                .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await;
            if channel.status().connected() {
                let _ = channel.close(200, "deleted".into()).await;
            }
            Ok::<_, lapin::Error>(deleted)
        }
        .await;
        match deleted {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if is_not_found(&e) => {}
            Ok(Err(e)) | Err(e) => failed.push(format!("{queue}: {e}")),
        }
    }
    let _ = connection.close(200, "done".into()).await;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("could not delete: {}", failed.join("; ")).into())
    }
}

fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp) if amqp.get_id() == 404)
}

/// The queue names `rabbitmqctl` lists in every virtual host it can see,
/// or `None` where it does not run.
async fn listed_queues() -> Option<Vec<String>> {
    let output = tokio::process::Command::new("rabbitmqctl")
        .args(["-q", "list_queues", "name", "--no-table-headers"])
        .output()
        .await
        .ok()?;
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    })
}
