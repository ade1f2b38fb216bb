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

/// How many refusals [`Refusals`] prints in full before it says how many more there are: enough
/// to see the shape of a schema's problems at once, few enough to read in one terminal screen
/// or two (a published schema can have hundreds: ACP v1 has over 300).
pub const MAX_SHOWN_REFUSALS: usize = 50;

/// Every refusal found in a schema, in the order found; never empty.
///
/// Displayed as one refusal alone when there is one (exactly as [`SchemaError`]), otherwise as
/// a count line, the first [`MAX_SHOWN_REFUSALS`] refusals one a line, and `and N more` when
/// there are more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusals {
    first: SchemaError,
    rest: Vec<SchemaError>,
}

impl Refusals {
    /// The refusals in `errors`, or `None` when there are none.
    pub fn from_vec(errors: Vec<SchemaError>) -> Option<Refusals> {
        let mut errors = errors.into_iter();
        let first = errors.next()?;
        Some(Refusals { first, rest: errors.collect() })
    }

    /// The first refusal found.
    pub fn first(&self) -> &SchemaError {
        &self.first
    }

    /// The first refusal found, for a caller that reports one.
    pub fn into_first(self) -> SchemaError {
        self.first
    }

    /// Every refusal, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &SchemaError> {
        std::iter::once(&self.first).chain(&self.rest)
    }

    /// How many refusals there are (at least one).
    pub fn len(&self) -> usize {
        1 + self.rest.len()
    }

    /// Always `false`: there is at least one refusal.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// How many refusals name each keyword (`""` for a refusal about the file itself).
    pub fn count_by_keyword(&self) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for e in self.iter() {
            *counts.entry(e.keyword.clone()).or_insert(0) += 1;
        }
        counts
    }
}

impl From<SchemaError> for Refusals {
    fn from(first: SchemaError) -> Self {
        Refusals { first, rest: Vec::new() }
    }
}

impl fmt::Display for Refusals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rest.is_empty() {
            return self.first.fmt(f);
        }
        write!(f, "{} refusals:", self.len())?;
        for e in self.iter().take(MAX_SHOWN_REFUSALS) {
            write!(f, "\n{e}")?;
        }
        if self.len() > MAX_SHOWN_REFUSALS {
            write!(f, "\nand {} more", self.len() - MAX_SHOWN_REFUSALS)?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusals {}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(i: usize) -> SchemaError {
        SchemaError::new("s.json", format!("/$defs/T{i}"), "anyOf", "outside the subset")
    }

    fn shown(n: usize) -> String {
        Refusals::from_vec((0..n).map(refusal).collect()).map(|r| r.to_string()).unwrap_or_default()
    }

    #[test]
    fn one_refusal_reads_as_the_error_itself() {
        assert_eq!(shown(1), refusal(0).to_string());
        assert_eq!(Refusals::from_vec(Vec::new()), None);
    }

    #[test]
    fn refusals_are_counted_then_listed_one_a_line() {
        let expected = format!("3 refusals:\n{}\n{}\n{}", refusal(0), refusal(1), refusal(2));
        assert_eq!(shown(3), expected);
    }

    #[test]
    fn past_the_limit_the_rest_are_counted() {
        let at_limit = shown(MAX_SHOWN_REFUSALS);
        assert_eq!(at_limit.lines().count(), MAX_SHOWN_REFUSALS + 1, "{at_limit}");
        assert!(!at_limit.contains("more"), "{at_limit}");
        let past = shown(MAX_SHOWN_REFUSALS + 7);
        let lines: Vec<&str> = past.lines().collect();
        assert_eq!(lines[0], format!("{} refusals:", MAX_SHOWN_REFUSALS + 7));
        assert_eq!(lines[MAX_SHOWN_REFUSALS], refusal(MAX_SHOWN_REFUSALS - 1).to_string());
        assert_eq!(lines[MAX_SHOWN_REFUSALS + 1], "and 7 more");
        assert_eq!(lines.len(), MAX_SHOWN_REFUSALS + 2);
    }
}
