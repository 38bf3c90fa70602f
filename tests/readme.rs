//! The README's example is `examples/readme.rs`, which `cargo test` compiles
//! with the other examples; this keeps the README's copy the same file.

#[test]
fn the_readme_example_is_examples_readme_rs_as_it_is() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/readme.rs");
    let block = format!("```rust\n{example}```\n");
    assert!(
        readme.contains(&block),
        "README.md's ```rust example differs from examples/readme.rs: copy the file into it"
    );
}

/// The README names the facade's default features as `Cargo.toml` lists
/// them, in the same order.
#[test]
fn the_readme_names_the_default_features() {
    let readme = include_str!("../README.md");
    let manifest = include_str!("../Cargo.toml");
    let listed = manifest
        .lines()
        .find_map(|l| l.strip_prefix("default = ["))
        .and_then(|l| l.strip_suffix(']'))
        .expect("Cargo.toml has `default = [...]` on one line");
    let features: Vec<&str> = listed
        .split(',')
        .map(|f| f.trim().trim_matches('"'))
        .collect();
    let said = format!("# default features: {}", features.join(", "));
    assert!(
        readme.lines().any(|l| l.ends_with(&said)),
        "README.md should say `{said}` beside the dependency line"
    );
}
