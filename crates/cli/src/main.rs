//! `openagents`: validate documents against the protocol's schemas and print the bundled schema.

use std::io::Read;
use std::process::ExitCode;

use openagents_protocol::{SCHEMA_BUNDLE, SERVER_MAX_LINE_BYTES, TYPES, rt::DocumentError, validate_document};

const USAGE: &str = "openagents — a typed RPC runtime for driving AI agents out of process

usage:
  openagents validate <Type> [FILE|-]   check a JSON document against the schema of <Type>
                                        exit 0 valid, 1 invalid (one `<pointer>: <message>`
                                        line per violation on stderr), 2 unreadable input,
                                        not JSON, or an unknown type
  openagents schema                     print the bundled schema (every root type)
  openagents types                      list the types `validate` knows
  openagents help                       this text";

/// The most input `validate` reads: the largest line a server accepts.
const MAX_DOCUMENT_BYTES: usize = SERVER_MAX_LINE_BYTES;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("validate") => validate(&args[1..]),
        Some("schema") => {
            println!("{SCHEMA_BUNDLE}");
            ExitCode::SUCCESS
        }
        Some("types") => {
            for t in TYPES {
                println!("{}{}", t.name, if t.root { "  (root)" } else { "" });
            }
            ExitCode::SUCCESS
        }
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn known_types() -> String {
    TYPES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
}

fn read_input(source: &str) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let limit = MAX_DOCUMENT_BYTES as u64 + 1;
    let read = if source == "-" {
        std::io::stdin().lock().take(limit).read_to_end(&mut buf)
    } else {
        std::fs::File::open(source).and_then(|f| f.take(limit).read_to_end(&mut buf))
    };
    read.map_err(|e| format!("cannot read {source}: {e}"))?;
    if buf.len() > MAX_DOCUMENT_BYTES {
        return Err(format!("{source} is larger than {MAX_DOCUMENT_BYTES} bytes, the most a document may be"));
    }
    Ok(buf)
}

fn validate(args: &[String]) -> ExitCode {
    let Some(type_name) = args.first() else {
        eprintln!("openagents validate: name a type; known types: {}", known_types());
        return ExitCode::from(2);
    };
    if args.len() > 2 {
        eprintln!("openagents validate: too many arguments\n\n{USAGE}");
        return ExitCode::from(2);
    }
    let source = args.get(1).map_or("-", String::as_str);
    if !TYPES.iter().any(|t| t.name == type_name) {
        eprintln!("openagents validate: unknown type `{type_name}`; known types: {}", known_types());
        return ExitCode::from(2);
    }
    let input = match read_input(source) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("openagents validate: {e}");
            return ExitCode::from(2);
        }
    };
    match validate_document(type_name, &input) {
        Some(Ok(())) => ExitCode::SUCCESS,
        Some(Err(DocumentError::Invalid(violations))) => {
            for v in &violations {
                eprintln!("{v}");
            }
            ExitCode::from(1)
        }
        Some(Err(DocumentError::NotJson(msg))) => {
            eprintln!("openagents validate: {source} is not a JSON document: {msg}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("openagents validate: unknown type `{type_name}`; known types: {}", known_types());
            ExitCode::from(2)
        }
    }
}
