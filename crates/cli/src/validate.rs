//! `openagents validate`.

use std::io::Read;
use std::process::ExitCode;

use openagents_protocol::{SERVER_MAX_LINE_BYTES, TYPES, rt::DocumentError, validate_document};

/// The most input `validate` reads: the largest line a server accepts.
const MAX_DOCUMENT_BYTES: usize = SERVER_MAX_LINE_BYTES;

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

/// Validates the document at `source` (`-` for stdin) as `type_name`.
pub fn validate(type_name: &str, source: &str) -> ExitCode {
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
