//! The generated Rust of each published schema against the `jsonschema` crate, on the corpus
//! `openagents_published::corpus` makes: both paths (typed: exact decoding and the typed checks;
//! untyped: the full-schema check of a parsed value) must give the verdict of record on every
//! document, but for the disagreements `known-disagreements.json` lists (a listed one that no
//! longer happens fails too). The counts `CONFORMANCE.md` records must be this corpus's. The
//! generated Python and TypeScript, python `jsonschema` and ajv run on the same corpus in
//! `langs.sh` (`make test-published`).

use std::collections::BTreeMap;

use openagents_published::GENERATED;
use openagents_published::agreement::{self, RUST_TYPED, RUST_UNTYPED};
use openagents_published::corpus::{self, Category, PROTOCOLS};
use serde_json::Value;

#[test]
fn the_generated_rust_agrees_with_the_jsonschema_crate_on_every_published_type() {
    let recorded = agreement::recorded_table();
    let mut found = Vec::new();
    let mut docs_per_protocol = BTreeMap::new();
    let mut checked = 0;
    let mut table_problems = Vec::new();
    for (protocol, g) in PROTOCOLS.iter().zip(GENERATED.iter()) {
        let c = corpus::build(*protocol);
        let mut disagreements = Vec::new();
        for doc in &c.docs {
            let name = g.type_of(&doc.def).unwrap_or_else(|| {
                panic!(
                    "{}: no generated type for `$defs/{}`",
                    protocol.name, doc.def
                )
            });
            let verdicts: BTreeMap<String, Value> = agreement::rust_verdicts(g, &doc.def, name, &doc.text)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            disagreements.extend(agreement::disagreements(protocol.name, doc, &verdicts));
            checked += 1;
        }
        // Each category of document is present: instances and every kind of mutation.
        for category in Category::ALL {
            assert!(
                c.docs.iter().any(|d| d.category == category),
                "{}: no {} document",
                protocol.name,
                category.name()
            );
        }
        assert!(
            c.invalid() > 0 && c.valid() > 0,
            "{}: the corpus has both valid and invalid documents",
            protocol.name
        );
        let row = recorded.get(protocol.name).cloned().unwrap_or_default();
        let counts = [
            ("$defs types", c.defs.len()),
            ("types with a valid instance", c.defs_with_instance),
            ("valid documents", c.valid()),
            ("invalid documents", c.invalid()),
            ("duplicate-key documents", c.duplicates()),
        ];
        for (column, n) in counts {
            if row.get(column) != Some(&n.to_string()) {
                table_problems.push(format!(
                    "{}: CONFORMANCE.md's \"Agreement with reference validators\" table records {:?} as `{column}`, this corpus has {n} (`make test-published` prints the table)",
                    protocol.name,
                    row.get(column)
                ));
            }
        }
        docs_per_protocol.insert(protocol.name.to_owned(), c.docs.len());
        found.push((protocol.name.to_owned(), disagreements));
    }
    assert!(checked > 0, "the corpus is empty");
    let outcome = agreement::judge(found, &[RUST_TYPED, RUST_UNTYPED], &docs_per_protocol);
    let mut problems: Vec<String> = outcome
        .unexpected
        .iter()
        .map(|d| format!("disagreement: {d}"))
        .collect();
    problems.extend(table_problems);
    problems.extend(outcome.stale.iter().map(|(v, k)| {
        format!(
            "listed but agrees now: {v} on {} `{}` ({})",
            k.protocol, k.def, k.origin
        )
    }));
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
