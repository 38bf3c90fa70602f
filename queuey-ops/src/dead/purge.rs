//! `dead purge --export`: dead letters removed only after they are safe in
//! an export file.
//!
//! The export file is created only once the dead-letter queue was found,
//! with `create_new` (an existing file is never overwritten) and, on Unix,
//! mode `0600`: it holds the full payloads, which are often personal data.
//! If the export fails before it is complete and flushed to disk, the file
//! is removed again and nothing is purged, so a rerun starts clean. A
//! process killed in the middle leaves a file without its end-of-export
//! trailer, which [`read_export`](crate::dead::read_export) refuses.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::amqp::Amqp;
use crate::browse::Cursor;
use crate::dead::{
    DeadLetter, DeadQueue, DeadQueues, ExportRecord, Filter, PREVIEW_SAMPLES, QueueCount,
    TRAILER_KEY,
};
use crate::error::{OpsError, Result};

/// What a purge would remove, computed without changing anything.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PurgePlan {
    /// Dead letters in the queue (all of its dead-letter queues) when the
    /// preview began.
    pub(crate) total: usize,
    /// Dead letters read.
    pub(crate) read: usize,
    /// Dead letters that would be exported and removed.
    pub(crate) matching: usize,
    /// The first [`PREVIEW_SAMPLES`] of them: `(id, start of the reason)`.
    pub(crate) samples: Vec<(String, String)>,
}

impl DeadQueues {
    /// What [`purge_with_export`](DeadQueues::purge_with_export) with
    /// `filter` would remove now, over every dead-letter queue. Reads each
    /// once, keeping counts and a few samples. A position (`#N`) among the
    /// filter's ids is refused when there are several queues.
    pub(crate) async fn plan_purge(&self, amqp: &Amqp, filter: &Filter) -> Result<PurgePlan> {
        self.check_ids(&filter.ids)?;
        let mut plan = PurgePlan::default();
        let pass = self
            .scan(amqp, None, |letter| {
                if filter.matches(&letter) {
                    plan.matching += 1;
                    if plan.samples.len() < PREVIEW_SAMPLES {
                        plan.samples.push((letter.id(), letter.reason_sample()));
                    }
                }
                ControlFlow::Continue(())
            })
            .await?;
        plan.total = pass.total;
        plan.read = pass.read;
        Ok(plan)
    }
}

/// What a purge did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PurgeReport {
    pub(crate) file: PathBuf,
    /// Dead letters written to it and then removed.
    pub(crate) purged: usize,
    /// Dead letters read that did not match and stayed.
    pub(crate) kept: usize,
    /// Dead letters written and removed, per dead-letter queue.
    pub(crate) queues: Vec<QueueCount>,
}

impl DeadQueues {
    /// [`purge_with_export`] over every dead-letter queue, into one file:
    /// every queue is read and held at once, the matching letters of all
    /// of them are written (each record names its own dead-letter queue,
    /// so that `dead import` puts it back there) and flushed, and only then
    /// are they removed. If anything fails before that, the file is
    /// removed and nothing is purged from any queue. A position (`#N`)
    /// among the filter's ids is refused when there are several queues.
    pub(crate) async fn purge_with_export(
        &self,
        amqp: &Amqp,
        filter: &Filter,
        path: &Path,
    ) -> Result<PurgeReport> {
        self.check_ids(&filter.ids)?;
        let present = self.present(amqp).await?;
        let mut cursors = Vec::with_capacity(present.len());
        let mut opened = Ok(());
        for (queue, _) in present {
            match Cursor::open(amqp, &queue.dead_queue, None).await {
                Ok(cursor) => cursors.push((queue, cursor)),
                Err(e) => {
                    opened = Err(e);
                    break;
                }
            }
        }
        let outcome = match opened.and_then(|()| create_export(path)) {
            Ok(file) => export_then_ack(&mut cursors, filter, file, path).await,
            Err(e) => Err(e),
        };
        for (_, cursor) in cursors {
            cursor.release().await;
        }
        outcome
    }
}

/// A new export file: never an existing one, readable by its owner only.
fn create_export(path: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map_err(|e| OpsError::io(path, e))
}

async fn export_then_ack(
    cursors: &mut [(&DeadQueue, Cursor)],
    filter: &Filter,
    file: File,
    path: &Path,
) -> Result<PurgeReport> {
    let (tags, kept) = match export(cursors, filter, file, path).await {
        Ok(exported) => exported,
        Err(e) => {
            // Incomplete: nothing was removed, and the file must not stand
            // in the way of a rerun.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    let mut queues = Vec::with_capacity(cursors.len());
    for ((queue, cursor), tags) in cursors.iter_mut().zip(&tags) {
        for tag in tags {
            cursor.ack(*tag).await?;
        }
        queues.push(QueueCount {
            dead_queue: queue.dead_queue.clone(),
            shard: queue.shard,
            count: tags.len(),
        });
    }
    Ok(PurgeReport {
        file: path.to_owned(),
        purged: tags.iter().map(Vec::len).sum(),
        kept,
        queues,
    })
}

/// Writes the matching dead letters of every queue and the trailer, syncs
/// the file; the delivery tags of the letters written, per cursor, and how
/// many did not match.
async fn export(
    cursors: &mut [(&DeadQueue, Cursor)],
    filter: &Filter,
    file: File,
    path: &Path,
) -> Result<(Vec<Vec<u64>>, usize)> {
    let mut out = BufWriter::new(file);
    let mut tags = Vec::with_capacity(cursors.len());
    let mut kept = 0;
    let io = |e: std::io::Error| OpsError::io(path, e);
    for (queue, cursor) in cursors.iter_mut() {
        let mut written = Vec::new();
        while let Some(held) = cursor.next().await? {
            let letter = DeadLetter::new(held.position, held.body, held.properties);
            if !filter.matches(&letter) {
                kept += 1;
                continue;
            }
            serde_json::to_writer(&mut out, &ExportRecord::of(&queue.dead_queue, &letter))
                .map_err(|e| io(e.into()))?;
            out.write_all(b"\n").map_err(io)?;
            written.push(held.tag);
        }
        tags.push(written);
    }
    let records: usize = tags.iter().map(Vec::len).sum();
    let trailer = serde_json::json!({ TRAILER_KEY: { "records": records } });
    writeln!(out, "{trailer}").map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok((tags, kept))
}
