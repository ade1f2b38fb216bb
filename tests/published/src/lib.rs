//! The Rust generated from the schemas two published protocols ship, vendored in
//! `tests/third-party-schemas/`: ACP v1 ([`acp_v1`]) and MCP revisions 2026-07-28
//! ([`mcp_2026_07_28`]) and 2025-11-25 ([`mcp_2025_11_25`]). The build script generates each
//! with `openagents_codegen::Config` for the runtime `openagents_rt`; each module has
//! the generated types, their exact `Wire` decoders and validators, `TYPES`,
//! `validate_document(type_name, bytes)` (the typed path) and `check_document(type_name, value)`
//! (the untyped path: the full-schema check of a parsed value). Any compiler warning in the
//! generated code fails the build (`deny(warnings)` on each module). Free-form objects are
//! kept as text (the default); [`acp_v1_maps`] and [`mcp_2026_07_28_maps`] are the same schemas
//! generated with them built as `serde_json::Map`s.

/// ACP v1 (`tests/third-party-schemas/acp-v1.schema.json`).
#[deny(warnings)]
#[allow(clippy::all)]
pub mod acp_v1 {
    include!(concat!(env!("OUT_DIR"), "/acp_v1.rs"));
}

/// MCP revision 2026-07-28 (`tests/third-party-schemas/mcp-2026-07-28.schema.json`).
#[deny(warnings)]
#[allow(clippy::all)]
pub mod mcp_2026_07_28 {
    include!(concat!(env!("OUT_DIR"), "/mcp_2026_07_28.rs"));
}

/// MCP revision 2025-11-25 (`tests/third-party-schemas/mcp-2025-11-25.schema.json`).
#[deny(warnings)]
#[allow(clippy::all)]
pub mod mcp_2025_11_25 {
    include!(concat!(env!("OUT_DIR"), "/mcp_2025_11_25.rs"));
}

/// [`acp_v1`] with free-form objects built as maps (`serde_json::Map`, `--objects-as-maps`)
/// instead of kept as text.
#[deny(warnings)]
#[allow(clippy::all)]
pub mod acp_v1_maps {
    include!(concat!(env!("OUT_DIR"), "/acp_v1_maps.rs"));
}

/// [`mcp_2026_07_28`] with free-form objects built as maps (`serde_json::Map`,
/// `--objects-as-maps`) instead of kept as text.
#[deny(warnings)]
#[allow(clippy::all)]
pub mod mcp_2026_07_28_maps {
    include!(concat!(env!("OUT_DIR"), "/mcp_2026_07_28_maps.rs"));
}

pub mod agreement;
pub mod corpus;

use openagents_rt::{DocumentError, TypeInfo, Violation};

/// The generated `validate_document`: the typed path on JSON text.
pub type ValidateDocument = fn(&str, &[u8]) -> Option<Result<(), DocumentError>>;
/// The generated `check_document`: the untyped path on a parsed value.
pub type CheckDocument = fn(&str, &serde_json::Value) -> Option<Vec<Violation>>;

/// One protocol's generated Rust, as the comparison calls it.
#[derive(Debug, Clone, Copy)]
pub struct Generated {
    /// The protocol ([`corpus::Protocol::name`]).
    pub protocol: &'static str,
    /// The generated `TYPES`.
    pub types: &'static [TypeInfo],
    /// The typed path: exact decoding through `rt::Wire`, then the typed checks.
    pub validate_document: ValidateDocument,
    /// The untyped path: the full-schema check of a parsed value.
    pub check_document: CheckDocument,
    /// The schema file's stem in the bundled pointers (`acp-v1.schema`).
    pub stem: &'static str,
}

/// The generated Rust of each protocol, in [`corpus::PROTOCOLS`] order.
pub const GENERATED: [Generated; 3] = [
    Generated {
        protocol: "acp-v1",
        types: acp_v1::TYPES,
        validate_document: acp_v1::validate_document,
        check_document: acp_v1::check_document,
        stem: "acp-v1.schema",
    },
    Generated {
        protocol: "mcp-2026-07-28",
        types: mcp_2026_07_28::TYPES,
        validate_document: mcp_2026_07_28::validate_document,
        check_document: mcp_2026_07_28::check_document,
        stem: "mcp-2026-07-28.schema",
    },
    Generated {
        protocol: "mcp-2025-11-25",
        types: mcp_2025_11_25::TYPES,
        validate_document: mcp_2025_11_25::validate_document,
        check_document: mcp_2025_11_25::check_document,
        stem: "mcp-2025-11-25.schema",
    },
];

impl Generated {
    /// The generated type of the `$defs` entry `def` (its name can differ: a reserved name is
    /// numbered), found by its pointer in the bundle.
    pub fn type_of(&self, def: &str) -> Option<&'static str> {
        let pointer = format!(
            "#/$defs/{}/$defs/{}",
            self.stem,
            def.replace('~', "~0").replace('/', "~1")
        );
        self.types
            .iter()
            .find(|t| t.pointer == pointer)
            .map(|t| t.name)
    }
}
