//! No message in the libraries or the tool carries the indentation of its
//! next source line: a string literal broken over two lines without the
//! trailing backslash keeps the line break's run of spaces mid-sentence,
//! and every user reading that error or log line sees it.
//!
//! Plain file reading, as the module graph test does: `cargo test` runs it
//! everywhere.

use std::path::Path;

#[path = "support/sources.rs"]
mod sources;

/// Every crate's `src/`, from the workspace root.
const SOURCES: &[&str] = &[
    "src",
    "queuey-core/src",
    "queuey-macros/src",
    "queuey-tower/src",
    "queuey-rabbitmq/src",
    "queuey-redis/src",
    "queuey-ops/src",
];

/// The shortest run of spaces that counts: an indentation, not a double
/// space or an aligned column.
const RUN: usize = 6;

#[test]
fn no_string_literal_holds_a_line_breaks_indentation() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut read = 0;
    for source in SOURCES {
        for (path, text) in sources::rust_files(&workspace.join(source)) {
            read += 1;
            for (n, line) in text.lines().enumerate() {
                if stray_run(line) {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(read > 100, "read only {read} files");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_run_mid_sentence_is_found_and_an_aligned_column_is_not() {
    assert!(stray_run(
        r#"    "could not hand it back to the                      broker instead","#
    ));
    assert!(!stray_run(r#"    "could not hand it back to the \"#));
    assert!(!stray_run(r#"    println!("reason:      {}", reason);"#));
    assert!(!stray_run(
        r#"    // a comment   with           spaces in it"#
    ));
    assert!(!stray_run(r#"    let x = 1;          // aligned"#));
}

/// Whether a string literal on `line` holds a letter or punctuation, a run
/// of at least [`RUN`] spaces, then a lowercase letter, a backtick or an
/// opening parenthesis: the shape of a continuation that lost its
/// backslash. Comments are skipped.
fn stray_run(line: &str) -> bool {
    if line.trim_start().starts_with("//") {
        return false;
    }
    let mut in_string = false;
    let mut escaped = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            if c == '/' && chars.get(i + 1) == Some(&'/') {
                return false;
            }
            if c == '"' {
                in_string = true;
            }
            i += 1;
            continue;
        }
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = false;
        } else if c == ' ' && i > 0 && is_text(chars[i - 1]) {
            let run = chars[i..].iter().take_while(|c| **c == ' ').count();
            let next = chars.get(i + run);
            if run >= RUN && next.is_some_and(|n| n.is_lowercase() || *n == '`' || *n == '(') {
                return true;
            }
            i += run;
            continue;
        }
        i += 1;
    }
    false
}

fn is_text(c: char) -> bool {
    c.is_alphanumeric() || ",;:.)`".contains(c)
}
