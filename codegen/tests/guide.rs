//! The guide (`codegen/README.md`) run as a script, top to bottom, in an empty folder: what it
//! shows is what the generator does.
//!
//! The guide's fenced blocks are the script; an HTML comment `<!-- guide: … -->` (invisible where
//! the guide is read) says what the next block is for:
//!
//! - a ```` ```json ```` block with a `$id` and no comment is a schema file: written to
//!   `schema/<$id>`, verbatim;
//! - `write PATH`: the next block's text is written to PATH;
//! - `append FILE POINTER` / `merge FILE POINTER`: the next block (JSON) is appended to the array,
//!   or its members set on the object, at POINTER in FILE — an edit the guide asks for;
//! - `part-of FILE [POINTER]`: the next block (JSON) is a part of the value at POINTER in FILE as
//!   it is then (every member it shows is there with that value; arrays element by element);
//! - `excerpt rust|rust-service|python FILE|typescript FILE [SCHEMA [METHODS]]`: the next
//!   block's lines appear, in order and together, in the generated text (`...` skips any lines),
//!   generated with the library (`Config::new().schema_dir(SCHEMA)`, default `schema`;
//!   `rust-service` with `.service(true)`);
//! - `exit N`: every command of the next console block exits with N (default 0);
//! - `commands`: the next table lists exactly the commands `--help` lists, each row exactly the
//!   options that command's `--help` lists, and every default a row gives (`(default `X`)`) is
//!   the one `--help` gives.
//!
//! In a ```` ```console ```` block, every `$ openagents-codegen …` line is run with the built
//! binary (`CARGO_BIN_EXE_openagents-codegen`) in the folder; the lines after it are its output
//! (stdout, then stderr), where `...` skips any lines and a line ending in `…` is a prefix. Other
//! commands (`cargo install`, `pip install`) need the network and are not run. Every refusal a
//! `check` shows is also checked through the library (`Config::load`): file, pointer, keyword.
//! Any other ```` ```json ```` block fails the test: every JSON the guide shows is tested.

use std::path::PathBuf;
use std::process::Command;

use openagents_codegen::Config;
use serde_json::Value;

/// The guide, as the test reads it.
const GUIDE: &str = include_str!("../README.md");

/// The built command line.
const BIN: &str = env!("CARGO_BIN_EXE_openagents-codegen");

/// One fenced block of the guide, with the directive before it.
#[derive(Debug)]
struct Block {
    /// The line of its opening fence (1-based), for messages.
    line: usize,
    /// The fence's language (`json`, `console`, …).
    lang: String,
    /// What the `<!-- guide: … -->` comment before it says, if any.
    directive: Option<String>,
    /// Its text, with a final newline.
    text: String,
}

/// One step of the script: a fenced block, or a table marked `commands`.
#[derive(Debug)]
enum Step {
    Block(Block),
    Commands { line: usize, rows: Vec<String> },
}

/// The guide's steps in order. A directive applies to the next block (or table).
fn steps(guide: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut directive: Option<String> = None;
    let mut lines = guide.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        if let Some(d) = line.trim().strip_prefix("<!-- guide:").and_then(|d| d.strip_suffix("-->")) {
            directive = Some(d.trim().to_owned());
            continue;
        }
        if directive.as_deref() == Some("commands") && line.starts_with('|') {
            let mut rows = vec![line.to_owned()];
            while let Some((_, l)) = lines.peek().filter(|(_, l)| l.starts_with('|')) {
                rows.push((*l).to_owned());
                lines.next();
            }
            out.push(Step::Commands { line: i + 1, rows });
            directive = None;
            continue;
        }
        if let Some(lang) = line.strip_prefix("```") {
            let mut text = String::new();
            for (_, l) in lines.by_ref() {
                if l.starts_with("```") {
                    break;
                }
                text.push_str(l);
                text.push('\n');
            }
            let lang = lang.split_whitespace().next().unwrap_or("").to_owned();
            out.push(Step::Block(Block { line: i + 1, lang, directive: directive.take(), text }));
        }
    }
    out
}

/// Whether `actual` matches `expected` line by line: `...` matches any lines (none included), a
/// line ending in `…` matches any line it starts, any other line matches itself.
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| matches(rest, &actual[skip..])),
        Some((e, rest)) => actual.split_first().is_some_and(|(a, more)| {
            let same = match e.strip_suffix('…') {
                Some(prefix) => a.starts_with(prefix),
                None => a == e,
            };
            same && matches(rest, more)
        }),
    }
}

/// Whether `part` is a part of `whole`: an object's members each a part of the same member, an
/// array element by element (same length), anything else equal.
fn part_of(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => p.iter().all(|(k, v)| w.get(k).is_some_and(|wv| part_of(v, wv))),
        (Value::Array(p), Value::Array(w)) => p.len() == w.len() && p.iter().zip(w).all(|(a, b)| part_of(a, b)),
        _ => part == whole,
    }
}

/// The guide's example project, in a folder of its own.
struct Project {
    root: PathBuf,
    /// What the script did, for the final sanity checks.
    ran: Vec<String>,
    schema_files: usize,
    excerpts: usize,
    parts: usize,
}

impl Project {
    fn new() -> Project {
        let root = std::env::temp_dir().join(format!("openagents-guide-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Project { root, ran: Vec::new(), schema_files: 0, excerpts: 0, parts: 0 }
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }

    fn read_json(&self, file: &str, at: &str) -> Value {
        let text = std::fs::read_to_string(self.root.join(file)).unwrap_or_else(|e| panic!("{at}: cannot read {file}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{at}: {file} is not JSON: {e}"))
    }

    /// Rewrites `file` with `edit` applied to the value at `pointer`.
    fn edit(&self, file: &str, pointer: &str, at: &str, edit: impl FnOnce(&mut Value)) {
        let mut doc = self.read_json(file, at);
        let target = doc.pointer_mut(pointer).unwrap_or_else(|| panic!("{at}: {file} has nothing at {pointer}"));
        edit(target);
        self.write(file, &(serde_json::to_string_pretty(&doc).unwrap() + "\n"));
    }

    fn config(&self, schema: Option<&str>, methods: Option<&str>) -> Config {
        let config = Config::new().schema_dir(self.root.join(schema.unwrap_or("schema")));
        match methods {
            Some(m) => config.methods_file(self.root.join(m)),
            None => config,
        }
    }

    fn block(&mut self, b: &Block) {
        let at = format!("codegen/README.md:{}", b.line);
        let json = || -> Value { serde_json::from_str(&b.text).unwrap_or_else(|e| panic!("{at}: the ```json block is not JSON: {e}")) };
        let words: Vec<&str> = b.directive.as_deref().unwrap_or("").split_whitespace().collect();
        match (b.lang.as_str(), words.as_slice()) {
            ("json", []) => {
                let doc = json();
                let Some(id) = doc.get("$id").and_then(Value::as_str) else {
                    panic!("{at}: a ```json block is either a schema file (with its `$id`) or marked with a `<!-- guide: … -->` comment saying what it is");
                };
                self.write(&format!("schema/{id}"), &b.text);
                self.schema_files += 1;
            }
            ("console", []) => self.console(b, 0),
            ("console", ["exit", code]) => self.console(b, code.parse().unwrap()),
            (_, ["write", path]) => {
                if b.lang == "json" {
                    json();
                }
                self.write(path, &b.text);
            }
            ("json", ["append", file, pointer]) => {
                let value = json();
                self.edit(file, pointer, &at, |t| t.as_array_mut().unwrap_or_else(|| panic!("{at}: {pointer} is not an array")).push(value));
            }
            ("json", ["merge", file, pointer]) => {
                let Value::Object(members) = json() else { panic!("{at}: a merge is an object") };
                self.edit(file, pointer, &at, |t| {
                    let t = t.as_object_mut().unwrap_or_else(|| panic!("{at}: {pointer} is not an object"));
                    t.extend(members);
                });
            }
            ("json", ["part-of", file, rest @ ..]) => {
                let pointer = rest.first().copied().unwrap_or("");
                let doc = self.read_json(file, &at);
                let whole = doc.pointer(pointer).unwrap_or_else(|| panic!("{at}: {file} has nothing at `{pointer}`"));
                assert!(part_of(&json(), whole), "{at}: the snippet is not a part of {file}#{pointer} as the guide's schema has it:\n{}", serde_json::to_string_pretty(whole).unwrap());
                self.parts += 1;
            }
            (_, ["excerpt", lang, rest @ ..]) => self.excerpt(b, lang, rest, &at),
            ("json", _) => panic!("{at}: unknown guide directive {:?}", b.directive),
            (_, []) => {}
            (_, _) => panic!("{at}: unknown guide directive {:?} for a ```{} block", b.directive, b.lang),
        }
    }

    /// Checks that the block's lines appear in the generated text (see the module documentation).
    fn excerpt(&mut self, b: &Block, lang: &str, rest: &[&str], at: &str) {
        let (file, rest) = match lang {
            "rust" | "rust-service" => (None, rest),
            _ => (Some(rest[0]), &rest[1..]),
        };
        let config = self.config(rest.first().copied(), rest.get(1).copied());
        let text = match lang {
            "rust" => config.generate_rust().unwrap_or_else(|e| panic!("{at}: {e}")),
            "rust-service" => config.service(true).generate_rust().unwrap_or_else(|e| panic!("{at}: {e}")),
            "python" | "typescript" => {
                let files = if lang == "python" { config.generate_python() } else { config.generate_typescript() }.unwrap_or_else(|e| panic!("{at}: {e}"));
                let file = file.unwrap();
                files.into_iter().find(|(n, _)| n == file).unwrap_or_else(|| panic!("{at}: the generated {lang} has no {file}")).1
            }
            _ => panic!("{at}: no excerpts of {lang}"),
        };
        let lines = |t: &str| -> Vec<String> { t.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect() };
        let shown: Vec<String> = lines(&b.text);
        let mut expected: Vec<&str> = vec!["..."];
        expected.extend(shown.iter().map(String::as_str));
        expected.push("...");
        let generated = lines(&text);
        let generated: Vec<&str> = generated.iter().map(String::as_str).collect();
        assert!(matches(&expected, &generated), "{at}: the excerpt is not in the generated {lang}{}:\n{}", file.map(|f| format!(" ({f})")).unwrap_or_default(), b.text);
        self.excerpts += 1;
    }

    /// Runs the block's `openagents-codegen` commands and compares their output.
    fn console(&mut self, b: &Block, code: i32) {
        let mut commands: Vec<(usize, &str, Vec<&str>)> = Vec::new();
        for (i, line) in b.text.lines().enumerate() {
            match line.strip_prefix("$ ") {
                Some(command) => commands.push((b.line + 1 + i, command, Vec::new())),
                None => commands.last_mut().unwrap_or_else(|| panic!("codegen/README.md:{}: output before any `$` line", b.line)).2.push(line),
            }
        }
        for (line, command, expected) in commands {
            let at = format!("codegen/README.md:{line}");
            let words: Vec<&str> = command.split_whitespace().collect();
            if words[0] != "openagents-codegen" {
                continue;
            }
            let out = Command::new(BIN).args(&words[1..]).current_dir(&self.root).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            let actual: Vec<&str> = text.trim_end().lines().collect();
            let mut expected = expected;
            while expected.last() == Some(&"") {
                expected.pop();
            }
            assert!(matches(&expected, &actual), "{at}: `{command}` printed:\n{text}\nthe guide shows:\n{}", expected.join("\n"));
            assert_eq!(out.status.code(), Some(code), "{at}: `{command}` exit status (the guide says {code}); it printed:\n{text}");
            if words[1] == "check" {
                self.refusals_through_the_library(&words[2..], &expected, &at);
            }
            self.ran.push(command.to_owned());
        }
    }

    /// The refusals a `check` shows (`FILE#POINTER: keyword `K`: …`) are the library's, in order.
    fn refusals_through_the_library(&self, args: &[&str], shown: &[&str], at: &str) {
        let flag = |name: &str| args.iter().position(|a| *a == name).map(|i| args[i + 1]);
        let shown: Vec<(String, String, String)> = shown
            .iter()
            .filter_map(|l| {
                let l = l.strip_prefix("openagents-codegen: ").unwrap_or(l);
                let (place, rest) = l.split_once(": keyword `")?;
                let (file, pointer) = place.split_once('#')?;
                Some((file.to_owned(), pointer.to_owned(), rest.split_once('`')?.0.to_owned()))
            })
            .collect();
        match self.config(flag("--schema"), flag("--methods")).load() {
            Ok(_) => assert!(shown.is_empty(), "{at}: the guide shows refusals, the library refuses nothing"),
            Err(refusals) => {
                let found: Vec<(String, String, String)> = refusals.iter().map(|e| (e.file.clone(), e.pointer.clone(), e.keyword.clone())).collect();
                assert_eq!(found, shown, "{at}: the library's refusals (file, pointer, keyword) against the guide's");
            }
        }
    }

    /// The commands table against `--help`.
    fn commands(&mut self, line: usize, rows: &[String]) {
        let at = format!("codegen/README.md:{line}");
        let help = |args: &[&str]| -> String {
            let out = Command::new(BIN).args(args).output().unwrap();
            assert!(out.status.success(), "{at}: `openagents-codegen {}` failed", args.join(" "));
            String::from_utf8(out.stdout).unwrap()
        };
        let flags = |text: &str| -> Vec<String> {
            let mut f: Vec<String> = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .filter(|w| w.starts_with("--") && w.len() > 2 && *w != "--help" && *w != "--version")
                .map(str::to_owned)
                .collect();
            f.sort();
            f.dedup();
            f
        };
        let top = help(&["--help"]);
        let listed: Vec<String> = top
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        let mut in_table = Vec::new();
        for row in rows.iter().skip(2) {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let name = cells[0].trim_matches('`').split_whitespace().next().unwrap().to_owned();
            let own = help(&[&name, "--help"]);
            assert_eq!(flags(cells[2]), flags(&own), "{at}: the options of `{name}` in the table against its --help");
            for default in cells[2].split("(default `").skip(1).filter_map(|d| d.split_once('`')).map(|(d, _)| d) {
                assert!(own.contains(&format!("[default: {default}]")), "{at}: `{name} --help` gives no default `{default}`:\n{own}");
            }
            in_table.push(name);
        }
        let (mut a, mut b) = (listed.clone(), in_table.clone());
        a.sort();
        b.sort();
        assert_eq!(b, a, "{at}: the commands in the table against `openagents-codegen --help`");
        self.ran.push("--help".to_owned());
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[test]
fn the_guide_is_what_the_generator_does() {
    let mut project = Project::new();
    let steps = steps(GUIDE);
    for step in &steps {
        match step {
            Step::Block(b) => project.block(b),
            Step::Commands { line, rows } => project.commands(*line, rows),
        }
    }
    // The script ran what the guide is about, so a guide that lost its blocks (or a parser that
    // stopped finding them) fails here rather than passing on nothing.
    assert_eq!(project.schema_files, 3, "the guide's example is three schema files");
    assert!(project.excerpts >= 6, "excerpts checked: {}", project.excerpts);
    assert!(project.parts >= 6, "snippets checked against the schema: {}", project.parts);
    for command in ["check", "check --schema scratch", "rust --out notes.rs", "python --out-dir notes_types", "typescript --out-dir src/generated", "freeze 1.0.0", "gate", "compat", "digest", "openrpc --out notes.openrpc.json", "--help"] {
        assert!(project.ran.iter().any(|r| r.trim_start_matches("openagents-codegen ") == command), "the guide no longer runs `{command}`: {:?}", project.ran);
    }
}

#[test]
fn the_guide_script_can_tell_a_difference() {
    assert!(matches(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(matches(&["abc…"], &["abcdef"]));
    assert!(!matches(&["a"], &["b"]));
    assert!(!matches(&["a", "b"], &["a"]));
    assert!(!matches(&["abd…"], &["abcdef"]));
    let whole: Value = serde_json::json!({"a": [1, {"b": 2, "c": 3}], "d": 4});
    assert!(part_of(&serde_json::json!({"a": [1, {"c": 3}]}), &whole));
    assert!(!part_of(&serde_json::json!({"a": [1]}), &whole));
    assert!(!part_of(&serde_json::json!({"d": 5}), &whole));
    let script = steps("<!-- guide: exit 1 -->\n```console\n$ openagents-codegen gate\n```\n```json\n{}\n```\n");
    assert!(matches!(&script[..], [Step::Block(a), Step::Block(b)] if a.directive.as_deref() == Some("exit 1") && b.directive.is_none() && b.lang == "json"));
}
