//! The `openagents-codegen` command line: `--help` and `--version` everywhere, bad arguments
//! refused with exit 2, and a real command still answering.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Every subcommand, in the order the top-level help lists them.
const SUBCOMMANDS: [&str; 10] = ["rust", "bundle", "check", "digest", "openrpc", "compat", "gate", "freeze", "typescript", "python"];

fn codegen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_openagents-codegen")).args(args).output().expect("openagents-codegen runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schema")
}

#[test]
fn help_lists_every_subcommand() {
    let out = codegen(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = stdout(&out);
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(listed, SUBCOMMANDS, "{help}");
}

#[test]
fn help_and_version_exit_0_on_the_binary_and_every_subcommand() {
    let version = env!("CARGO_PKG_VERSION");
    for command in [None].into_iter().chain(SUBCOMMANDS.map(Some)) {
        let args = |flag| command.into_iter().chain([flag]).collect::<Vec<_>>();
        let name = command.unwrap_or("(none)");
        for flag in ["--help", "-h"] {
            let out = codegen(&args(flag));
            assert_eq!(out.status.code(), Some(0), "{name} {flag}: {}", stderr(&out));
            let help = stdout(&out);
            assert!(help.contains("Usage: openagents-codegen"), "{name} {flag}: {help}");
            if let Some(command) = command {
                assert!(help.contains(&format!("Usage: openagents-codegen {command}")), "{name} {flag}: {help}");
            }
        }
        for flag in ["--version", "-V"] {
            let out = codegen(&args(flag));
            assert_eq!(out.status.code(), Some(0), "{name} {flag}: {}", stderr(&out));
            let line = stdout(&out);
            assert!(line.starts_with("openagents-codegen"), "{name} {flag}: {line}");
            assert!(line.ends_with(&format!(" {version}\n")), "{name} {flag}: `{line}` is not version {version}");
        }
    }
}

#[test]
fn subcommand_help_says_what_each_option_means() {
    let out = codegen(&["rust", "--help"]);
    let help = stdout(&out);
    for option in ["--schema <PATH>", "--runtime <PATH>", "--out <FILE>"] {
        let line = help.lines().find(|l| l.trim_start().starts_with(option)).unwrap_or_else(|| panic!("no {option}: {help}"));
        assert!(line.trim_start().len() > option.len() + 10, "{option} is not described: {line}");
    }
    let help = stdout(&codegen(&["compat", "--help"]));
    assert!(help.contains("[OLD] [NEW]") && help.contains("--schema <DIR>"), "{help}");
    let help = stdout(&codegen(&["freeze", "--help"]));
    assert!(help.contains("<VERSION>") && help.contains("--force"), "{help}");
}

#[test]
fn an_unknown_argument_exits_2_naming_it() {
    for args in [&["--bogus"][..], &["check", "--bogus"], &["digest", "--bogus"], &["compat", "--bogus"], &["typescript", "--out-dir", "x", "--bogus"]] {
        let out = codegen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("'--bogus'"), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = codegen(&["bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("'bogus'"), "{}", stderr(&out));
}

#[test]
fn missing_or_malformed_arguments_exit_2() {
    for args in [&[][..], &["python"], &["typescript"], &["freeze"], &["compat", "only-old"], &["check", "--schema"], &["digest", "extra"]] {
        let out = codegen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn digest_prints_the_schema_digest() {
    let schema = schema_dir();
    let out = codegen(&["digest", "--schema", schema.to_str().expect("a UTF-8 path")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expected = openagents_codegen::Config::new().schema_dir(&schema).digest().expect("the schema loads");
    assert_eq!(stdout(&out), format!("{expected}\n"));
}

#[test]
fn check_loads_the_schema() {
    let schema = schema_dir();
    let out = codegen(&["check", "--schema", schema.to_str().expect("a UTF-8 path")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, space) = openagents_codegen::Config::new().schema_dir(&schema).load().expect("the schema loads");
    let count = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let expected = format!("{}, {}, {}: ok\n", count(space.types.len(), "type", "types"), count(space.roots.len(), "root", "roots"), count(space.constants.len(), "constant", "constants"));
    assert_eq!(stdout(&out), expected);
}

#[test]
fn check_notes_what_one_language_cannot_generate() {
    // A backreference: Rust and TypeScript generate it, Python's `re` has no exact form for it.
    let dir = std::env::temp_dir().join(format!("openagents-codegen-check-note-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let file = dir.join("re.schema.json");
    std::fs::write(&file, r#"{"title": "After", "type": "string", "pattern": "(?<=a)b"}"#).expect("writes");
    let out = codegen(&["check", "--schema", file.to_str().expect("a UTF-8 path")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "1 type, 1 root, 0 constants: ok, but `python` cannot generate it (see the note)\n");
    let note = stderr(&out);
    assert!(note.starts_with("note: `openagents-codegen python` refuses this schema: "), "{note}");
    assert!(note.contains("keyword `pattern`") && note.contains("lookbehind"), "{note}");
    let python = codegen(&["python", "--schema", file.to_str().expect("a UTF-8 path"), "--out-dir", dir.join("py").to_str().expect("a UTF-8 path")]);
    assert_eq!(python.status.code(), Some(1), "the note says what `python` does");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_runtime_modules_are_options_of_the_python_and_typescript_commands() {
    let dir = std::env::temp_dir().join(format!("openagents-codegen-runtime-{}", std::process::id()));
    let schema = schema_dir().display().to_string();
    let py = dir.join("py");
    let out = codegen(&["python", "--schema", &schema, "--out-dir", py.to_str().expect("utf-8"), "--runtime", "mypkg.support.rt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let models = std::fs::read_to_string(py.join("models.py")).expect("models.py");
    assert!(models.contains("\nfrom mypkg.support import rt as _rt\n") && !models.contains("from openagents import _rt"), "the runtime import is the option's");
    // The default is the installed package's runtime.
    let out = codegen(&["python", "--schema", &schema, "--out-dir", py.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(py.join("models.py")).expect("models.py").contains("\nfrom openagents import _rt\n"));
    let out = codegen(&["python", "--schema", &schema, "--out-dir", py.to_str().expect("utf-8"), "--runtime", "my-pkg.rt"]);
    assert!(!out.status.success() && stderr(&out).contains("my-pkg.rt"), "a runtime that is no module path is refused: {}", stderr(&out));
    let ts = dir.join("ts");
    let out = codegen(&["typescript", "--schema", &schema, "--out-dir", ts.to_str().expect("utf-8"), "--runtime", "@acme/rpc/rt", "--error-base", "@acme/rpc/error"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let validators = std::fs::read_to_string(ts.join("validators.ts")).expect("validators.ts");
    assert!(validators.contains("from \"@acme/rpc/rt\"") && !validators.contains("../rt.js"), "validators import the option's runtime");
    let errors = std::fs::read_to_string(ts.join("errors.ts")).expect("errors.ts");
    assert!(errors.contains("\"@acme/rpc/error\"") && !errors.contains("../error.js"), "errors import the option's base classes");
    let _ = std::fs::remove_dir_all(&dir);
}
