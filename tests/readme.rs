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
