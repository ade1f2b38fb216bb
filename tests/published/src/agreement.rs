//! Comparing validators on a corpus: each validator's verdict on each document against the
//! verdict of record, and the list of known disagreements.
//!
//! The verdict of record is the `jsonschema` crate's on the parsed document
//! ([`crate::corpus::Doc::valid`]). Every validator must give it, with one exception: a document
//! that gives a member twice is refused by the generated exact decoders (`rust-typed`), while the
//! validators that read a parsed value see the last member, as the reference validators do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::Generated;
use crate::corpus::{Category, Corpus, Doc};

/// The generated Rust's typed path: `validate_document` on the text (exact decoding, then the
/// typed checks).
pub const RUST_TYPED: &str = "rust-typed";
/// The generated Rust's untyped path: `check_document` on the value `serde_json` parses.
pub const RUST_UNTYPED: &str = "rust-untyped";

/// What `validator` must answer for `doc`.
pub fn expected(validator: &str, doc: &Doc) -> bool {
    if doc.category == Category::DuplicateKey && validator == RUST_TYPED {
        return false;
    }
    doc.valid
}

/// A verdict as the corpus files and reports write it: `true`, `false`, or an error's text.
pub fn verdict_of(valid: Result<bool, String>) -> Value {
    match valid {
        Ok(b) => Value::Bool(b),
        Err(e) => Value::String(e),
    }
}

/// The two Rust paths' verdicts on a document of `$defs/{def}`, the generated type `type_name`:
/// the typed path is asked for the type by its `$defs` key, as a user of the schema names it
/// (`Result`, where the type is `Result2`).
pub fn rust_verdicts(g: &Generated, def: &str, type_name: &str, text: &str) -> [(&'static str, Value); 2] {
    let typed = match (g.validate_document)(def, text.as_bytes()) {
        None => Err(format!("no generated type named `{def}`")),
        Some(Ok(())) => Ok(true),
        Some(Err(_)) => Ok(false),
    };
    let untyped = match serde_json::from_str::<Value>(text) {
        Err(e) => Err(format!("serde_json does not parse it: {e}")),
        Ok(v) => match (g.check_document)(type_name, &v) {
            None => Err(format!("no generated type `{type_name}`")),
            Some(violations) => Ok(violations.is_empty()),
        },
    };
    [
        (RUST_TYPED, verdict_of(typed)),
        (RUST_UNTYPED, verdict_of(untyped)),
    ]
}

/// One document on which a validator does not give the expected verdict.
#[derive(Debug, Clone)]
pub struct Disagreement {
    /// The validator.
    pub validator: String,
    /// The protocol.
    pub protocol: String,
    /// The `$defs` type.
    pub def: String,
    /// How the document was made.
    pub origin: String,
    /// The document.
    pub text: String,
    /// The verdict of record.
    pub record: bool,
    /// What the validator was expected to answer.
    pub expected: bool,
    /// Every validator's verdict on the document.
    pub verdicts: BTreeMap<String, Value>,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on {} `{}` ({}): expected {}, verdict of record (jsonschema crate) {}; verdicts {}; document {}",
            self.validator,
            self.protocol,
            self.def,
            self.origin,
            self.expected,
            self.record,
            serde_json::to_string(&self.verdicts).unwrap_or_default(),
            self.text
        )
    }
}

/// Every validator's disagreement on one document, given all their verdicts.
pub fn disagreements(
    protocol: &str,
    doc: &Doc,
    verdicts: &BTreeMap<String, Value>,
) -> Vec<Disagreement> {
    verdicts
        .iter()
        .filter(|(validator, got)| got.as_bool() != Some(expected(validator, doc)))
        .map(|(validator, _)| Disagreement {
            validator: validator.clone(),
            protocol: protocol.to_owned(),
            def: doc.def.clone(),
            origin: doc.origin.clone(),
            text: doc.text.clone(),
            record: doc.valid,
            expected: expected(validator, doc),
            verdicts: verdicts.clone(),
        })
        .collect()
}

/// The known-disagreements file.
pub fn known_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("known-disagreements.json")
}

/// A listed disagreement: the validators that disagree, protocol, `$defs` type, the document's
/// origin, and why.
#[derive(Debug, Clone)]
pub struct Known {
    /// The validators that disagree on the document.
    pub validators: Vec<String>,
    /// The protocol.
    pub protocol: String,
    /// The `$defs` type.
    pub def: String,
    /// How the document was made.
    pub origin: String,
    /// Why the validators disagree.
    pub reason: String,
}

/// The known disagreements.
pub fn known() -> Vec<Known> {
    let path = known_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    list.iter()
        .map(|e| {
            let field = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| panic!("{}: an entry without `{k}`: {e}", path.display()))
            };
            let reason = field("reason");
            assert!(
                !reason.trim().is_empty(),
                "{}: an entry with an empty reason: {e}",
                path.display()
            );
            let validators: Vec<String> = e
                .get("validators")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                !validators.is_empty(),
                "{}: an entry without `validators`: {e}",
                path.display()
            );
            Known {
                validators,
                protocol: field("protocol"),
                def: field("def"),
                origin: field("origin"),
                reason,
            }
        })
        .collect()
}

impl Known {
    /// Whether this entry names the document of the disagreement.
    pub fn names(&self, d: &Disagreement) -> bool {
        self.protocol == d.protocol && self.def == d.def && self.origin == d.origin
    }
}

/// The outcome of a comparison: what is new, what is listed and still true, and the listed
/// (entry, validator) pairs, of the validators compared, that agree now.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Disagreements the list does not name.
    pub unexpected: Vec<Disagreement>,
    /// Disagreements the list names.
    pub listed: Vec<Disagreement>,
    /// Listed validators that agree now, with their entry.
    pub stale: Vec<(String, Known)>,
    /// Per protocol: documents on which every validator agrees.
    pub agreements: BTreeMap<String, usize>,
    /// Per protocol: documents on which some validator disagrees, listed or not.
    pub disagreeing: BTreeMap<String, usize>,
}

/// Sorts `found` (per protocol, every disagreement) against the list, for the validators in
/// `compared`.
pub fn judge(
    found: Vec<(String, Vec<Disagreement>)>,
    compared: &[&str],
    docs_per_protocol: &BTreeMap<String, usize>,
) -> Outcome {
    let known = known();
    let mut used: std::collections::BTreeSet<(usize, String)> = std::collections::BTreeSet::new();
    let mut out = Outcome::default();
    for (protocol, per_doc) in found {
        let mut docs = std::collections::BTreeSet::new();
        for d in per_doc {
            docs.insert((d.def.clone(), d.origin.clone(), d.text.clone()));
            match known
                .iter()
                .position(|k| k.names(&d) && k.validators.contains(&d.validator))
            {
                Some(i) => {
                    used.insert((i, d.validator.clone()));
                    out.listed.push(d);
                }
                None => out.unexpected.push(d),
            }
        }
        out.disagreeing.insert(protocol, docs.len());
    }
    for (protocol, n) in docs_per_protocol {
        out.agreements.insert(
            protocol.clone(),
            n - out.disagreeing.get(protocol).copied().unwrap_or(0),
        );
    }
    for (i, k) in known.iter().enumerate() {
        for v in &k.validators {
            if compared.contains(&v.as_str()) && !used.contains(&(i, v.clone())) {
                out.stale.push((v.clone(), k.clone()));
            }
        }
    }
    out
}

/// The corpus of one protocol as a JSON file for the other languages' runners: each document
/// with its `$defs` type, generated type name, category, origin, text and verdict of record.
pub fn corpus_json(corpus: &Corpus, g: &Generated) -> Value {
    let docs: Vec<Value> = corpus
        .docs
        .iter()
        .map(|d| {
            json!({
                "def": d.def,
                "type": g.type_of(&d.def),
                "category": d.category.name(),
                "origin": d.origin,
                "text": d.text,
                "valid": d.valid,
            })
        })
        .collect();
    json!({ "protocol": corpus.protocol.name, "file": corpus.protocol.file, "docs": docs })
}

/// The section of `CONFORMANCE.md` that records the counts, as a table: one row per protocol,
/// each column by its header (backquotes left out of both).
/// Empty when the page has no such section.
pub fn recorded_table() -> BTreeMap<String, BTreeMap<String, String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../CONFORMANCE.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let Some(section) = text
        .split("\n## Agreement with reference validators\n")
        .nth(1)
    else {
        return BTreeMap::new();
    };
    let section = section.split("\n## ").next().unwrap_or(section);
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace('`', ""))
            .collect()
    };
    let mut rows = section.lines().filter(|l| l.trim_start().starts_with('|'));
    let Some(header) = rows.next().map(cells) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for row in rows.skip(1) {
        let row = cells(row);
        let map: BTreeMap<String, String> = header
            .iter()
            .skip(1)
            .cloned()
            .zip(row.iter().skip(1).cloned())
            .collect();
        out.insert(row[0].clone(), map);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(category: Category, valid: bool) -> Doc {
        Doc {
            def: "T".into(),
            category,
            origin: "o".into(),
            text: "{}".into(),
            valid,
        }
    }

    #[test]
    fn a_verdict_other_than_the_record_is_a_disagreement() {
        let verdicts: BTreeMap<String, Value> = [
            ("a".to_owned(), json!(true)),
            ("b".to_owned(), json!(false)),
            ("c".to_owned(), json!("TypeError: boom")),
        ]
        .into();
        let found: Vec<String> = disagreements("p", &doc(Category::WrongType, true), &verdicts)
            .into_iter()
            .map(|d| d.validator)
            .collect();
        assert_eq!(
            found,
            ["b", "c"],
            "a wrong verdict and an error both disagree"
        );
    }

    #[test]
    fn only_the_typed_rust_path_must_refuse_a_duplicate_member() {
        let d = doc(Category::DuplicateKey, true);
        assert!(!expected(RUST_TYPED, &d));
        assert!(expected(RUST_UNTYPED, &d));
        assert!(expected("ajv", &d));
        assert!(expected(RUST_TYPED, &doc(Category::Instance, true)));
    }
}
