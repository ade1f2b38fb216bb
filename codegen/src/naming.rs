//! Names: how a schema's words become identifiers, and the one rule every emitter follows when
//! two of them would be the same.
//!
//! - [`pascal`] cleans any text into a PascalCase type name (ASCII letters and digits only; a
//!   fallback for empty text; a leading digit gets `T`).
//! - [`unique`] is the one clash rule: the name itself when free, otherwise the name with `2`,
//!   `3`, … appended, the first that is free ([`unique_snake`] writes `_2`, `_3`, … for
//!   snake_case identifiers).
//! - [`escape`] is the one rule for a language's reserved words: `_` is appended until the name
//!   is neither reserved nor taken.
//! - [`RESERVED_TYPE_NAMES`] holds the names no generated type of any language may take; the
//!   model never gives a union branch or an error class one of them, so each gets the same name
//!   in every language.

use std::collections::BTreeSet;

use heck::ToUpperCamelCase;

/// Names a generated type must not take in any target language: the globals and generated
/// helpers the TypeScript modules refer to in the same scope, the Python names that are
/// keywords, and `Self` in Rust.
pub const RESERVED_TYPE_NAMES: &[&str] = &[
    // TypeScript globals and the generated modules' own names.
    "AbortSignal", "Array", "Boolean", "Error", "Function", "Map", "Number", "Object", "Promise", "ReadonlyArray", "Record", "RegExp", "Set",
    "String", "Symbol", "TypeMap", "TypeName", "Methods", "MethodName", "MethodParams", "MethodResult", "UnknownValue", "CallOptions",
    "TypeInfo", "MethodCheck", "GeneratedMethods",
    // Python keywords that are PascalCase, and the names the generated Python modules import.
    "False", "None", "True", "Annotated", "Any", "ClassVar", "Field", "Final", "JsonValue", "Literal", "Strict", "StringConstraints",
    "TypeAlias", "TypeVar", "Union",
    // Rust: `Self`, the prelude names the generated Rust uses unqualified, and `Method`, the
    // enum of a method union's calls beside the types.
    "Self", "Option", "Some", "Result", "Ok", "Err", "Vec", "Box", "Method",
];

/// The hand-written base classes the generated TypeScript error classes extend
/// (`OpenAgentsError`, `UnknownCodeError`): no error class takes their names.
pub const ERROR_BASE_NAMES: &[&str] = &["OpenAgentsError", "UnknownCodeError"];

/// `s` as a PascalCase identifier: every character other than an ASCII letter or digit splits
/// words; `fallback` when nothing is left; `T` before a leading digit.
pub fn pascal(s: &str, fallback: &str) -> String {
    let cleaned: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' }).collect();
    let mut name = cleaned.to_upper_camel_case();
    if name.is_empty() {
        name = fallback.to_owned();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, 'T');
    }
    name
}

/// The one clash rule: `base` when `taken` says it is free, else `base2`, `base3`, …
pub fn unique(base: &str, taken: impl Fn(&str) -> bool) -> String {
    numbered(base, "", taken)
}

/// The clash rule for snake_case identifiers (fields, parameters): `base`, else `base_2`,
/// `base_3`, …
pub fn unique_snake(base: &str, taken: impl Fn(&str) -> bool) -> String {
    numbered(base, "_", taken)
}

fn numbered(base: &str, sep: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_owned();
    }
    (2u64..).map(|i| format!("{base}{sep}{i}")).find(|n| !taken(n)).unwrap_or_else(|| base.to_owned())
}

/// `name` with `_` appended until it is neither in `reserved` nor `taken`.
pub fn escape(name: &str, reserved: &[&str], taken: impl Fn(&str) -> bool) -> String {
    let mut id = name.to_owned();
    while reserved.contains(&id.as_str()) || taken(&id) {
        id.push('_');
    }
    id
}

/// Claims names one after another under [`unique`], remembering each.
#[derive(Debug, Clone, Default)]
pub struct Names {
    taken: BTreeSet<String>,
}

impl Names {
    /// A set where `reserved` (and nothing else) is taken.
    pub fn with_reserved<'a>(reserved: impl IntoIterator<Item = &'a str>) -> Names {
        Names { taken: reserved.into_iter().map(str::to_owned).collect() }
    }

    /// Whether `name` is taken.
    pub fn is_taken(&self, name: &str) -> bool {
        self.taken.contains(name)
    }

    /// Marks `name` as taken as it is (for names decided elsewhere).
    pub fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_owned());
    }

    /// `base`, or the first free name [`unique`] derives from it; taken from now on.
    pub fn claim(&mut self, base: &str) -> String {
        let name = unique(base, |n| self.taken.contains(n));
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pascal_cleans_any_text() {
        assert_eq!(pascal("session/prompt", "X"), "SessionPrompt");
        assert_eq!(pascal("parse_error", "X"), "ParseError");
        assert_eq!(pascal("--", "Empty"), "Empty");
        assert_eq!(pascal("2fa", "X"), "T2fa");
    }

    #[test]
    fn clashes_get_a_number() {
        let mut names = Names::with_reserved(["Error"]);
        assert_eq!(names.claim("Error"), "Error2");
        assert_eq!(names.claim("Turn"), "Turn");
        assert_eq!(names.claim("Turn"), "Turn2");
        assert_eq!(names.claim("Turn"), "Turn3");
        assert_eq!(unique("A", |n| n == "A" || n == "A2"), "A3");
        assert_eq!(unique_snake("id", |n| n == "id" || n == "id_2"), "id_3");
    }

    #[test]
    fn escape_appends_underscores() {
        assert_eq!(escape("None", RESERVED_TYPE_NAMES, |_| false), "None_");
        assert_eq!(escape("Map", RESERVED_TYPE_NAMES, |n| n == "Map_"), "Map__");
        assert_eq!(escape("Turn", RESERVED_TYPE_NAMES, |_| false), "Turn");
    }
}
