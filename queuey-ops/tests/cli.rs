//! `queuey --help` (no broker needed), run as the built binary.
//!
//! The broker suites are the binary's unit tests (`src/tests/`); they run
//! this binary too, which cargo builds for an integration test like this
//! one.

use std::process::Command;

#[test]
fn help_names_every_command_and_the_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_queuey"))
        .arg("--help")
        .output()
        .expect("queuey runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for command in ["dead", "holds", "topology", "doctor", "web", "queues"] {
        assert!(
            text.contains(&format!("\n  {command} ")),
            "{command} missing:\n{text}"
        );
    }
    assert!(
        text.contains("Exit codes: 0 ok, 1 error, 2 bad usage, 3"),
        "{text}"
    );
    assert!(
        !text.contains("guest:guest"),
        "no credentials in the help:\n{text}"
    );
}

#[test]
fn a_mutating_command_without_yes_is_described_as_a_preview() {
    let out = Command::new(env!("CARGO_BIN_EXE_queuey"))
        .args(["dead", "redrive", "--help"])
        .output()
        .expect("queuey runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("preview unless --yes"), "{text}");
}

#[test]
fn the_help_names_hold_queues_as_the_backend_declares_them() {
    let out = Command::new(env!("CARGO_BIN_EXE_queuey"))
        .arg("--help")
        .output()
        .expect("queuey runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // Quorum holds (the default) and classic ones; the help wraps lines.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(
            "(`emails.deferred.quorum.<ms>`, or `emails.deferred.<ms>` with classic holds)"
        ),
        "{text}"
    );
    assert!(
        flat.contains("before `.quorum.<ms>`, or `.<ms>` for classic holds"),
        "{text}"
    );
}

#[test]
fn help_read_by_a_reader_that_closes_early_exits_0() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_queuey"))
        .arg("--help")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("queuey runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(first.starts_with("Operate queuey"), "{first}");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
