//! `dead purge --export`: dead letters removed only after they are safe in
//! an export file.
//!
//! The export file is created once the queue is found, never over an
//! existing one, mode `0600` on Unix (full payloads). If the export fails
//! before it is flushed, the file is removed and nothing is purged; a file
//! cut short by a kill lacks the trailer [`read_export`](crate::dead::read_export) wants.

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

/// What a purge would remove: of `total` dead letters, `read`, `matching`,
/// and the first [`PREVIEW_SAMPLES`] as `(id, start of the reason)`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PurgePlan {
    pub(crate) total: usize,
    pub(crate) read: usize,
    pub(crate) matching: usize,
    pub(crate) samples: Vec<(String, String)>,
}

impl DeadQueues {
    /// What [`purge_with_export`](DeadQueues::purge_with_export) with
    /// `filter` would remove now.
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

/// What a purge did: dead letters exported then removed (in all, and per
/// queue), and those that did not match and stayed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PurgeReport {
    pub(crate) file: PathBuf,
    pub(crate) purged: usize,
    pub(crate) kept: usize,
    pub(crate) queues: Vec<QueueCount>,
}

impl DeadQueues {
    /// Exports the matching letters of every dead-letter queue (all held at
    /// once) into one file, flushes it, and only then removes them.
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
            // Nothing was removed; the file must not stop a rerun.
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

/// Writes and syncs the matching dead letters and the trailer; returns
/// their delivery tags per cursor and how many did not match.
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
