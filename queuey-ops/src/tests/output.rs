//! The binary's output when its reader goes away: `queuey … | head` ends
//! quietly with the command's own exit code, not a panic.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};

use crate::dead::ExportRecord;
use crate::dead::TRAILER_KEY;
use crate::tests::support::queuey_bin;

/// An export file of `n` records, each from a queue of its own: a preview
/// of its import prints a line per queue, far more than a pipe buffers.
fn export_file(n: usize) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..n {
        let record = ExportRecord {
            queue: format!("queuey-ops-test.output.queue-{i:06}"),
            id: format!("id-{i}"),
            reason: "boom".into(),
            body_base64: data_encoding::BASE64.encode(b"{}"),
            properties: lapin::BasicProperties::default(),
        };
        writeln!(file, "{}", serde_json::to_string(&record).unwrap()).unwrap();
    }
    writeln!(file, "{{\"{TRAILER_KEY}\":{{\"records\":{n}}}}}").unwrap();
    file.flush().unwrap();
    file
}

/// Runs the binary with `args`, reads the first line of its stdout and
/// closes it; returns that line, the exit code and stderr.
fn first_line_then_close(args: &[&str]) -> (String, Option<i32>, String) {
    let mut child = Command::new(queuey_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the queuey binary runs");
    let mut first = String::new();
    {
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        reader.read_line(&mut first).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        first,
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_closes_early_ends_the_output_quietly_with_exit_0() {
    let file = export_file(20_000);
    let path = file.path().to_str().unwrap();
    for json in [false, true] {
        let mut args = vec!["dead", "import", path];
        if json {
            args.insert(0, "--json");
        }
        let (first, code, stderr) = first_line_then_close(&args);
        let expected = if json {
            "{"
        } else {
            "preview: would publish 20000"
        };
        assert!(first.starts_with(expected), "{args:?}: {first}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr, "", "{args:?}: nothing on stderr");
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}

#[test]
fn the_whole_output_is_written_when_read_to_the_end() {
    let file = export_file(3);
    let out = Command::new(queuey_bin())
        .args(["dead", "import", file.path().to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.ends_with("nothing was changed; add --yes to import\n"),
        "{text}"
    );
}
