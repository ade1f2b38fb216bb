//! Runs every case of every suite group the generator accepts, on both the typed path
//! (`validate_document`: `rt::Wire` decode, then `rt::Validate`) and the untyped path
//! (`rt::SchemaCheck`), and checks every refusal names a keyword. Fails on any disagreement
//! with the suite's `valid`.
//!
//! The same runs over `extra/*.json`: cases in the suite's format for the subset's semantics
//! that the official suite does not cover (null is not missing, nullable `oneOf`, ...).
//!
//! The counts it prints are the ones `CONFORMANCE.md` shows; set `CONFORMANCE_WRITE=1` to
//! rewrite that file from this run. The page also shows how the same groups fare through the
//! generated Python and TypeScript: with `CONFORMANCE_WRITE=1` this test runs them first
//! (`langs/run.sh`, the `conformance-langs` program) and reads the verdicts it writes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use openagents_conformance::Group;
use suite::{EXTRA_GROUPS, GROUPS, SUPPORTED_KEYWORDS};

/// The suite groups and their generated modules, written by the build script.
mod suite {
    use openagents_conformance::{Case, Entry, Group};
    include!(concat!(env!("OUT_DIR"), "/suite.rs"));
    include!(concat!(env!("OUT_DIR"), "/extra.rs"));
}

#[derive(Default)]
struct FileCounts {
    groups: usize,
    generated: usize,
    refused: usize,
    cases: usize,
    passed: usize,
}

#[derive(Default)]
struct Outcome {
    files: BTreeMap<&'static str, FileCounts>,
    /// Refusals by keyword: `file#index (description): message`.
    refusals: BTreeMap<String, Vec<String>>,
    disagreements: Vec<String>,
    run: usize,
    cases: usize,
    passed: usize,
    refused: usize,
}

/// The keyword a refusal names: `FILE#POINTER: keyword `K`: MESSAGE`.
fn refusal_keyword(message: &str) -> Option<&str> {
    let (location, rest) = message.split_once(": keyword `")?;
    if !location.contains('#') {
        return None;
    }
    let (keyword, message) = rest.split_once("`: ")?;
    (!keyword.is_empty() && !message.is_empty()).then_some(keyword)
}

fn run(groups: &[Group]) -> Outcome {
    let mut o = Outcome::default();
    for g in groups {
        let counts = o.files.entry(g.file).or_default();
        counts.groups += 1;
        if let (Some(expected), None) = (g.expected_refusal, g.refusal) {
            o.disagreements.push(format!("{}#{} ({}): must be refused on `{expected}`, but was generated", g.file, g.index, g.description));
        }
        let Some(entry) = g.validate else {
            let message = g.refusal.expect("a group is generated or refused");
            match refusal_keyword(message) {
                Some(k) if g.expected_refusal.is_some_and(|e| e != k) => o.disagreements.push(format!(
                    "{}#{} ({}): must be refused on `{}`: {message}",
                    g.file,
                    g.index,
                    g.description,
                    g.expected_refusal.unwrap_or_default()
                )),
                Some(k) => {
                    o.refusals.entry(k.to_owned()).or_default().push(format!("{}#{} ({}): {message}", g.file, g.index, g.description))
                }
                None => {
                    o.disagreements.push(format!("{}#{} ({}): the refusal names no keyword: {message}", g.file, g.index, g.description))
                }
            }
            counts.refused += 1;
            o.refused += 1;
            continue;
        };
        assert!(g.refusal.is_none());
        counts.generated += 1;
        o.run += 1;
        for c in g.cases {
            counts.cases += 1;
            o.cases += 1;
            let typed = (entry.typed)(c.data.as_bytes());
            let value: serde_json::Value = serde_json::from_str(c.data).expect("suite data is JSON");
            let dynamic = (entry.dynamic)(&value);
            let mut ok = true;
            if typed.is_ok() != c.valid {
                ok = false;
                o.disagreements.push(format!(
                    "{}#{} ({}) / {}: the typed path says {}, the suite {}; data {}; {:?}; schema {}",
                    g.file,
                    g.index,
                    g.description,
                    c.description,
                    typed.is_ok(),
                    c.valid,
                    c.data,
                    typed.err(),
                    g.schema
                ));
            }
            if dynamic.is_empty() != c.valid {
                ok = false;
                o.disagreements.push(format!(
                    "{}#{} ({}) / {}: the untyped check says {}, the suite {}; data {}; {:?}; schema {}",
                    g.file,
                    g.index,
                    g.description,
                    c.description,
                    dynamic.is_empty(),
                    c.valid,
                    c.data,
                    dynamic,
                    g.schema
                ));
            }
            if ok {
                counts.passed += 1;
                o.passed += 1;
            }
        }
    }
    o
}

/// A refusal without the list of supported keywords some refusals end with.
fn short(refusal: &str) -> String {
    refusal.replace(&format!(" ({})", SUPPORTED_KEYWORDS.join(", ")), "").replace('\n', " ")
}

fn print(o: &Outcome) {
    println!("groups run: {}, cases passed: {}/{}, groups refused: {}", o.run, o.passed, o.cases, o.refused);
    for (k, list) in &o.refusals {
        println!("refused on `{k}`: {}", list.len());
        for r in list {
            println!("  {}", short(r));
        }
    }
}

#[test]
fn json_schema_test_suite() {
    let o = run(GROUPS);
    print(&o);
    let mut langs_failed = None;
    if std::env::var_os("CONFORMANCE_WRITE").is_some() {
        let langs = langs(GROUPS);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../CONFORMANCE.md");
        std::fs::write(path, report(&o, &langs.files)).expect("CONFORMANCE.md is writable");
        langs_failed = langs.failed;
    }
    assert!(o.run > 0 && o.cases > 0, "no suite group was generated");
    assert!(langs_failed.is_none(), "the Python and TypeScript run failed:\n{}", langs_failed.unwrap_or_default());
    assert!(o.disagreements.is_empty(), "{} disagreement(s) with the suite:\n{}", o.disagreements.len(), o.disagreements.join("\n"));
}

/// `CONFORMANCE.md` is written from `conformance_template.md` (`CONFORMANCE_WRITE=1`). Every line
/// of the template's own text must be in the page, and every line of the page must be the
/// template's or one the run writes (the summary, the keyword list, the table, the refusals), so
/// an edit made to one alone fails here before a rewrite from the other undoes it.
#[test]
fn conformance_page_keeps_the_template_text() {
    let template = include_str!("conformance_template.md");
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../CONFORMANCE.md")).expect("CONFORMANCE.md is readable");
    let page_lines: std::collections::HashSet<&str> = page.lines().collect();
    let template_lines: std::collections::HashSet<&str> = template.lines().collect();
    let missing: Vec<&str> = template.lines().filter(|l| !l.contains("{{") && !l.trim().is_empty() && !page_lines.contains(l)).collect();
    let written = |l: &str| {
        l.trim().is_empty()
            || l.starts_with('|')
            || l.starts_with("### `")
            || (l.starts_with("- ") && l.contains(".json#"))
            || (l.starts_with("**") && l.contains("groups generated"))
            || l.starts_with("`$schema`")
    };
    let added: Vec<&str> = page.lines().filter(|l| !template_lines.contains(l) && !written(l)).collect();
    assert!(
        missing.is_empty() && added.is_empty(),
        "CONFORMANCE.md and tests/conformance/tests/conformance_template.md differ (edit the template, then \
         CONFORMANCE_WRITE=1 cargo nextest run -p openagents-conformance -E 'test(json_schema_test_suite)'); \
         the template's lines not in the page:\n{}\nthe page's lines not in the template:\n{}",
        missing.join("\n"),
        added.join("\n")
    );
}

#[test]
fn extra_semantics_cases() {
    let o = run(EXTRA_GROUPS);
    print(&o);
    assert!(o.run > 0 && o.cases > 0, "no extra group was generated");
    // These groups are meant to be inside the subset, unless they say otherwise.
    let expected = EXTRA_GROUPS.iter().filter(|g| g.expected_refusal.is_some()).count();
    assert_eq!(o.refused, expected, "only the groups marked `x-refused` may be refused");
    assert!(
        o.disagreements.is_empty(),
        "{} disagreement(s) with the expected verdicts:\n{}",
        o.disagreements.len(),
        o.disagreements.join("\n")
    );
}

/// Per suite file, the cases passed through the generated Python and TypeScript.
#[derive(Default, Clone, Copy)]
struct LangCounts {
    python: usize,
    typescript: usize,
}

/// What the Python and TypeScript run found.
struct Langs {
    files: BTreeMap<String, LangCounts>,
    /// What it printed, when it failed (a disagreement it does not list as known).
    failed: Option<String>,
}

/// Runs the suite groups through the generated Python and TypeScript (`langs/run.sh`) and counts,
/// per file, the cases each passes; the verdicts must be of exactly `groups`' generated groups and
/// cases.
fn langs(groups: &[Group]) -> Langs {
    let here = env!("CARGO_MANIFEST_DIR");
    let out =
        std::process::Command::new("bash").arg(format!("{here}/langs/run.sh")).output().expect("bash runs tests/conformance/langs/run.sh");
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{printed}");
    let path = format!("{here}/../../target/conformance-langs/results.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("langs/run.sh wrote no {path} ({e}):\n{printed}"));
    let results: serde_json::Value = serde_json::from_str(&text).expect("results.json is JSON");
    let by_key: BTreeMap<(&str, u64), &serde_json::Value> = results["groups"]
        .as_array()
        .expect("results.json has groups")
        .iter()
        .filter(|g| g["set"] == "suite")
        .map(|g| ((g["file"].as_str().unwrap_or_default(), g["index"].as_u64().unwrap_or_default()), g))
        .collect();
    let generated: Vec<&Group> = groups.iter().filter(|g| g.validate.is_some()).collect();
    assert_eq!(by_key.len(), generated.len(), "results.json has verdicts for other groups than the generated ones");
    let mut files: BTreeMap<String, LangCounts> = BTreeMap::new();
    for g in generated {
        let r = by_key.get(&(g.file, g.index as u64)).unwrap_or_else(|| panic!("results.json has no verdicts for {}#{}", g.file, g.index));
        assert_eq!(r["description"], g.description, "results.json: {}#{} is another group", g.file, g.index);
        let cases = r["cases"].as_array().expect("a group's cases");
        assert_eq!(cases.len(), g.cases.len(), "results.json: {}#{} has other cases", g.file, g.index);
        let counts = files.entry(g.file.to_owned()).or_default();
        for (c, r) in g.cases.iter().zip(cases) {
            assert!(
                r["description"] == c.description && r["data"] == c.data && r["valid"] == c.valid,
                "results.json: {}#{} has another case than {:?}",
                g.file,
                g.index,
                c.description
            );
            counts.python += usize::from(r["python"] == true);
            counts.typescript += usize::from(r["typescript"] == true);
        }
    }
    Langs { files, failed: (!out.status.success()).then_some(printed) }
}

fn report(o: &Outcome, langs: &BTreeMap<String, LangCounts>) -> String {
    let template = include_str!("conformance_template.md");
    let mut table = String::from(
        "| Suite file | Groups | Generated | Refused | Cases run | Rust | Python | TypeScript |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut total = LangCounts::default();
    for (f, c) in &o.files {
        let l = langs.get(*f).copied().unwrap_or_default();
        total.python += l.python;
        total.typescript += l.typescript;
        let _ = writeln!(
            table,
            "| `{f}` | {} | {} | {} | {} | {} | {} | {} |",
            c.groups, c.generated, c.refused, c.cases, c.passed, l.python, l.typescript
        );
    }
    let groups: usize = o.files.values().map(|c| c.groups).sum();
    let _ = writeln!(
        table,
        "| **total** | **{groups}** | **{}** | **{}** | **{}** | **{}** | **{}** | **{}** |",
        o.run, o.refused, o.cases, o.passed, total.python, total.typescript
    );
    let mut why = String::new();
    for (k, list) in &o.refusals {
        let _ = writeln!(why, "\n### `{k}` ({} group{})\n", list.len(), if list.len() == 1 { "" } else { "s" });
        for r in list {
            let _ = writeln!(why, "- {}", short(r));
        }
    }
    let keywords = SUPPORTED_KEYWORDS.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    template
        .replace(
            "{{SUMMARY}}",
            &format!(
                "**{}** of {groups} groups generated; of their **{}** cases, **{}** pass in Rust (on both paths), **{}** in Python, \
                 **{}** in TypeScript; **{}** groups refused.",
                o.run, o.cases, o.passed, total.python, total.typescript, o.refused
            ),
        )
        .replace("{{TABLE}}", table.trim_end())
        .replace("{{REFUSALS}}", why.trim())
        .replace("{{KEYWORDS}}", &keywords)
}
