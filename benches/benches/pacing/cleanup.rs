//! Deleting what a run made: its queues on the broker (found by listing,
//! as hold queues exist only once used) and its keys in Redis.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::BenchResult;
use crate::admin::{self, Admin};

/// How long one Redis command may take.
const REDIS_TIMEOUT: Duration = Duration::from_secs(10);
/// Keys asked for per `SCAN` step.
const SCAN_COUNT: u32 = 1_000;

/// Deletes `queues` and every queue of `vhost` whose name starts with
/// `prefix`; returns the names of those found by listing, or `None` when
/// `rabbitmqctl` could not list the broker's queues from here.
pub(crate) async fn delete_queues(
    admin: &Admin,
    vhost: &str,
    prefix: &str,
    queues: &[String],
) -> BenchResult<Option<Vec<String>>> {
    let listed = admin::left_behind(vhost, prefix).await;
    if let Some(listed) = &listed {
        admin.delete(listed).await?;
    }
    admin.delete(queues).await?;
    Ok(listed)
}

/// Deletes every key of the Redis at `url` whose name starts with
/// `prefix`; returns how many there were.
pub(crate) async fn delete_keys(url: &str, prefix: &str) -> BenchResult<u64> {
    let mut redis = connect(url).await?;
    let keys = scan(&mut redis, prefix).await?;
    for chunk in keys.chunks(500) {
        let mut unlink = redis::cmd("UNLINK");
        unlink.arg(chunk);
        let deleted = unlink.query_async::<u64>(&mut redis);
        bounded("deleting keys", deleted).await?;
    }
    Ok(keys.len() as u64)
}

/// The keys whose name starts with `prefix`.
pub(crate) async fn keys_left(url: &str, prefix: &str) -> BenchResult<Vec<String>> {
    let mut redis = connect(url).await?;
    scan(&mut redis, prefix).await
}

async fn connect(url: &str) -> BenchResult<MultiplexedConnection> {
    let client = redis::Client::open(url).map_err(|e| format!("the Redis URL: {e}"))?;
    bounded(
        "connecting to Redis",
        client.get_multiplexed_async_connection(),
    )
    .await
}

async fn scan(redis: &mut MultiplexedConnection, prefix: &str) -> BenchResult<Vec<String>> {
    // The prefix is ours (letters, digits, `-`, `:`): no glob character to
    // escape.
    let pattern = format!("{prefix}*");
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let mut command = redis::cmd("SCAN");
        command
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let step = command.query_async::<(u64, Vec<String>)>(redis);
        let (next, found) = bounded("listing keys", step).await?;
        keys.extend(found);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// Awaits a Redis command for at most [`REDIS_TIMEOUT`].
async fn bounded<T>(
    what: &str,
    command: impl Future<Output = redis::RedisResult<T>>,
) -> BenchResult<T> {
    match tokio::time::timeout(REDIS_TIMEOUT, command).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(format!("{what}: {e}").into()),
        Err(_) => Err(format!("{what}: no answer from Redis in {REDIS_TIMEOUT:?}").into()),
    }
}
