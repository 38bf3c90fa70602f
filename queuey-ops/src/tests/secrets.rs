//! No password the `queuey` tool is given ever shows in what it prints:
//! URLs it cannot parse (no `//`, no scheme, an unescaped `/` in the
//! password), and credentials inside `--mgmt-url`, searched for as text and
//! in the byte forms a log or a debug print would take.

use std::process::Command;

use crate::tests::support::{amqp_url, harness, queuey_bin};

/// The forms a secret may take in output: as written, percent-decoded, its
/// bytes as a decimal list (how a byte buffer's `Debug` prints them) and in
/// hex.
fn forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    vec![
        secret.to_owned(),
        bytes
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        bytes.iter().map(|b| format!("{b:02x}")).collect(),
        bytes.iter().map(|b| format!("{b:02X}")).collect(),
    ]
}

fn printed(args: &[&str]) -> String {
    let out = Command::new(queuey_bin())
        .args(args)
        .env_remove("AMQP_URL")
        .env_remove("QUEUEY_MGMT_URL")
        .output()
        .expect("the queuey binary runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_hidden(secret: &str, out: &str, what: &str) {
    for form in forms(secret) {
        assert!(
            !out.contains(&form),
            "{what} printed the password as `{form}`:\n{out}"
        );
    }
}

#[test]
fn urls_the_tool_cannot_use_never_print_their_password() {
    let secret = format!("SECRET{}", uuid::Uuid::new_v4().simple());
    let half = &secret[..secret.len() / 2];
    let rest = &secret[secret.len() / 2..];
    for url in [
        format!("amqp:guest:{secret}@127.0.0.1:5672"),
        format!("guest:{secret}@127.0.0.1:5672"),
        format!("amqp://guest:{half}/{rest}@127.0.0.1:5672/%2f"),
        format!("amqp://guest:{half}%2F{rest}@127.0.0.1:1/%2f"),
        format!("amqps://guest:{secret}@127.0.0.1:1/%2f"),
    ] {
        for command in [&["dead", "ls", "q"][..], &["doctor"], &["holds", "q"]] {
            let mut args = vec!["--url", url.as_str()];
            args.extend_from_slice(command);
            let out = printed(&args);
            assert!(
                out.contains("***") || out.contains("FAIL") || out.contains("error"),
                "{out}"
            );
            assert_hidden(&secret, &out, &format!("{command:?} with {url}"));
            if url.contains('/') && url.contains(half) {
                for part in [half, rest] {
                    assert!(!out.contains(part), "{command:?} printed `{part}`:\n{out}");
                }
            }
        }
    }
}

#[tokio::test]
async fn credentials_in_the_management_url_are_used_and_never_printed() {
    let h = harness!("mgmt_secret");
    let Some(url) = amqp_url("mgmt_secret") else {
        return;
    };
    let queue = h.queue("mgmt-secret");
    // Wrong credentials in the management URL: the tools fail, without
    // printing them.
    let secret = format!("SECRET{}", uuid::Uuid::new_v4().simple());
    let mgmt = format!("http://guest:{secret}@127.0.0.1:15672");
    for command in [&["doctor"][..], &["holds", queue.as_str()]] {
        let mut args = vec!["--url", url.as_str(), "--mgmt-url", mgmt.as_str()];
        args.extend_from_slice(command);
        let out = printed(&args);
        assert!(out.contains("401") || out.contains("Login failed"), "{out}");
        assert_hidden(&secret, &out, &format!("{command:?}"));
    }
    // The right ones, given only in the management URL, are used.
    let mgmt = "http://guest:guest@127.0.0.1:15672/".to_owned();
    let out = printed(&["--url", &url, "--mgmt-url", &mgmt, "doctor"]);
    assert!(out.contains("ok    management"), "{out}");
    assert!(out.contains("http://127.0.0.1:15672"), "{out}");
}
