//! Adding a method to the schema without handling it stops the dispatch from compiling.
//!
//! `tests/ui/unhandled_method.rs` matches exhaustively over the `Method` enum of the
//! `methods_extra.json` fixture (the `methods.json` fixture plus `sleep`) but handles only the
//! original methods; it must fail with E0004 naming `Method::Sleep`. Regenerate the expected
//! output with `TRYBUILD=overwrite cargo test -p openagents-conformance --test compile_fail`.

#[test]
fn an_unhandled_method_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/unhandled_method.rs");
    // trybuild checks the compiler's output against this file when its `TestCases` drops;
    // check the file says what the test is about.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ui/unhandled_method.stderr");
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert!(expected.contains("E0004"), "the expected error is non-exhaustive patterns (E0004):\n{expected}");
    assert!(expected.contains("Method::Sleep(_)"), "the expected error names the unhandled method:\n{expected}");
}
