//! The generator's error type: every refusal names the file, the JSON pointer and the keyword.

use std::fmt;

/// Why a schema could not be loaded or lowered.
///
/// Displayed as `FILE#POINTER: keyword `K`: MESSAGE`, so a person can jump straight to the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SchemaError {
    /// The schema file (its name relative to the schema folder).
    pub file: String,
    /// The JSON pointer (RFC 6901) of the offending schema inside the file.
    pub pointer: String,
    /// The keyword at fault; empty when the problem is the file itself.
    pub keyword: String,
    /// What is wrong and what to do instead.
    pub message: String,
}

impl SchemaError {
    /// A new error at `file#pointer` about `keyword`.
    pub fn new(
        file: impl Into<String>,
        pointer: impl Into<String>,
        keyword: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        SchemaError {
            file: file.into(),
            pointer: pointer.into(),
            keyword: keyword.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}: ", self.file, self.pointer)?;
        if !self.keyword.is_empty() {
            write!(f, "keyword `{}`: ", self.keyword)?;
        }
        f.write_str(&self.message)
    }
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/` (RFC 6901).
pub fn push_pointer(pointer: &str, token: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + token.len() + 1);
    out.push_str(pointer);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}
