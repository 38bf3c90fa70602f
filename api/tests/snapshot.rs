//! Each crate's public API against its reviewed snapshot.
//!
//! rustdoc's JSON output is not stable yet; the stable toolchain makes it
//! with `RUSTC_BOOTSTRAP=1`, and the `public-api` crate reads the format
//! version that toolchain writes. The JSON is built into a target directory
//! of its own, so the build that runs this test is never blocked.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates whose API is reviewed, with the features the snapshot is of
/// (their defaults).
const CRATES: &[&str] = &[
    "queuey",
    "queuey-core",
    "queuey-tower",
    "queuey-rabbitmq",
    "queuey-redis",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_owned()
}

/// Builds `krate`'s rustdoc JSON and returns its path.
fn rustdoc_json(krate: &str) -> PathBuf {
    let target = workspace().join("target").join("api-snapshot");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .current_dir(workspace())
        .args(["rustdoc", "--quiet", "--lib", "-p", krate, "--"])
        .args(["-Z", "unstable-options", "--output-format", "json"])
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTDOCFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "rustdoc JSON for {krate} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target
        .join("doc")
        .join(format!("{}.json", krate.replace('-', "_")))
}

fn public_items(krate: &str) -> String {
    let api = public_api::Builder::from_rustdoc_json(rustdoc_json(krate))
        .omit_blanket_impls(true)
        .omit_auto_trait_impls(true)
        .omit_auto_derived_impls(true)
        .build()
        .unwrap_or_else(|e| panic!("reading {krate}'s rustdoc JSON: {e}"));
    let mut text = String::new();
    for item in api.items() {
        text.push_str(&item.to_string());
        text.push('\n');
    }
    text
}

#[test]
fn every_public_item_is_in_its_reviewed_snapshot() {
    let update = std::env::var_os("UPDATE_API_SNAPSHOTS").is_some();
    let mut differences = Vec::new();
    for krate in CRATES {
        let now = public_items(krate);
        let file = workspace()
            .join("api")
            .join("snapshots")
            .join(format!("{krate}.txt"));
        if update {
            std::fs::write(&file, &now).expect("a snapshot file");
            continue;
        }
        let reviewed = std::fs::read_to_string(&file).unwrap_or_default();
        if reviewed != now {
            let old: Vec<&str> = reviewed.lines().collect();
            let new: Vec<&str> = now.lines().collect();
            let added: Vec<String> = new
                .iter()
                .filter(|l| !old.contains(l))
                .map(|l| format!("+ {l}"))
                .collect();
            let removed: Vec<String> = old
                .iter()
                .filter(|l| !new.contains(l))
                .map(|l| format!("- {l}"))
                .collect();
            differences.push(format!(
                "{krate} ({}):\n{}\n{}",
                file.display(),
                removed.join("\n"),
                added.join("\n")
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "the public API changed; if that is meant, run \
         `UPDATE_API_SNAPSHOTS=1 cargo test -p queuey-api-snapshot` and commit the files:\n\n{}",
        differences.join("\n\n")
    );
}
