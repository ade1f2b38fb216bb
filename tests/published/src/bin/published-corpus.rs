//! The corpus of the published schemas, and the comparison of every validator on it.
//!
//! ```sh
//! published-corpus write DIR     # DIR/<protocol>.json: each protocol's corpus
//! published-corpus compare DIR   # compares the verdicts in DIR with the verdicts of record
//! ```
//!
//! `write` builds each protocol's corpus (`openagents_published::corpus`) and writes it for the
//! Python and TypeScript runners (`langs/run_python.py`, `langs/run_typescript.mjs`), which write
//! `DIR/python-<protocol>.json` and `DIR/typescript-<protocol>.json`. `compare` reads those,
//! adds the generated Rust's verdicts (typed and untyped paths), and compares every validator's
//! verdict with the verdict of record (the `jsonschema` crate's). It fails on a disagreement
//! `known-disagreements.json` does not list, on a listed one that no longer happens, and when
//! `CONFORMANCE.md`'s "Agreement with reference validators" table is not what it finds (it prints
//! the table it finds). `tests/published/langs.sh` (`make test-published`) runs both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use openagents_published::GENERATED;
use openagents_published::agreement::{self, RUST_TYPED, RUST_UNTYPED};
use openagents_published::corpus::{self, Category, Doc, PROTOCOLS};
use serde_json::Value;

/// Every validator the comparison runs, as the verdicts name them.
const VALIDATORS: &[&str] = &[
    RUST_TYPED,
    RUST_UNTYPED,
    "python",
    "python-json",
    "python-check-json",
    "python-jsonschema",
    "typescript",
    "typescript-isValid",
    "ajv",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [cmd, dir] if cmd == "write" => write(Path::new(dir)),
        [cmd, dir] if cmd == "compare" => compare(Path::new(dir)),
        _ => Err("usage: published-corpus write DIR | published-corpus compare DIR".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("published-corpus: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (protocol, g) in PROTOCOLS.iter().zip(GENERATED.iter()) {
        let c = corpus::build(*protocol);
        let path = dir.join(format!("{}.json", protocol.name));
        let text = serde_json::to_string(&agreement::corpus_json(&c, g)).expect("JSON serializes");
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!(
            "{}: {} $defs types, {} with a valid instance; {} valid and {} invalid documents ({} duplicate-key)",
            protocol.name,
            c.defs.len(),
            c.defs_with_instance,
            c.valid(),
            c.invalid(),
            c.duplicates()
        );
    }
    Ok(())
}

fn read_json(path: &PathBuf) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
}

fn category(name: &str) -> Result<Category, String> {
    Category::ALL
        .into_iter()
        .find(|c| c.name() == name)
        .ok_or_else(|| format!("unknown category `{name}`"))
}

fn compare(dir: &Path) -> Result<(), String> {
    let mut found = Vec::new();
    let mut docs_per_protocol = BTreeMap::new();
    let mut rows: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (protocol, g) in PROTOCOLS.iter().zip(GENERATED.iter()) {
        let corpus = read_json(&dir.join(format!("{}.json", protocol.name)))?;
        let docs = corpus["docs"].as_array().ok_or("a corpus without docs")?;
        let mut others = Vec::new();
        for lang in ["python", "typescript"] {
            let v = read_json(&dir.join(format!("{lang}-{}.json", protocol.name)))?;
            let verdicts = v["verdicts"]
                .as_array()
                .cloned()
                .ok_or("verdicts without a list")?;
            if verdicts.len() != docs.len() {
                return Err(format!(
                    "{lang}-{}.json: {} verdicts for {} documents",
                    protocol.name,
                    verdicts.len(),
                    docs.len()
                ));
            }
            others.push(verdicts);
        }
        let mut disagreements = Vec::new();
        let (mut valid, mut invalid, mut duplicates) = (0, 0, 0);
        let mut defs = std::collections::BTreeSet::new();
        let mut defs_with_instance = std::collections::BTreeSet::new();
        for (i, d) in docs.iter().enumerate() {
            let s = |k: &str| {
                d[k].as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("a document without `{k}`"))
            };
            let doc = Doc {
                def: s("def")?,
                category: category(&s("category")?)?,
                origin: s("origin")?,
                text: s("text")?,
                valid: d["valid"].as_bool().ok_or("no `valid`")?,
            };
            defs.insert(doc.def.clone());
            if doc.category == Category::Instance {
                defs_with_instance.insert(doc.def.clone());
            }
            if doc.valid {
                valid += 1;
            } else {
                invalid += 1;
            }
            if doc.category == Category::DuplicateKey {
                duplicates += 1;
            }
            let mut verdicts: BTreeMap<String, Value> = BTreeMap::new();
            match d["type"].as_str() {
                Some(t) => verdicts.extend(
                    agreement::rust_verdicts(g, &doc.def, t, &doc.text).map(|(k, v)| (k.to_owned(), v)),
                ),
                None => {
                    for k in [RUST_TYPED, RUST_UNTYPED] {
                        verdicts.insert(
                            k.to_owned(),
                            Value::String(format!("no generated type for `{}`", doc.def)),
                        );
                    }
                }
            }
            for o in &others {
                for (k, v) in o[i].as_object().ok_or("a verdict that is not an object")? {
                    verdicts.insert(k.clone(), v.clone());
                }
            }
            let missing: Vec<&&str> = VALIDATORS
                .iter()
                .filter(|v| !verdicts.contains_key(**v))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "{}: no verdict of {missing:?} on document {i}",
                    protocol.name
                ));
            }
            disagreements.extend(agreement::disagreements(protocol.name, &doc, &verdicts));
        }
        // Every $defs key of the schema is in the corpus, with or without instances.
        let all_defs = corpus::schema(protocol)["$defs"]
            .as_object()
            .map_or(0, serde_json::Map::len);
        let row = BTreeMap::from([
            ("`$defs` types".to_owned(), all_defs.to_string()),
            (
                "types with a valid instance".to_owned(),
                defs_with_instance.len().to_string(),
            ),
            ("valid documents".to_owned(), valid.to_string()),
            ("invalid documents".to_owned(), invalid.to_string()),
            ("duplicate-key documents".to_owned(), duplicates.to_string()),
        ]);
        rows.insert(protocol.name.to_owned(), row);
        docs_per_protocol.insert(protocol.name.to_owned(), docs.len());
        let _ = defs;
        found.push((protocol.name.to_owned(), disagreements));
    }
    let outcome = agreement::judge(found, VALIDATORS, &docs_per_protocol);
    for (protocol, n) in &outcome.agreements {
        let row = rows.get_mut(protocol).expect("a row per protocol");
        row.insert("agreements".to_owned(), n.to_string());
        let disagreeing = outcome.disagreeing.get(protocol).copied().unwrap_or(0);
        row.insert(
            "documents with a known disagreement".to_owned(),
            disagreeing.to_string(),
        );
    }
    let mut failed = Vec::new();
    for d in &outcome.unexpected {
        failed.push(format!("disagreement: {d}"));
    }
    for (v, k) in &outcome.stale {
        failed.push(format!("known-disagreements.json lists {v} on {} `{}` ({}), which now agrees: remove it from the entry", k.protocol, k.def, k.origin));
    }
    let table = markdown(&rows);
    eprintln!("{table}");
    let recorded = agreement::recorded_table();
    let expected: BTreeMap<String, BTreeMap<String, String>> = rows
        .iter()
        .map(|(p, r)| {
            (
                p.clone(),
                r.iter()
                    .map(|(k, v)| (k.replace('`', ""), v.clone()))
                    .collect(),
            )
        })
        .collect();
    if recorded != expected {
        failed.push(format!(
            "CONFORMANCE.md's \"Agreement with reference validators\" table is not what this run found; this run's table:\n{table}"
        ));
    }
    if failed.is_empty() {
        eprintln!(
            "published-corpus: every validator agrees with the verdict of record on every document but the {} listed disagreements",
            outcome.listed.len()
        );
        Ok(())
    } else {
        Err(format!(
            "{} problem(s):\n{}",
            failed.len(),
            failed.join("\n")
        ))
    }
}

/// The counts as `CONFORMANCE.md` shows them.
pub fn markdown(rows: &BTreeMap<String, BTreeMap<String, String>>) -> String {
    const COLUMNS: [&str; 7] = [
        "`$defs` types",
        "types with a valid instance",
        "valid documents",
        "invalid documents",
        "duplicate-key documents",
        "agreements",
        "documents with a known disagreement",
    ];
    let mut out = format!(
        "| protocol | {} |\n|---|{}\n",
        COLUMNS.join(" | "),
        "---:|".repeat(COLUMNS.len())
    );
    for p in PROTOCOLS {
        let row = &rows[p.name];
        let cells: Vec<&str> = COLUMNS
            .iter()
            .map(|c| row.get(*c).map_or("", String::as_str))
            .collect();
        out.push_str(&format!("| `{}` | {} |\n", p.name, cells.join(" | ")));
    }
    out
}
