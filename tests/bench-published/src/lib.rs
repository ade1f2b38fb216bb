//! The Rust generated from two vendored published schemas (each twice: free-form objects as
//! text, the default, and as `serde_json::Map`), and the corpus the benchmarks in
//! `benches/published.rs`, `ts/bench.mjs` and `py/bench.py` time (`corpus.json`, written by
//! `corpus.py`).

/// Agent Client Protocol v1 (`tests/third-party-schemas/acp-v1.schema.json`).
#[allow(clippy::all, clippy::pedantic)]
pub mod acp_v1 {
    include!(concat!(env!("OUT_DIR"), "/acp_v1.rs"));
}

/// Model Context Protocol 2026-07-28 (`tests/third-party-schemas/mcp-2026-07-28.schema.json`).
#[allow(clippy::all, clippy::pedantic)]
pub mod mcp_2026_07_28 {
    include!(concat!(env!("OUT_DIR"), "/mcp_2026_07_28.rs"));
}

/// [`acp_v1`] with free-form objects built as maps (`serde_json::Map`, `--objects-as-maps`).
#[allow(clippy::all, clippy::pedantic)]
pub mod acp_v1_maps {
    include!(concat!(env!("OUT_DIR"), "/acp_v1_maps.rs"));
}

/// [`mcp_2026_07_28`] with free-form objects built as maps (`serde_json::Map`,
/// `--objects-as-maps`), such as a tool call's `arguments`.
#[allow(clippy::all, clippy::pedantic)]
pub mod mcp_2026_07_28_maps {
    include!(concat!(env!("OUT_DIR"), "/mcp_2026_07_28_maps.rs"));
}

/// The benchmark corpus: sets of JSON texts, each a valid document of one named type.
pub const CORPUS: &str = include_str!("../corpus.json");

/// One set of the corpus.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct DocumentSet {
    /// The set's name (`acp-message-chunks`, ...).
    pub name: String,
    /// The vendored schema's file stem (`acp-v1`, `mcp-2026-07-28`).
    pub schema: String,
    /// The named type every document is checked as.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The documents, as JSON text.
    pub docs: Vec<String>,
}

/// Every set of [`CORPUS`], in file order.
///
/// # Panics
///
/// When `corpus.json` is not the shape `corpus.py` writes.
pub fn corpus() -> Vec<DocumentSet> {
    #[derive(serde::Deserialize)]
    struct Corpus {
        sets: Vec<DocumentSet>,
    }
    serde_json::from_str::<Corpus>(CORPUS)
        .expect("corpus.json is the shape corpus.py writes")
        .sets
}

/// The vendored schema file's text for a set's `schema`.
///
/// # Panics
///
/// For a schema the crate does not carry.
pub fn schema_text(schema: &str) -> &'static str {
    match schema {
        "acp-v1" => include_str!("../../third-party-schemas/acp-v1.schema.json"),
        "mcp-2026-07-28" => include_str!("../../third-party-schemas/mcp-2026-07-28.schema.json"),
        other => panic!("no vendored schema `{other}` in this crate"),
    }
}
