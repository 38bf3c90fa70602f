//! The guard rails of the mutating commands: where a redrive may move a
//! job, what a purge's export file looks like, and suffixes that would
//! point the tools at live queues.

use crate::tests::letters::{Forged, delivered_before, forge};
use crate::tests::support::{harness, json, ok, queuey_bin};

#[tokio::test]
async fn a_redrive_moves_only_to_the_queue_operated_on_unless_told_otherwise() {
    let h = harness!("dead_redrive_targets");
    let q = h.queue("dead-targets");
    let dq = format!("{q}.dead");
    let other = h.queue("dead-targets-other");
    let third = h.queue("dead-targets-third");
    let (backend, _) = h.backend(&q).await;
    let (backend_other, _) = h.backend(&other).await;
    let (backend_third, _) = h.backend(&third).await;
    let missing = format!("queuey-ops-test.missing.{}", uuid::Uuid::new_v4().simple());
    // Two of this queue, one that died on another queue, one on a missing one.
    for original in [&q, &other, &q, &missing] {
        forge(&h, &dq, &Forged::new("job", "boom", original)).await;
    }

    // The preview names every target and flags the foreign and missing ones.
    let out = ok(&h.cli(&["dead", "redrive", &q]));
    assert!(out.contains("would move 2 of 4"), "{out}");
    let line_of = |text: &str, queue: &str| {
        text.lines()
            .find(|l| {
                l.trim_end().ends_with(&format!("→ {queue}")) || l.contains(&format!("→ {queue} "))
            })
            .unwrap_or_else(|| panic!("no line for {queue}:\n{text}"))
            .to_owned()
    };
    assert!(line_of(&out, &q).trim_start().starts_with("2  →"), "{out}");
    assert!(line_of(&out, &other).contains("left in place"), "{out}");
    assert!(line_of(&out, &missing).contains("left in place"), "{out}");
    assert!(out.contains("2 dead letters stay"), "{out}");
    let plan = json(&h.cli(&["dead", "redrive", &q, "--json"]))["plan"].clone();
    assert_eq!(plan["would_move"], 2);
    assert_eq!(plan["foreign"], 2);
    let targets = plan["targets"].as_array().unwrap();
    let target = |name: &str| {
        targets
            .iter()
            .find(|t| t["queue"] == name)
            .unwrap_or_else(|| panic!("{name} in {targets:?}"))
            .clone()
    };
    assert_eq!(target(&q)["foreign"], false);
    assert_eq!(target(&other)["foreign"], true);
    assert_eq!(target(&other)["moves"], false);
    assert_eq!(target(&missing)["exists"], false);

    // Without a flag only this queue's dead letters move; the rest stay.
    let out = ok(&h.cli(&["dead", "redrive", &q, "--yes"]));
    assert!(out.contains("moved 2 dead letters"), "{out}");
    assert!(out.contains("left 2 dead letters in place"), "{out}");
    assert_eq!(
        (h.ready(&dq).await, h.ready(&q).await, h.ready(&other).await),
        (2, 2, 0)
    );

    // --any-target: each to its own queue; the missing one stops the run
    // with nothing lost.
    let preview = ok(&h.cli(&["dead", "redrive", &q, "--any-target"]));
    assert!(
        line_of(&preview, &other).contains("another queue"),
        "{preview}"
    );
    assert!(line_of(&preview, &missing).contains("MISSING"), "{preview}");
    let out = h.cli(&["dead", "redrive", &q, "--any-target", "--yes"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert_eq!(
        (h.ready(&dq).await, h.ready(&q).await, h.ready(&other).await),
        (1, 2, 1)
    );
    let left = delivered_before(&h, &dq).await;
    assert_eq!(left.len(), 1);

    // --to: everything to the named queue, whatever it died on.
    forge(&h, &dq, &Forged::new("job", "boom", &other)).await;
    let out = h.cli(&["dead", "redrive", &q, "--to", &missing, "--yes"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(h.ready(&dq).await, 2, "nothing moved to a missing queue");
    let out = ok(&h.cli(&["dead", "redrive", &q, "--to", &third]));
    assert!(line_of(&out, &third).starts_with("       2  →"), "{out}");
    assert!(line_of(&out, &third).contains("another queue"), "{out}");
    let report = json(&h.cli(&["dead", "redrive", &q, "--to", &third, "--yes", "--json"]));
    assert_eq!(report["moved"], 2);
    assert_eq!(report["moved_to"][&third], 2);
    assert_eq!((h.ready(&dq).await, h.ready(&third).await), (0, 2));
    for b in [backend, backend_other, backend_third] {
        b.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_purge_export_is_private_and_never_left_behind_by_a_failure() {
    let h = harness!("dead_purge_export_file");
    let q = h.queue("dead-export");
    let dq = format!("{q}.dead");
    let (backend, _) = h.backend(&q).await;
    forge(&h, &dq, &Forged::new("job", "boom", &q)).await;
    let dir = tempfile::tempdir().unwrap();

    // A queue that does not exist: an error, and no file.
    let missing = format!("queuey-ops-test.missing.{}", uuid::Uuid::new_v4().simple());
    let file = dir.path().join("missing.jsonl");
    let out = h.cli(&[
        "dead",
        "purge",
        &missing,
        "--export",
        file.to_str().unwrap(),
        "--yes",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(
        !file.exists(),
        "no export file for a queue that does not exist"
    );

    // A real purge: the file is readable by its owner only.
    let file = dir.path().join("dead.jsonl");
    let out = ok(&h.cli(&[
        "dead",
        "purge",
        &q,
        "--export",
        file.to_str().unwrap(),
        "--yes",
    ]));
    assert!(out.contains("exported 1 dead letters"), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "export mode {mode:o}");
    }
    assert_eq!(crate::dead::read_export(&file).unwrap().len(), 1);
    assert_eq!(h.ready(&dq).await, 0);

    // An export that fails part way (the file may not grow past 512 bytes)
    // removes its file and purges nothing.
    #[cfg(unix)]
    {
        let reason = "x".repeat(4096);
        forge(&h, &dq, &Forged::new("job", &reason, &q)).await;
        let file = dir.path().join("too-big.jsonl");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"")
            .arg(queuey_bin())
            .args([
                "dead",
                "purge",
                &q,
                "--export",
                file.to_str().unwrap(),
                "--yes",
            ])
            .env("AMQP_URL", &h.url)
            .output()
            .expect("sh runs");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(!file.exists(), "a failed export leaves no file");
        assert_eq!(h.ready(&dq).await, 1, "nothing purged");
    }
    backend.close().await.unwrap();
}

#[tokio::test]
async fn an_empty_or_shared_suffix_is_refused_before_touching_a_queue() {
    let h = harness!("dead_suffix_refused");
    let q = h.queue("dead-suffix");
    let (backend, config) = h.backend(&q).await;
    // A live job on the work queue.
    let payload = serde_json::value::to_raw_value(&serde_json::json!({})).unwrap();
    let env = queuey_core::Envelope::new("live", config.name(), payload);
    queuey_core::backend::Backend::publish(&backend, &env)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("live.jsonl");
    let file = file.to_str().unwrap();

    for (flags, named) in [
        (vec!["--dead-suffix", ""], "dead_suffix"),
        (vec!["--deferred-suffix", ""], "deferred_suffix"),
        (vec!["--suspect-suffix", ""], "suspect_suffix"),
        (vec!["--suspect-suffix", ".dead"], "suspect_suffix"),
    ] {
        for command in [
            vec!["dead", "ls", q.as_str()],
            vec!["dead", "redrive", q.as_str(), "--yes"],
            vec!["dead", "purge", q.as_str(), "--export", file, "--yes"],
        ] {
            let mut args = flags.clone();
            args.extend(command);
            let out = h.cli(&args);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(named), "{args:?}: {err}");
        }
    }
    // The live job was not even read.
    assert_eq!(
        delivered_before(&h, &q).await,
        vec![(env.job_id.to_string(), false)]
    );
    assert!(!std::path::Path::new(file).exists());
    backend.close().await.unwrap();
}
