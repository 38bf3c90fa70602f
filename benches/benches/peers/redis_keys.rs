//! Deleting a Redis side's keys after its run.

use crate::side::BoxError;

/// Deletes every key of `redis` that matches `pattern` (a `SCAN` pattern),
/// a thousand at a time.
pub(crate) async fn delete_matching(
    redis: &mut redis::aio::MultiplexedConnection,
    pattern: &str,
) -> Result<(), BoxError> {
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(redis)
            .await?;
        if !keys.is_empty() {
            redis::cmd("UNLINK")
                .arg(&keys)
                .query_async::<()>(redis)
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}
