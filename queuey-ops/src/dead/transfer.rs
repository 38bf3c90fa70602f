//! The export file of `dead purge --export` and `dead import`: a lossless
//! round trip through a JSON Lines file.
//!
//! One [`ExportRecord`] a line, then a trailer
//! `{"queuey_export_end":{"records":N}}`: a file cut short is refused.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use lapin::BasicProperties;
use serde::{Deserialize, Serialize};

use crate::amqp::{Amqp, publish_confirmed};
use crate::dead::DeadLetter;
use crate::error::{OpsError, Result};

pub(crate) const TRAILER_KEY: &str = "queuey_export_end";

/// One exported message: its queue (imported back there), id and reason
/// (for readers), body and properties with typed headers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExportRecord {
    pub(crate) queue: String,
    pub(crate) id: String,
    pub(crate) reason: String,
    pub(crate) body_base64: String,
    pub(crate) properties: BasicProperties,
}

impl ExportRecord {
    pub(crate) fn of(queue: &str, letter: &DeadLetter) -> Self {
        ExportRecord {
            queue: queue.to_owned(),
            id: letter.id(),
            reason: letter.reason(),
            body_base64: data_encoding::BASE64.encode(&letter.body),
            properties: letter.properties.clone(),
        }
    }

    pub(crate) fn body(&self) -> Result<Vec<u8>, String> {
        data_encoding::BASE64
            .decode(self.body_base64.as_bytes())
            .map_err(|e| format!("body_base64 is not base64: {e}"))
    }
}

/// Reads and checks a whole export file. Any line that is not a record, or
/// a missing or wrong trailer, is [`OpsError::BadImport`].
pub(crate) fn read_export(path: &Path) -> Result<Vec<ExportRecord>> {
    let file = File::open(path).map_err(|e| OpsError::io(path, e))?;
    let bad = |line: usize, detail: String| OpsError::BadImport {
        path: path.to_owned(),
        line,
        detail,
    };
    let mut records = Vec::new();
    let mut trailer = None;
    let mut last_line = 0;
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let number = index + 1;
        last_line = number;
        let line = line.map_err(|e| bad(number, format!("cannot read the line: {e}")))?;
        if trailer.is_some() {
            return Err(bad(number, "a line after the end-of-export trailer".into()));
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| bad(number, format!("not JSON ({e}); is the file truncated?")))?;
        if let Some(end) = value.get(TRAILER_KEY) {
            let count = end.get("records").and_then(serde_json::Value::as_u64);
            trailer = Some((number, count));
            continue;
        }
        let record: ExportRecord = serde_json::from_value(value)
            .map_err(|e| bad(number, format!("not an exported dead letter: {e}")))?;
        record.body().map_err(|e| bad(number, e))?;
        records.push(record);
    }
    match trailer {
        None => Err(bad(
            last_line.max(1),
            "no end-of-export trailer: the file is truncated or not a queuey export".into(),
        )),
        Some((line, count)) if count != Some(records.len() as u64) => Err(bad(
            line,
            format!(
                "the trailer announces {count:?} records but the file holds {}",
                records.len()
            ),
        )),
        Some(_) => Ok(records),
    }
}

/// Where an import would put the records: how many, per queue.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ImportPlan {
    pub(crate) records: usize,
    pub(crate) by_queue: BTreeMap<String, usize>,
}

/// Where [`import`] would put `records` (into `to`, else back where they
/// were exported from).
pub(crate) fn plan_import(records: &[ExportRecord], to: Option<&str>) -> ImportPlan {
    let mut by_queue = BTreeMap::new();
    for r in records {
        *by_queue
            .entry(to.unwrap_or(&r.queue).to_owned())
            .or_default() += 1;
    }
    ImportPlan {
        records: records.len(),
        by_queue,
    }
}

/// Publishes every record, confirmed and exact, once every destination
/// queue is found to exist.
pub(crate) async fn import(
    amqp: &Amqp,
    records: &[ExportRecord],
    to: Option<&str>,
) -> Result<usize> {
    let plan = plan_import(records, to);
    for queue in plan.by_queue.keys() {
        amqp.require(queue).await?;
    }
    let channel = amqp.confirm_channel().await?;
    for record in records {
        let queue = to.unwrap_or(&record.queue);
        let body = record.body().map_err(OpsError::Invalid)?;
        publish_confirmed(&channel, queue, &body, record.properties.clone()).await?;
    }
    let _ = channel
        .close(200, lapin::types::ShortString::default())
        .await;
    Ok(records.len())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn record(n: usize) -> String {
        let r = ExportRecord {
            queue: "q.dead".into(),
            id: format!("#{n}"),
            reason: "r".into(),
            body_base64: data_encoding::BASE64.encode(format!("body {n}").as_bytes()),
            properties: BasicProperties::default(),
        };
        serde_json::to_string(&r).unwrap()
    }

    fn write(lines: &[String]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        f
    }

    #[test]
    fn a_complete_export_reads_back_and_a_damaged_one_names_its_line() {
        let trailer = |n: usize| format!("{{\"{TRAILER_KEY}\":{{\"records\":{n}}}}}");
        let good = write(&[record(1), record(2), trailer(2)]);
        let records = read_export(good.path()).unwrap();
        assert_eq!(records[1].body().unwrap(), b"body 2");
        assert_eq!(plan_import(&records, Some("other")).by_queue["other"], 2);

        let cases = [
            (
                vec![record(1), record(2)],
                "line 2",
                "no end-of-export trailer",
            ),
            (vec![record(1), trailer(3)], "line 2", "announces"),
            (vec![record(1), "{\"queue\":".into()], "line 2", "not JSON"),
            (
                vec![record(1), trailer(1), record(2)],
                "line 3",
                "after the end-of-export",
            ),
            (
                vec!["{\"x\":1}".into(), trailer(1)],
                "line 1",
                "not an exported dead letter",
            ),
        ];
        for (lines, line, what) in cases {
            let file = write(&lines);
            let err = read_export(file.path()).unwrap_err().to_string();
            assert!(err.contains(line) && err.contains(what), "{err}");
        }
    }
}
