//! Exact types, validators and typed method dispatch in Rust, Python and TypeScript from JSON
//! Schema (2020-12): a folder of schema files, or one file with `$defs` (a protocol's published
//! `schema.json`). The schema is lowered into one deterministic model ([`TypeSpace`]) that every
//! emitter reads, so the three languages accept and refuse the same documents.
//!
//! The API for build scripts and tools is [`Config`]: a builder of options, then `generate_*`
//! (the text) or `write_*` (into files) for each output.
//!
//! ```no_run
//! // build.rs of a crate that depends on `openagents-rt`
//! let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("kv.rs");
//! println!("cargo:rerun-if-changed=schema/kv.schema.json");
//! openagents_codegen::Config::new().schema_dir("schema/kv.schema.json").write_rust(&out)?;
//! # Ok::<(), openagents_codegen::SchemaError>(())
//! ```
//!
//! | output | text | into files | option |
//! |---|---|---|---|
//! | Rust (types, `Wire` decoders, validators, `validate_document`, method enums) | [`Config::generate_rust`] | [`Config::write_rust`] | [`Config::runtime`] (default `::openagents_rt`) |
//! | Python (pydantic models, validators, method tables) | [`Config::generate_python`] | [`Config::write_python`] | [`Config::python_runtime`] |
//! | TypeScript (types, validators, method tables, error classes) | [`Config::generate_typescript`] | [`Config::write_typescript`] | [`Config::typescript_runtime`], [`Config::typescript_error_base`] |
//! | OpenRPC 1.3 | [`Config::generate_openrpc`] | [`Config::write_openrpc`] | — |
//! | the schema's digest | [`Config::digest`] | — | — |
//!
//! Methods come from the schema's own marks (a request union, `x-result`; ACP's
//! `x-method`/`x-side`) or from a method file ([`Config::methods_file`]). Whether a new version
//! of a schema breaks old clients is [`compat`]'s verdict; [`history`] keeps released versions.
//!
//! The supported subset of JSON Schema 2020-12 is `SUPPORTED_KEYWORDS` (CONFORMANCE.md);
//! anything else is refused with a [`SchemaError`] naming the file, the JSON pointer and the
//! keyword; [`Config::load`] (what `openagents-codegen check` runs) finds every refusal at once
//! ([`Refusals`]), the generators stop at the first.
//!
//! Modules hidden from this documentation (the loader, the lowering, the emitters, naming,
//! patterns) are the generator's internals: public for its own tests and tools, not part of its
//! API, and they change without notice.

pub mod compat;
#[doc(hidden)]
pub mod dialect;
#[doc(hidden)]
pub mod digest;
pub mod error;
pub mod history;
#[doc(hidden)]
pub mod load;
#[doc(hidden)]
pub mod lower;
pub mod methods;
pub mod model;
#[doc(hidden)]
pub mod naming;
#[doc(hidden)]
pub mod openrpc;
#[doc(hidden)]
pub mod pattern;
#[doc(hidden)]
pub mod python;
#[doc(hidden)]
pub mod rust;
#[doc(hidden)]
pub mod schemars_attrs;
#[doc(hidden)]
pub mod typescript;
#[doc(hidden)]
pub mod uri;

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
    python_error_root: String,
    typescript: typescript::TypeScriptOptions,
    methods: Option<PathBuf>,
    service: Option<String>,
    objects_as_text: bool,
    annotations: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            schema_dir: PathBuf::from("schema"),
            runtime: "::openagents_rt".into(),
            schemars: false,
            python_runtime: python::DEFAULT_RUNTIME.into(),
            python_error_root: python::DEFAULT_ERROR_ROOT.into(),
            typescript: typescript::TypeScriptOptions::default(),
            methods: None,
            service: None,
            objects_as_text: true,
            annotations: Vec::new(),
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

    /// The runtime's exception class the generated Python error base class derives from
    /// (default `TypedError`, the root of every typed error generated code raises). The base
    /// class itself is named from the schema: the error carrier's name with `Error` replaced by
    /// `Exception`.
    pub fn python_error_root(mut self, class: impl Into<String>) -> Self {
        self.python_error_root = class.into();
        self
    }

    /// The module the generated TypeScript validators import their runtime from (default
    /// `@openagents/client/rt`, the installed client package's runtime).
    pub fn typescript_runtime(mut self, module: impl Into<String>) -> Self {
        self.typescript.runtime = module.into();
        self
    }

    /// The module the generated TypeScript error classes import their base classes
    /// (`OpenAgentsError`, `UnknownCodeError`) from. Without it (the default), `errors.ts`
    /// declares its own base classes, named from the schema (the error carrier's name with
    /// `Error` replaced by `Exception`, and `Unknown…` for a code this version does not know).
    pub fn typescript_error_base(mut self, module: impl Into<String>) -> Self {
        self.typescript.error_base = Some(module.into());
        self
    }

    /// A method file declaring the methods of a schema that does not mark them itself (see
    /// [`methods`]): its sides are generated like those of `x-method`/`x-side` marks.
    pub fn methods_file(mut self, path: impl AsRef<Path>) -> Self {
        self.methods = Some(path.as_ref().to_path_buf());
        self
    }

    /// Keywords of another tool's that no JSON Schema validator checks (a vendor's own
    /// `abcIsValidColor`, say), to be read as annotations: ignored wherever they stand in a
    /// schema, as JSON Schema ignores a keyword it does not know, and left out of the schema as
    /// read (its bundle and digest). Without this, a keyword outside the subset is refused, so a
    /// misspelled rule (`minLenght`) is never ignored. `openagents-codegen --annotation NAME`.
    /// A keyword the generator reads, or one of JSON Schema's own, cannot be declared: [`Config::load`]
    /// refuses it.
    pub fn annotations<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.annotations.extend(names.into_iter().map(Into::into));
        self
    }

    /// Whether the generated types also derive `schemars::JsonSchema`, behind the generated
    /// crate's `schemars` feature, with attributes that make the derived schema accept exactly
    /// what the source schema accepts (see the `schemars_attrs` module). Off by default.
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

    /// Whether a free-form object (an object schema that declares no properties, such as MCP's
    /// tool `arguments` or ACP's `_meta`) is generated as `openagents_rt::RawObject`, the
    /// object's checked JSON text (the default), or as a `serde_json::Map` (`false`;
    /// `openagents-codegen rust --objects-as-maps`). Decoding accepts and refuses the same
    /// documents either way, with the same violations; kept as text, the object is not built
    /// into a map, so a server that hands it on, or reads it into its own type with
    /// `RawObject::parse`, pays for one reading instead of two. With [`Config::schemars`], the
    /// generated crate's `schemars` feature must turn on `openagents-rt/schemars`.
    pub fn objects_as_text(mut self, on: bool) -> Self {
        self.objects_as_text = on;
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
    /// Every refusal at once ([`Refusals`], from `lower::lower_all`), or the one reason the
    /// files cannot be read.
    pub fn load(&self) -> Result<(Documents, TypeSpace), Refusals> {
        let mut docs = load::load_path(&self.schema_dir)?;
        load::drop_annotations(&mut docs, &self.annotations, &self.schema_dir.display().to_string())?;
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
        rust::emit(space, docs, &rust::RustOptions { runtime: self.runtime.clone(), schemars: self.schemars, service: self.service.clone(), objects_as_text: self.objects_as_text })
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
    /// the `digest` module).
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`].
    pub fn digest(&self) -> Result<String, SchemaError> {
        let (docs, _) = self.load_first()?;
        Ok(digest::digest(&docs.bundle()))
    }

    /// The OpenRPC 1.3 document for the schema folder (see the `openrpc` module).
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
        python::emit_with_error_root(&space, Some(&digest::digest(&docs.bundle())), &self.python_runtime, &self.python_error_root)
    }

    /// Generates Rust for the schema folder into `out_file`, the way a build script uses it.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`], or a file that cannot be written.
    pub fn write_rust(&self, out_file: impl AsRef<Path>) -> Result<(), SchemaError> {
        let code = self.generate_rust()?;
        write_file(out_file.as_ref(), &code)
    }

    /// Generates the Python modules into the folder `out_dir` (created if missing), removing
    /// the generated modules the schema no longer produces; files without the generated header
    /// (`python::HEADER`) are never touched.
    ///
    /// ```no_run
    /// openagents_codegen::Config::new()
    ///     .schema_dir("schema/kv.schema.json")
    ///     .python_runtime("openagents._rt")
    ///     .write_python("kv_client/_generated")?;
    /// # Ok::<(), openagents_codegen::SchemaError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`], or a file or folder that cannot be written or read.
    pub fn write_python(&self, out_dir: impl AsRef<Path>) -> Result<(), SchemaError> {
        write_modules(out_dir.as_ref(), &self.generate_python()?, python::HEADER)
    }

    /// Generates the TypeScript modules into the folder `out_dir` (created if missing), removing
    /// the generated modules the schema no longer produces; files without the generated header
    /// (`typescript::HEADER`) are never touched.
    ///
    /// ```no_run
    /// openagents_codegen::Config::new()
    ///     .schema_dir("schema/kv.schema.json")
    ///     .write_typescript("src/generated")?; // imports @openagents/client/rt
    /// # Ok::<(), openagents_codegen::SchemaError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`], or a file or folder that cannot be written or read.
    pub fn write_typescript(&self, out_dir: impl AsRef<Path>) -> Result<(), SchemaError> {
        write_modules(out_dir.as_ref(), &self.generate_typescript()?, typescript::HEADER)
    }

    /// Writes the OpenRPC 1.3 document ([`Config::generate_openrpc`]) to `out_file`, pretty-printed.
    ///
    /// # Errors
    ///
    /// The first [`SchemaError`], or a file that cannot be written.
    pub fn write_openrpc(&self, out_file: impl AsRef<Path>) -> Result<(), SchemaError> {
        let doc = self.generate_openrpc()?;
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        write_file(out_file.as_ref(), &text)
    }
}

/// A failure to write or read `path`, as a [`SchemaError`] naming it.
fn io_error(path: &Path, what: &str, e: &std::io::Error) -> SchemaError {
    SchemaError::new(path.display().to_string(), "", "", format!("{what}: {e}"))
}

fn write_file(path: &Path, text: &str) -> Result<(), SchemaError> {
    std::fs::write(path, text).map_err(|e| io_error(path, "cannot write", &e))
}

/// Writes `files` into `dir` (created if missing) and removes the files there that start with
/// `header` (generated earlier) but are not among them.
fn write_modules(dir: &Path, files: &[(String, String)], header: &str) -> Result<(), SchemaError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "cannot create the folder", &e))?;
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, "cannot read the folder", &e))? {
        let path = entry.map_err(|e| io_error(dir, "cannot read the folder", &e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let generated = std::fs::read_to_string(&path).is_ok_and(|t| t.lines().next() == Some(header));
        if generated && !files.iter().any(|(n, _)| *n == name) {
            std::fs::remove_file(&path).map_err(|e| io_error(&path, "cannot remove", &e))?;
        }
    }
    for (name, text) in files {
        write_file(&dir.join(name), text)?;
    }
    Ok(())
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
    rust::emit(&space, &docs, &rust::RustOptions { runtime: runtime.into(), schemars: false, service: None, objects_as_text: true })
}
