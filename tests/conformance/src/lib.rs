//! Conformance of openagents-codegen's Rust output.
//!
//! The build script runs the generator over the JSON Schema Test Suite (draft 2020-12), the
//! fixture schemas in `codegen/tests/fixtures/` and a set of simple patterns, and compiles
//! everything it generates into this crate:
//!
//! - `suite.rs`: every suite group, either generated (with its validators) or refused (with the
//!   generator's message), and its cases, as `GROUPS` of [`Group`]s; `tests/suite.rs` includes
//!   and runs them;
//! - [`fixtures`]: one public module per fixture schema (`fixtures::methods`, ...);
//! - `patterns.rs`: validators for simple patterns, which the generator compiles to loops, as
//!   `PATTERNS` of [`SimplePattern`]s; `tests/patterns.rs` includes them and checks them against
//!   `regress`.
//!
//! Only the fixtures are compiled into the library (so the compile-fail test, which builds it,
//! stays cheap); the suite and pattern modules are compiled into their tests.
//!
//! Run everything with `cargo test -p openagents-conformance`.

use openagents_rt::{DocumentError, Violation};

/// The two ways generated code judges a document against its root type.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The typed path: decode through `rt::Wire`, then `rt::Validate` (`validate_document`).
    pub typed: fn(&[u8]) -> Result<(), DocumentError>,
    /// The untyped path: `rt::SchemaCheck` on a parsed value; valid when it finds nothing.
    pub dynamic: fn(&serde_json::Value) -> Vec<Violation>,
}

/// One test case of a suite group.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The case's description.
    pub description: &'static str,
    /// The instance, as JSON text.
    pub data: &'static str,
    /// Whether the suite says the instance is valid.
    pub valid: bool,
}

/// One group (one schema and its cases) of a suite file.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    /// The suite file, relative to `draft2020-12/`.
    pub file: &'static str,
    /// The group's index in the file.
    pub index: usize,
    /// The group's description.
    pub description: &'static str,
    /// The schema, as JSON text (given to the generator as `g.json`).
    pub schema: &'static str,
    /// The generator's refusal (`SchemaError`'s text) when it refused the schema.
    pub refusal: Option<&'static str>,
    /// The keyword the generator must refuse the schema on, when the group says so
    /// (`"x-refused"`, only in this crate's `extra/` files).
    pub expected_refusal: Option<&'static str>,
    /// The generated validators when it accepted it.
    pub validate: Option<Entry>,
    /// The cases.
    pub cases: &'static [Case],
}

/// A simple pattern and the validators generated for `{"type": "string", "pattern": P}`.
#[derive(Debug, Clone, Copy)]
pub struct SimplePattern {
    /// The ECMA-262 source.
    pub source: &'static str,
    /// The atoms the generator compiled it to (used to build test strings that match).
    pub atoms: &'static [PatternAtom],
    /// The generated validators.
    pub entry: Entry,
}

/// One atom of a compiled simple pattern: a character class and a repetition count.
#[derive(Debug, Clone, Copy)]
pub struct PatternAtom {
    /// The class, as sorted inclusive ranges of Unicode scalar values.
    pub ranges: &'static [(u32, u32)],
    /// The fewest repetitions.
    pub min: u32,
    /// The most repetitions; `None` for no limit.
    pub max: Option<u32>,
}

/// The fixture schemas of `codegen/tests/fixtures/`, one generated module each.
pub mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}
