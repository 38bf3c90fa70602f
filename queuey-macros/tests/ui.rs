//! Compile tests for the derives: every `pass` case must build and run, and
//! every `fail` case must fail with exactly the checked-in `.stderr`.
//!
//! Regenerate the expected output after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p queuey-macros --test ui`, then read every
//! changed `.stderr`: the span must point at the offending token.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/queues/pass/*.rs");
    cases.compile_fail("tests/ui/queues/fail/*.rs");
    cases.pass("tests/ui/job/pass/*.rs");
    cases.compile_fail("tests/ui/job/fail/*.rs");
}
