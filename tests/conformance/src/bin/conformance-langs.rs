//! Runs the JSON Schema Test Suite groups the generator accepts (and the `extra/` groups)
//! through the generated Python and TypeScript, as `tests/suite.rs` runs them through the
//! generated Rust.
//!
//! The build script generates, for every accepted group, the Python package and the TypeScript
//! modules of its schema, and a manifest of their root types and cases (`OUT_DIR/langs`). This
//! program copies them into the output folder (`target/conformance-langs` by default), adds the
//! clients' runtimes (`clients/typescript/src/rt.ts`, ...; the Python package imports
//! `openagents._rt` from the virtualenv), compiles the TypeScript with the client's `tsc --strict`,
//! runs every case through `langs/run_python.py` and `langs/run_typescript.mjs`, and compares each
//! verdict with the suite's `valid`.
//!
//! A disagreement fails the run unless `langs/known-disagreements.json` lists it (language, file,
//! group and case descriptions, and why); a listed case that now agrees fails the run too, so the
//! list only holds what is still true. Writes `results.json` (every case's verdict per language),
//! which `CONFORMANCE_WRITE=1 cargo test -p openagents-conformance --test suite` puts into
//! `CONFORMANCE.md`.
//!
//! ```sh
//! cargo run -p openagents-conformance --bin conformance-langs -- [--out DIR] [--python PYTHON] [--python-path DIR] [--node NODE]
//! ```
//!
//! It needs the repository's virtualenv (`clients/python/ensure-venv.sh`; `--python` defaults to
//! its interpreter), the TypeScript client's packages (`npm ci` in `clients/typescript`), and, for
//! the suite's Unicode property patterns, the Python client's `unicode-patterns` extra on the
//! `--python-path`; `langs/run.sh` (`make test-conformance-langs`) sets up all three.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use serde_json::{Value, json};

/// What the build script generated.
const GENERATED: &str = concat!(env!("OUT_DIR"), "/langs");
/// This crate's folder.
const HERE: &str = env!("CARGO_MANIFEST_DIR");

/// The languages, as the results and the known-disagreements list name them.
const LANGUAGES: [&str; 2] = ["python", "typescript"];

/// One case's outcome in one language.
struct Outcome {
    passed: bool,
    /// Each path's verdict: `true`, `false`, or an error's text.
    got: Value,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("conformance-langs: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    let root = Path::new(HERE).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

fn run() -> Result<bool, String> {
    let mut out = root().join("target/conformance-langs");
    let venv = std::env::var_os("OPENAGENTS_VENV").map_or_else(|| root().join(".venv"), PathBuf::from);
    let mut python = venv.join("bin/python");
    let mut node = PathBuf::from("node");
    let mut python_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().map(PathBuf::from).ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--out" => out = value()?,
            "--python" => python = value()?,
            "--node" => node = value()?,
            "--python-path" => python_path = Some(value()?),
            _ => {
                return Err(format!("unknown argument `{a}` (expected --out DIR, --python PYTHON, --python-path DIR, --node NODE)"));
            }
        }
    }
    let client_ts = root().join("clients/typescript");
    let tsc = client_ts.join("node_modules/typescript/bin/tsc");
    if !python.exists() {
        return Err(format!("no Python at {}: run clients/python/ensure-venv.sh (or pass --python)", python.display()));
    }
    if !tsc.exists() {
        return Err(format!("no TypeScript compiler at {}: run `npm ci` in clients/typescript", tsc.display()));
    }

    let started = Instant::now();
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| format!("cannot clear {}: {e}", out.display()))?;
    }
    copy_tree(Path::new(GENERATED), &out)?;
    let manifest_path = out.join("manifest.json");
    let manifest: Value = read_json(&manifest_path)?;
    let groups = manifest["groups"].as_array().ok_or("the manifest has no groups")?;

    // The TypeScript: the generated modules beside copies of the client's runtime, compiled.
    let ts = out.join("ts");
    for name in ["rt.ts", "error.ts"] {
        copy(&client_ts.join("src").join(name), &ts.join("src").join(name))?;
    }
    copy_tree(&client_ts.join("src/generated"), &ts.join("src/generated"))?;
    write(&ts.join("package.json"), "{ \"type\": \"module\" }\n")?;
    write(
        &ts.join("tsconfig.json"),
        &serde_json::to_string_pretty(&json!({
            "compilerOptions": {
                "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "lib": ["ES2022", "DOM"], "types": [],
                "strict": true, "noImplicitOverride": true, "noFallthroughCasesInSwitch": true, "verbatimModuleSyntax": true,
                "rootDir": "src", "outDir": "dist", "newLine": "lf", "skipLibCheck": false
            },
            "include": ["src/**/*.ts"]
        }))
        .expect("JSON serializes"),
    )?;
    let t = Instant::now();
    let compiled = Command::new(&node)
        .arg(&tsc)
        .arg("-p")
        .arg("tsconfig.json")
        .current_dir(&ts)
        .output()
        .map_err(|e| format!("cannot run node: {e}"))?;
    // tsc still emits a module it finds errors in; a group whose TypeScript does not type-check
    // fails every case, and an error anywhere else stops the run.
    let mut ts_errors: BTreeMap<String, String> = BTreeMap::new();
    if !compiled.status.success() {
        let text = String::from_utf8_lossy(&compiled.stdout).into_owned();
        let mut module = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("src/") {
                let (dir, _) = rest.split_once('/').unwrap_or(("", ""));
                module = groups.iter().any(|g| g["module"] == dir).then(|| dir.to_owned());
                if module.is_none() {
                    return Err(format!("the TypeScript runtime or the client's generated modules do not compile:\n{text}"));
                }
            }
            let Some(m) = &module else { return Err(format!("tsc failed:\n{text}{}", String::from_utf8_lossy(&compiled.stderr))) };
            let e = ts_errors.entry(m.clone()).or_default();
            e.push_str(line.trim());
            e.push(' ');
        }
    }
    eprintln!("tsc: {:.1}s", t.elapsed().as_secs_f64());

    let t = Instant::now();
    let mut command = Command::new(&python);
    command.arg(Path::new(HERE).join("langs/run_python.py")).arg(&manifest_path).arg(out.join("py"));
    if let Some(dir) = &python_path {
        command.env("PYTHONPATH", dir);
    }
    let py = runner(&mut command)?;
    eprintln!("python: {:.1}s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let js = runner(Command::new(&node).arg(Path::new(HERE).join("langs/run_typescript.mjs")).arg(&manifest_path).arg(ts.join("dist")))?;
    eprintln!("node: {:.1}s", t.elapsed().as_secs_f64());

    // Every case's outcome, per language.
    let known_path = Path::new(HERE).join("langs/known-disagreements.json");
    let known: Vec<Value> = read_json(&known_path)?.as_array().cloned().ok_or("known-disagreements.json is an array")?;
    let mut known_used = vec![false; known.len()];
    let mut unexpected = Vec::new();
    let mut listed = Vec::new();
    let mut counts: BTreeMap<(&str, &str), (usize, usize)> = BTreeMap::new();
    let mut results = Vec::new();
    for g in groups {
        let (set, file, description, module) = (str_of(&g["set"]), str_of(&g["file"]), str_of(&g["description"]), str_of(&g["module"]));
        let cases = g["cases"].as_array().ok_or("a group without cases")?;
        let mut case_results = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            let valid = c["valid"].as_bool().ok_or("a case without `valid`")?;
            let mut entry = json!({ "description": c["description"], "data": c["data"], "valid": valid });
            for language in LANGUAGES {
                let outcome = if language == "python" && !g["python_refusal"].is_null() {
                    Outcome { passed: false, got: json!({ "refused": g["python_refusal"] }) }
                } else {
                    let verdicts = if language == "python" { &py } else { &js };
                    let mut got = verdicts
                        .get(module)
                        .and_then(|v| v.get(i))
                        .cloned()
                        .ok_or_else(|| format!("{language}: no verdict for {module} case {i}"))?;
                    let mut passed = got.as_object().is_some_and(|o| !o.is_empty() && o.values().all(|v| v.as_bool() == Some(valid)));
                    if let (true, Some(error)) = (language == "typescript", ts_errors.get(module)) {
                        // The emitted JavaScript still ran, but code that does not type-check fails.
                        got["tsc"] = Value::String(error.trim_end().to_owned());
                        passed = false;
                    }
                    Outcome { passed, got }
                };
                let count = counts.entry((language, set)).or_default();
                count.1 += 1;
                if outcome.passed {
                    count.0 += 1;
                } else {
                    let line = format!(
                        "{language}: {file} / {description} / {}: data {}, the suite says {}, got {}",
                        str_of(&c["description"]),
                        str_of(&c["data"]),
                        if valid { "valid" } else { "invalid" },
                        outcome.got
                    );
                    let k = known.iter().position(|k| {
                        k["language"] == language && k["file"] == file && k["group"] == description && k["case"] == c["description"]
                    });
                    match k {
                        Some(k) => {
                            known_used[k] = true;
                            listed.push(line);
                        }
                        None => unexpected.push(line),
                    }
                }
                entry[language] = Value::Bool(outcome.passed);
            }
            case_results.push(entry);
        }
        results.push(json!({ "set": set, "file": file, "index": g["index"], "description": description, "cases": case_results }));
    }
    write(&out.join("results.json"), &serde_json::to_string_pretty(&json!({ "groups": results })).expect("JSON serializes"))?;

    for ((language, set), (passed, total)) in &counts {
        println!("{language} ({set}): {passed}/{total} cases pass");
    }
    if !listed.is_empty() {
        println!("known disagreements ({}, listed in {}):", listed.len(), known_path.display());
        for l in &listed {
            println!("  {l}");
        }
    }
    let stale: Vec<String> = known
        .iter()
        .zip(&known_used)
        .filter(|(_, used)| !**used)
        .map(|(k, _)| format!("{k}: this case agrees with the suite now (or does not exist): remove it from the list"))
        .collect();
    let missing_why: Vec<String> =
        known.iter().filter(|k| k["why"].as_str().is_none_or(str::is_empty)).map(|k| format!("{k}: says no `why`")).collect();
    println!("results: {} ({:.1}s)", out.join("results.json").display(), started.elapsed().as_secs_f64());
    let problems: Vec<&String> = unexpected.iter().chain(&stale).chain(&missing_why).collect();
    if problems.is_empty() {
        return Ok(true);
    }
    eprintln!("{} problem(s):", problems.len());
    for p in problems {
        eprintln!("  {p}");
    }
    Ok(false)
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Runs a runner script and parses what it prints: module -> one map of verdicts per case.
fn runner(command: &mut Command) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let output = command.output().map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!("{command:?} failed ({}):\n{}", output.status, String::from_utf8_lossy(&output.stderr)));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("{command:?} printed no verdicts ({e}):\n{}", String::from_utf8_lossy(&output.stderr)))
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::copy(from, to).map(drop).map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))? {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(entry.file_name()))?;
        } else {
            copy(&path, &to.join(entry.file_name()))?;
        }
    }
    Ok(())
}
