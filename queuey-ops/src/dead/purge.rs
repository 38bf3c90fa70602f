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
use crate::dead::transfer::TRAILER_KEY;
use crate::dead::{DeadLetter, ExportRecord, Filter, PREVIEW_SAMPLES, scan};
use crate::error::{OpsError, Result};

/// Characters of a reason a preview sample keeps.
const SAMPLE_REASON_CHARS: usize = 200;

/// What a purge would remove, computed without changing anything.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PurgePlan {
    /// Dead letters in the queue when the preview began.
    pub total: usize,
    /// Dead letters read.
    pub read: usize,
    /// Dead letters that would be exported and removed.
    pub matching: usize,
    /// The first [`PREVIEW_SAMPLES`] of them: `(id, start of the reason)`.
    pub samples: Vec<(String, String)>,
}

/// What [`purge_with_export`] with `filter` would remove now. Reads the
/// whole queue once, keeping counts and a few samples.
pub async fn plan_purge(amqp: &Amqp, dead_queue: &str, filter: &Filter) -> Result<PurgePlan> {
    let mut plan = PurgePlan::default();
    let pass = scan(amqp, dead_queue, None, |letter| {
        if filter.matches(&letter) {
            plan.matching += 1;
            if plan.samples.len() < PREVIEW_SAMPLES {
                let reason = letter.reason().chars().take(SAMPLE_REASON_CHARS).collect();
                plan.samples.push((letter.id(), reason));
            }
        }
        ControlFlow::Continue(())
    })
    .await?;
    plan.total = pass.total;
    plan.read = pass.read;
    Ok(plan)
}

/// What a purge did.
#[derive(Debug, Clone, Serialize)]
pub struct PurgeReport {
    /// The export file.
    pub file: PathBuf,
    /// Dead letters written to it and then removed.
    pub purged: usize,
    /// Dead letters read that did not match and stayed.
    pub kept: usize,
}

/// Removes the dead letters of `dead_queue` that pass `filter`, after
/// writing every one of them to a new file at `path` and flushing it to disk.
///
/// The file must not exist yet; it is created (mode `0600` on Unix) only
/// after `dead_queue` was found. If anything fails before the file is
/// complete and synced, the file is removed and nothing is purged. A crash
/// after that leaves every dead letter either still queued or in the file
/// (or both).
pub async fn purge_with_export(
    amqp: &Amqp,
    dead_queue: &str,
    filter: &Filter,
    path: &Path,
) -> Result<PurgeReport> {
    let mut cursor = Cursor::open(amqp, dead_queue, None).await?;
    let outcome = match create_export(path) {
        Ok(file) => export_then_ack(&mut cursor, dead_queue, filter, file, path).await,
        Err(e) => Err(e),
    };
    cursor.release().await;
    outcome
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
    cursor: &mut Cursor,
    dead_queue: &str,
    filter: &Filter,
    file: File,
    path: &Path,
) -> Result<PurgeReport> {
    let (tags, kept) = match export(cursor, dead_queue, filter, file, path).await {
        Ok(exported) => exported,
        Err(e) => {
            // Incomplete: nothing was removed, and the file must not stand
            // in the way of a rerun.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    };
    for tag in &tags {
        cursor.ack(*tag).await?;
    }
    Ok(PurgeReport {
        file: path.to_owned(),
        purged: tags.len(),
        kept,
    })
}

/// Writes the matching dead letters and the trailer, syncs the file; the
/// delivery tags of the letters written, and how many did not match.
async fn export(
    cursor: &mut Cursor,
    dead_queue: &str,
    filter: &Filter,
    file: File,
    path: &Path,
) -> Result<(Vec<u64>, usize)> {
    let mut out = BufWriter::new(file);
    let mut tags = Vec::new();
    let mut kept = 0;
    let io = |e: std::io::Error| OpsError::io(path, e);
    while let Some(held) = cursor.next().await? {
        let letter = DeadLetter::new(held.position, held.body, held.properties);
        if !filter.matches(&letter) {
            kept += 1;
            continue;
        }
        serde_json::to_writer(&mut out, &ExportRecord::of(dead_queue, &letter))
            .map_err(|e| io(e.into()))?;
        out.write_all(b"\n").map_err(io)?;
        tags.push(held.tag);
    }
    let trailer = serde_json::json!({ TRAILER_KEY: { "records": tags.len() } });
    writeln!(out, "{trailer}").map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok((tags, kept))
}
