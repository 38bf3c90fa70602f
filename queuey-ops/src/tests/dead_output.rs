//! What `queuey dead …` prints cannot drive the terminal, whatever a dead
//! letter holds.

use std::process::Output;

use crate::escape::is_unsafe;
use crate::tests::letters::{Forged, forge};
use crate::tests::support::{harness, json};

/// Sets the window title, rings, erases the line, returns the cursor, and
/// forges a line; then a C1 CSI (red) and a right-to-left override.
const ATTACK: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2K\rall good\n\u{9b}31m\u{202e}txt.exe";
/// How the attack reads once escaped.
const SHOWN: &str = r"\e]0;pwned\x07\e[2K\rall good\n\u{9b}31m\u{202e}txt.exe";

/// Fails when the output holds a character a terminal would act on
/// (line breaks apart), naming the command.
fn assert_inert(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let bad: Vec<(usize, char)> = text
            .char_indices()
            .filter(|&(_, c)| is_unsafe(c) && c != '\n')
            .collect();
        assert!(
            bad.is_empty(),
            "{what}: {stream} holds control characters {bad:?}:\n{text}"
        );
    }
}

#[tokio::test]
async fn control_characters_in_dead_letters_are_printed_escaped_everywhere() {
    let h = harness!("dead_output_escaped");
    let q = h.queue("dead-escape");
    let dq = format!("{q}.dead");
    let (backend, _) = h.backend(&q).await;
    let job_type = format!("send{ATTACK}");
    let reason = format!("order 7 failed{ATTACK}");
    let foreign = format!("{q}{ATTACK}");
    let id = format!("msg{ATTACK}");
    let header = format!("x-note{ATTACK}");
    // #1 an envelope of this queue, #2 a body that is not an envelope
    // (id from its message id), #3 an envelope of a queue with a hostile name.
    forge(&h, &dq, &Forged::new(&job_type, &reason, &q)).await;
    forge(
        &h,
        &dq,
        &Forged {
            message_id: Some(&id),
            malformed: true,
            extra_header: Some((&header, ATTACK)),
            ..Forged::new(&job_type, &reason, &q)
        },
    )
    .await;
    forge(&h, &dq, &Forged::new(&job_type, &reason, &foreign)).await;
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export.jsonl");
    let export = export.to_str().unwrap();

    // The escaped JSON still carries the exact text.
    let listed = json(&h.cli(&["dead", "ls", &q, "--json"]));
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items[0]["reason"], reason.as_str());
    assert_eq!(items[0]["job_type"], job_type.as_str());
    assert_eq!(items[1]["id"], id.as_str());
    let shown = json(&h.cli(&["dead", "show", &q, "#2", "--json"]));
    assert_eq!(shown["headers"][header.as_str()], ATTACK);

    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("ls", vec!["dead", "ls", &q]),
        ("ls --newest", vec!["dead", "ls", &q, "--newest"]),
        ("stats", vec!["dead", "stats", &q]),
        ("show #1", vec!["dead", "show", &q, "#1"]),
        ("show #2", vec!["dead", "show", &q, "#2"]),
        ("show by id", vec!["dead", "show", &q, &id]),
        ("redrive preview", vec!["dead", "redrive", &q]),
        (
            "redrive preview --any-target",
            vec!["dead", "redrive", &q, "--any-target"],
        ),
        (
            "purge preview",
            vec!["dead", "purge", &q, "--export", export],
        ),
        ("ls --json", vec!["dead", "ls", &q, "--json"]),
        ("stats --json", vec!["dead", "stats", &q, "--json"]),
        ("show --json", vec!["dead", "show", &q, "#2", "--json"]),
        (
            "redrive preview --json",
            vec!["dead", "redrive", &q, "--any-target", "--json"],
        ),
        (
            "purge preview --json",
            vec!["dead", "purge", &q, "--export", export, "--json"],
        ),
        (
            "redrive to a hostile missing queue",
            vec!["dead", "redrive", &q, "--any-target", "--yes"],
        ),
        ("redrive", vec!["dead", "redrive", &q, "--yes"]),
    ];
    for (what, args) in &runs {
        let out = h.cli(args);
        assert_inert(what, &out);
        if !what.starts_with("redrive to") {
            assert!(out.status.success(), "{what}: {out:?}");
        }
        if !what.ends_with("--json") {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(SHOWN),
                "{what} shows the text escaped:\n{text}"
            );
        }
    }

    // The redrive moved #1 home and left the other two, printed escaped.
    assert_eq!((h.ready(&dq).await, h.ready(&q).await), (2, 1));
    backend.close().await.unwrap();
}
