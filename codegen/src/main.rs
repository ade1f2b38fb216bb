//! The `openagents-codegen` command line: generate, bundle and check the schema.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod versions;

/// Generates exact types, validators and typed methods in Rust, Python and TypeScript, an OpenRPC
/// document and a bundle from a JSON Schema (a folder of schema files, or one file with $defs),
/// and checks a schema against its released versions.
///
/// Exit codes: 0 done; 1 the schema is refused, a file cannot be written, a change breaks
/// (`compat`) or the gate fails (`gate`); 2 bad arguments, or input the version commands
/// (`digest`, `openrpc`, `compat`, `gate`, `freeze`) cannot use.
#[derive(Parser)]
#[command(name = "openagents-codegen", version, disable_help_subcommand = true, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the schema is read from.
#[derive(clap::Args)]
struct Schema {
    /// The schema: a folder of schema files, a bundle.json, a schema/history/<version> folder,
    /// or one schema file.
    #[arg(long = "schema", value_name = "PATH", default_value = "schema")]
    path: PathBuf,
    /// A method file declaring the methods of a schema that does not mark them with
    /// `x-method`/`x-side` (sides → request and notification unions, results by method).
    #[arg(long = "methods", value_name = "FILE")]
    methods: Option<PathBuf>,
    /// A keyword of another tool's that no validator checks (a vendor's own `abcIsValidColor`),
    /// read as an annotation: ignored wherever it stands, as JSON Schema ignores a keyword it
    /// does not know. Repeat it, or separate names with commas. Without it such a keyword is
    /// refused, so a misspelled rule is never ignored; one of JSON Schema's keywords cannot be
    /// declared.
    #[arg(long = "annotation", value_name = "KEYWORD", value_delimiter = ',')]
    annotations: Vec<String>,
}

/// Where the schema is read from, for the commands that read only a folder.
#[derive(clap::Args)]
struct SchemaDir {
    /// The schema folder.
    #[arg(long = "schema", value_name = "DIR", default_value = "schema")]
    path: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Print the generated Rust: types, decoders, validators, `Method`, constants and the bundle.
    Rust {
        #[command(flatten)]
        schema: Schema,
        /// The path of the runtime module the generated code uses.
        #[arg(long, value_name = "PATH", default_value = "::openagents_rt")]
        runtime: String,
        /// Also generate the `service` module: a service trait, its dispatch as an
        /// `openagents_rpc::Handler` and a typed client, for the method union and each side.
        #[arg(long)]
        service: bool,
        /// The path of the `openagents-rpc` crate the service module names (implies --service).
        #[arg(long, value_name = "PATH")]
        rpc_crate: Option<String>,
        /// Generate free-form objects (an object schema that declares no properties) as
        /// `serde_json::Map`, built while decoding, instead of `openagents_rt::RawObject`, their
        /// checked JSON text (the default).
        #[arg(long, conflicts_with = "objects_as_text")]
        objects_as_maps: bool,
        /// Generate free-form objects as `openagents_rt::RawObject` (the default).
        #[arg(long)]
        objects_as_text: bool,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Print the bundled schema: every schema file in one document.
    Bundle {
        #[command(flatten)]
        schema: Schema,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Load and lower the schema without writing anything: print how many types, roots and
    /// constants it has, or every refusal at once (on stderr, exit 1); a construct one language
    /// cannot generate (a pattern Python's `re` has no exact form for) is a note on stderr.
    Check {
        #[command(flatten)]
        schema: Schema,
    },
    /// Print the schema digest: the lowercase hex SHA-256 of the bundle's canonical form.
    Digest {
        #[command(flatten)]
        schema: Schema,
    },
    /// Print the OpenRPC 1.3 document.
    Openrpc {
        #[command(flatten)]
        schema: Schema,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Print what changed between two schemas, each change with whom it breaks; exit 1 when a
    /// change breaks.
    ///
    /// Without OLD and NEW: the newest version in <SCHEMA>/history/ against the schema.
    Compat {
        #[command(flatten)]
        schema: SchemaDir,
        /// The old schema: a schema folder, a bundle.json, or a schema/history/<version> folder.
        #[arg(requires = "new")]
        old: Option<PathBuf>,
        /// The new schema, as OLD.
        new: Option<PathBuf>,
    },
    /// Check the schema against every version in <SCHEMA>/history/ (and each frozen bundle against
    /// its digest in CHANGELOG.md); exit 1 when the gate fails.
    Gate {
        #[command(flatten)]
        schema: SchemaDir,
    },
    /// Freeze the schema as <SCHEMA>/history/VERSION/bundle.json and print the CHANGELOG.md entry
    /// to add.
    Freeze {
        /// The protocol version, MAJOR.MINOR.PATCH: the schema's `PROTOCOL_VERSION`.
        #[arg(value_name = "VERSION")]
        protocol_version: String,
        #[command(flatten)]
        schema: SchemaDir,
        /// Overwrite a version already frozen (only for a version never released).
        #[arg(long)]
        force: bool,
    },
    /// Write the generated TypeScript modules into a folder, removing the generated modules the
    /// schema no longer produces.
    Typescript {
        #[command(flatten)]
        schema: Schema,
        /// The folder to write the modules into (created if missing).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// The module the validators import the runtime from, as an import specifier (a path
        /// relative to the generated folder, or a package subpath).
        #[arg(long, value_name = "MODULE", default_value = openagents_codegen::typescript::DEFAULT_RUNTIME)]
        runtime: String,
        /// The module the generated error classes import their base classes (`OpenAgentsError`,
        /// `UnknownCodeError`) from. Without it, errors.ts declares its own, named from the
        /// schema (the error carrier's name with `Error` replaced by `Exception`).
        #[arg(long, value_name = "MODULE")]
        error_base: Option<String>,
    },
    /// Write the generated Python modules into a folder, removing the generated modules the schema
    /// no longer produces.
    Python {
        #[command(flatten)]
        schema: Schema,
        /// The folder to write the modules into (created if missing).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// The Python module the generated code imports as its runtime (dotted).
        #[arg(long, value_name = "MODULE", default_value = "openagents._rt")]
        runtime: String,
        /// The runtime's exception class the generated error base class derives from.
        #[arg(long, value_name = "CLASS", default_value = openagents_codegen::python::DEFAULT_ERROR_ROOT)]
        error_root: String,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("openagents-codegen: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn config(schema: &Schema) -> openagents_codegen::Config {
    let config = openagents_codegen::Config::new().schema_dir(&schema.path).annotations(schema.annotations.iter().cloned());
    match &schema.methods {
        Some(m) => config.methods_file(m),
        None => config,
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    let (text, out) = match command {
        Command::Digest { schema } => return versions::digest(&config(&schema)),
        Command::Openrpc { schema, out } => return versions::openrpc(&config(&schema), out.as_deref()),
        Command::Compat { schema, old, new } => return versions::compat(&schema.path, old.zip(new)),
        Command::Gate { schema } => return versions::gate(&schema.path),
        Command::Freeze { protocol_version, schema, force } => return versions::freeze(&schema.path, &protocol_version, force),
        Command::Python { schema, out_dir, runtime, error_root } => return Ok(config(&schema).python_runtime(runtime).python_error_root(error_root).write_python(&out_dir)?),
        Command::Typescript { schema, out_dir, runtime, error_base } => {
            let config = config(&schema).typescript_runtime(runtime);
            let config = match error_base {
                Some(module) => config.typescript_error_base(module),
                None => config,
            };
            return Ok(config.write_typescript(&out_dir)?);
        }
        Command::Rust { schema, runtime, service, rpc_crate, objects_as_maps, objects_as_text: _, out } => {
            let config = config(&schema).runtime(runtime).service(service).objects_as_text(!objects_as_maps);
            let config = match rpc_crate {
                Some(path) => config.rpc_crate(path),
                None => config,
            };
            (config.generate_rust()?, out)
        }
        Command::Bundle { schema, out } => {
            let (docs, _) = config(&schema).load()?;
            (serde_json::to_string_pretty(&docs.bundle())? + "\n", out)
        }
        Command::Check { schema } => {
            let config = config(&schema);
            let (_, space) = config.load()?;
            // What one language's emitter cannot generate (a pattern Python's `re` has no exact
            // form for): the schema is fine, but that command would refuse it.
            let mut refusing = Vec::new();
            for (language, result) in [("rust", config.generate_rust().err()), ("typescript", config.generate_typescript().err()), ("python", config.generate_python().err())] {
                if let Some(e) = result {
                    eprintln!("note: `openagents-codegen {language}` refuses this schema: {e}");
                    refusing.push(format!("`{language}`"));
                }
            }
            let only = if refusing.is_empty() { String::new() } else { format!(", but {} cannot generate it (see the note)", refusing.join(" and ")) };
            (format!("{}, {}, {}: ok{only}\n", count(space.types.len(), "type", "types"), count(space.roots.len(), "root", "roots"), count(space.constants.len(), "constant", "constants")), None)
        }
    };
    match out {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// `n` and the noun, singular for one.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
