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
    for command in ["dead", "holds", "topology", "doctor", "web"] {
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
