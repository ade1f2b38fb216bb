//! openagents-codegen: reads the JSON Schema files in `schema/`, lowers them into one
//! deterministic model ([`model::TypeSpace`]), and emits Rust (and, through other emitters, the
//! published bundle) from that model.
//!
//! ```no_run
//! let rust = openagents_codegen::Config::new()
//!     .schema_dir("schema")
//!     .runtime("crate::rt")
//!     .generate_rust()?;
//! # Ok::<(), openagents_codegen::SchemaError>(())
//! ```
//!
//! The supported subset of JSON Schema 2020-12 is [`lower::SUPPORTED_KEYWORDS`]; anything else is
//! refused with a [`SchemaError`] naming the file, the JSON pointer and the keyword;
//! [`Config::load`] (what `openagents-codegen check` runs) finds every refusal at once
//! ([`Refusals`]), the generators stop at the first.

pub mod compat;
pub mod digest;
pub mod error;
pub mod history;
pub mod load;
pub mod lower;
pub mod methods;
pub mod model;
pub mod naming;
pub mod openrpc;
pub mod pattern;
pub mod python;
pub mod rust;
pub mod schemars_attrs;
pub mod typescript;

use std::path::{Path, PathBuf};

pub use error::{Refusals, SchemaError};
pub use load::Documents;
pub use model::TypeSpace;

/// The path generated service code names the `openagents-rpc` crate by, unless
/// [`Config::rpc_crate`] says otherwise.
pub const DEFAULT_RPC_CRATE: &str = "::openagents_rpc";

/// Generator options, as a builder.
#[derive(Debug, Clone)]
pub struct Config {
    schema_dir: PathBuf,
    runtime: String,
    schemars: bool,
    python_runtime: String,
    typescript: typescript::TypeScriptOptions,
    methods: Option<PathBuf>,
    service: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            schema_dir: PathBuf::from("schema"),
            runtime: "::openagents_rt".into(),
            schemars: false,
            python_runtime: python::DEFAULT_RUNTIME.into(),
            typescript: typescript::TypeScriptOptions::default(),
            methods: None,
            service: None,
        }
    }
}

impl Config {
    /// Defaults: schemas from `schema/`, runtime at `::openagents_rt` (the `openagents-rt` crate).
    pub fn new() -> Self {
        Config::default()
    }

    /// The folder holding the schema files.
    pub fn schema_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.schema_dir = dir.as_ref().to_path_buf();
        self
    }

    /// The Rust path of the runtime support module the generated code calls.
    pub fn runtime(mut self, path: impl Into<String>) -> Self {
        self.runtime = path.into();
        self
    }

    /// The Python module the generated Python imports as its runtime (default
    /// `openagents._rt`, the installed package's).
    pub fn python_runtime(mut self, module: impl Into<String>) -> Self {
        self.python_runtime = module.into();
        self
    }

    /// The module the generated TypeScript validators import their runtime from (default
    /// `@openagents/client/rt`, the installed client package's runtime).
    pub fn typescript_runtime(mut self, module: impl Into<String>) -> Self {
        self.typescript.runtime = module.into();
        self
    }

    /// The module the generated TypeScript error classes import their base classes
    /// (`OpenAgentsError`, `UnknownCodeError`) from (default `@openagents/client/error`).
    pub fn typescript_error_base(mut self, module: impl Into<String>) -> Self {
        self.typescript.error_base = module.into();
        self
    }

    /// A method file declaring the methods of a schema that does not mark them itself (see
    /// [`methods`]): its sides are generated like those of `x-method`/`x-side` marks.
    pub fn methods_file(mut self, path: impl AsRef<Path>) -> Self {
        self.methods = Some(path.as_ref().to_path_buf());
        self
    }

    /// Whether the generated types also derive `schemars::JsonSchema`, behind the generated
    /// crate's `schemars` feature, with attributes that make the derived schema accept exactly
    /// what the source schema accepts (see [`schemars_attrs`]). Off by default.
    pub fn schemars(mut self, on: bool) -> Self {
        self.schemars = on;
        self
    }

    /// Whether the generated Rust also holds a `service` module: for the method union and for
    /// each side's methods, a service trait (one async method per method: typed params in, typed
    /// result or `RpcError` out, the call's `Context` given), its exhaustive dispatch as an
    /// `openagents_rpc::Handler`, and a typed client over an `openagents_rpc::Transport`
    /// (`openagents-codegen rust --service`). The generated crate then depends on
    /// `openagents-rpc` (and `serde`, `serde_json`). Off by default: without it the generated
    /// code names nothing of `openagents-rpc`.
    pub fn service(mut self, on: bool) -> Self {
        self.service = on.then(|| self.service.take().unwrap_or_else(|| DEFAULT_RPC_CRATE.into()));
        self
    }

    /// The path the generated `service` module names the `openagents-rpc` crate by (default
    /// `::openagents_rpc`); turns the module on.
    pub fn rpc_crate(mut self, path: impl Into<String>) -> Self {
        self.service = Some(path.into());
        self
    }

    /// Loads and lowers the schema: a folder of schema files, a bundle file (what
    /// `openagents schema --bundle` prints), a `schema/history/<version>` folder holding one, or
    /// one schema file (a protocol's published `schema.json`, named by its own file name). What
    /// `openagents-codegen check` runs.
    ///
    /// # Errors
    ///
    /// Every refusal at once ([`Refusals`], from [`lower::lower_all`]), or the one reason the
    /// files cannot be read.
    pub fn load(&self) -> Result<(Documents, TypeSpace), Refusals> {
        let docs = load::load_path(&self.schema_dir)?;
        let mut space = lower::lower_all(&docs)?;
        if let Some(path) = &self.methods {
            let declared = methods::sides(path, &docs, &space).map_err(Refusals::from)?;
            if let Some(twice) = declared.iter().find(|d| space.sides.iter().any(|s| s.name == d.name)) {
                let e = SchemaError::new(path.display().to_string(), format!("/sides/{}", twice.name), "sides", format!("the schema marks the {} side itself (`x-side`)", twice.name));
                return Err(Refusals::from(e));
            }
            space.sides.extend(declared);
            space.sides.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Ok((docs, space))
    }

    /// [`Config::load`] for the generators, which stop at the first refusal.
    fn load_first(&self) -> Result<(Documents, TypeSpace), SchemaError> {
        self.load().map_err(Refusals::into_first)
    }

    /// The generated Rust module for the schema folder.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn generate_rust(&self) -> Result<String, SchemaError> {
        let (docs, space) = self.load_first()?;
        self.rust_for(&docs, &space)
    }

    /// The generated Rust module for already-loaded documents.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn rust_for(&self, docs: &Documents, space: &TypeSpace) -> Result<String, SchemaError> {
        rust::emit(space, docs, &rust::RustOptions { runtime: self.runtime.clone(), schemars: self.schemars, service: self.service.clone() })
    }

    /// The generated TypeScript modules for the schema folder, as `(file name, contents)` pairs;
    /// `clients/typescript/src/generated/` holds them, checked in.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn generate_typescript(&self) -> Result<Vec<(String, String)>, SchemaError> {
        let (docs, space) = self.load_first()?;
        let opts = typescript::TypeScriptOptions { schema_digest: Some(digest::digest(&docs.bundle())), ..self.typescript.clone() };
        Ok(typescript::emit(&space, &opts))
    }

    /// The schema digest: the lowercase hex SHA-256 of the bundle's canonical form (see
    /// [`digest`]).
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn digest(&self) -> Result<String, SchemaError> {
        let (docs, _) = self.load_first()?;
        Ok(digest::digest(&docs.bundle()))
    }

    /// The OpenRPC 1.3 document for the schema folder (see [`openrpc`]).
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn generate_openrpc(&self) -> Result<serde_json::Value, SchemaError> {
        let (docs, space) = self.load_first()?;
        Ok(openrpc::document(&space, &digest::digest(&docs.bundle())))
    }

    /// The generated Python modules for the schema folder, as `(file name, contents)` pairs;
    /// `clients/python/src/openagents/_generated/` holds them, checked in.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn generate_python(&self) -> Result<Vec<(String, String)>, SchemaError> {
        let (docs, space) = self.load_first()?;
        python::emit_with(&space, Some(&digest::digest(&docs.bundle())), &self.python_runtime)
    }

    /// Generates Rust for the schema folder into `out_file`, the way a build script uses it.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`], or a file that cannot be written.
    pub fn write_rust(&self, out_file: impl AsRef<Path>) -> Result<(), SchemaError> {
        let code = self.generate_rust()?;
        let out = out_file.as_ref();
        std::fs::write(out, code).map_err(|e| SchemaError::new(out.display().to_string(), "", "", format!("cannot write: {e}")))
    }
}

/// Generates Rust from the documents given as `(file name, JSON text)` pairs; used for fixture
/// schemas and the JSON Schema Test Suite.
///
/// # Errors
///
/// The first [`SchemaError`].
pub fn rust_from_texts<'a>(texts: impl IntoIterator<Item = (&'a str, &'a str)>, runtime: &str) -> Result<String, SchemaError> {
    let docs = Documents::from_texts(texts)?;
    let space = lower::lower(&docs)?;
    rust::emit(&space, &docs, &rust::RustOptions { runtime: runtime.into(), schemars: false, service: None })
}
