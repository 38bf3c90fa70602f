//! Reads take what they need of a dead-letter queue and no more, and leave
//! every letter in place and in order.
//!
//! What a read took is visible on the broker: a message handed back after a
//! read is flagged `redelivered`, one the read never took is not.

use std::collections::BTreeMap;

use crate::browse::WINDOW;
use crate::tests::letters::{delivered_before, forge_many};
use crate::tests::support::{fingerprint_counts, harness, json, ok};

const LETTERS: usize = 100;

fn reason(i: usize) -> String {
    match i % 4 {
        0 => format!("HTTP 503 from upstream after {} ms", 100 + i),
        1 => format!("order {} not found", 1000 + i),
        2 => "timeout".to_owned(),
        _ => format!("user {} is locked", uuid::Uuid::new_v4()),
    }
}

#[tokio::test]
async fn show_stops_at_the_letter_and_ls_at_the_page() {
    let h = harness!("dead_reads_stop_early");
    let q = h.queue("dead-reads");
    let dq = format!("{q}.dead");
    let (backend, _) = h.backend(&q).await;
    let ids = forge_many(&h, &dq, &q, LETTERS, reason).await;
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();

    // `show '#1'` reads the first letter only.
    let shown = json(&h.cli(&["dead", "show", &q, "#1", "--json"]));
    assert_eq!(shown["summary"]["id"], ids[0].as_str());
    let after = delivered_before(&h, &dq).await;
    let order: Vec<&str> = after.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(order, ids, "every letter in place, in order");
    let taken: Vec<bool> = after.iter().map(|(_, r)| *r).collect();
    let mut expected = vec![false; LETTERS];
    expected[0] = true;
    assert_eq!(taken, expected, "show #1 took only #1");

    // `ls --limit 5` reads the page and at most one window ahead; a second
    // queue, as the look above flagged every letter of the first.
    let q2 = h.queue("dead-reads-ls");
    let dq2 = format!("{q2}.dead");
    let (backend2, _) = h.backend(&q2).await;
    let ids2 = forge_many(&h, &dq2, &q2, LETTERS, reason).await;
    let text = ok(&h.cli(&["dead", "ls", &q2, "--limit", "5"]));
    assert!(
        text.contains(&format!("showing 5 of {LETTERS} matching")),
        "{text}"
    );
    assert!(text.contains("next page: --offset 5"), "{text}");
    let after = delivered_before(&h, &dq2).await;
    assert_eq!(
        after.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        ids2.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
    let taken = after.iter().filter(|(_, r)| *r).count();
    assert!(after[..5].iter().all(|(_, r)| *r), "{after:?}");
    assert!(
        (5..=5 + WINDOW).contains(&taken),
        "ls --limit 5 took {taken} of {LETTERS}"
    );
    assert!(after[5 + WINDOW..].iter().all(|(_, r)| !*r));

    // A filtered page stops too, and says its count is a lower bound.
    let page = json(&h.cli(&[
        "dead", "ls", &q2, "--filter", "timeout", "--limit", "2", "--json",
    ]));
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["matching_exact"], false);
    assert!(page["read"].as_u64().unwrap() < LETTERS as u64, "{page}");
    assert_eq!(h.ready(&dq2).await as usize, LETTERS);
    backend.close().await.unwrap();
    backend2.close().await.unwrap();
}

#[tokio::test]
async fn stats_and_pages_over_several_read_windows_are_exact() {
    let h = harness!("dead_reads_windows");
    let q = h.queue("dead-windows");
    let dq = format!("{q}.dead");
    let (backend, _) = h.backend(&q).await;
    let n = 5 * WINDOW + 3;
    let ids = forge_many(&h, &dq, &q, n, reason).await;

    let stats = json(&h.cli(&["dead", "stats", &q, "--json"]));
    assert_eq!(stats["total"], n);
    let groups = fingerprint_counts(&stats);
    let quarter = |r: usize| (0..n).filter(|i| i % 4 == r).count() as u64;
    assert_eq!(
        groups,
        BTreeMap::from([
            ("HTTP <n> from upstream after <n> ms".to_owned(), quarter(0)),
            ("order <n> not found".to_owned(), quarter(1)),
            ("timeout".to_owned(), quarter(2)),
            ("user <id> is locked".to_owned(), quarter(3)),
        ])
    );
    let timeouts = &stats["by_fingerprint"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["fingerprint"] == "timeout")
        .unwrap()
        .clone();
    assert_eq!(timeouts["first_position"], 3);
    assert_eq!(timeouts["example_id"], ids[2].to_string());

    // Pages from either end, across window boundaries.
    let all: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let page_ids = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["dead", "ls", &q, "--json"];
        full.extend_from_slice(args);
        json(&h.cli(&full))["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let offset = (2 * WINDOW - 3).to_string();
    assert_eq!(
        page_ids(&["--offset", &offset, "--limit", "10"]),
        all[2 * WINDOW - 3..2 * WINDOW + 7]
    );
    let newest: Vec<String> = all.iter().rev().skip(WINDOW).take(7).cloned().collect();
    let skip = WINDOW.to_string();
    assert_eq!(
        page_ids(&["--newest", "--offset", &skip, "--limit", "7"]),
        newest
    );
    let newest_timeouts: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 4 == 2)
        .map(|(_, id)| id.clone())
        .rev()
        .skip(3)
        .take(4)
        .collect();
    assert_eq!(
        page_ids(&[
            "--newest", "--filter", "timeout", "--offset", "3", "--limit", "4"
        ]),
        newest_timeouts
    );
    let shown = json(&h.cli(&["dead", "show", &q, &all[n - 1], "--json"]));
    assert_eq!(shown["summary"]["position"], n);

    let after = delivered_before(&h, &dq).await;
    assert_eq!(
        after.into_iter().map(|(id, _)| id).collect::<Vec<_>>(),
        all,
        "every letter in place, in order"
    );
    backend.close().await.unwrap();
}
