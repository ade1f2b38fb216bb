//! The library's `write_*` calls, as a build script or tool uses them: files land in the folder,
//! generated files the schema no longer produces go, anything else stays, and a place that cannot
//! be written is an error naming it.

use std::path::{Path, PathBuf};

use openagents_codegen::Config;

fn acp() -> Config {
    Config::new().schema_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/third-party-schemas/acp-v1.schema.json"))
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openagents-codegen-write-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).expect("the folder").map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn write_python_and_typescript_replace_what_they_generated_and_keep_the_rest() {
    for (lang, header) in [("python", openagents_codegen::python::HEADER), ("typescript", openagents_codegen::typescript::HEADER)] {
        let dir = temp(lang);
        std::fs::write(dir.join("stale_module"), format!("{header}\nold output\n")).unwrap();
        std::fs::write(dir.join("mine.txt"), "written by hand\n").unwrap();
        let (expected, written) = match lang {
            "python" => (acp().generate_python().unwrap(), acp().write_python(&dir)),
            _ => (acp().generate_typescript().unwrap(), acp().write_typescript(&dir)),
        };
        written.unwrap_or_else(|e| panic!("{lang}: {e}"));
        let mut want: Vec<String> = expected.iter().map(|(n, _)| n.clone()).chain(["mine.txt".to_owned()]).collect();
        want.sort();
        assert_eq!(names(&dir), want, "{lang}: the generated modules and the hand-written file, not the stale module");
        for (name, text) in &expected {
            assert_eq!(&std::fs::read_to_string(dir.join(name)).unwrap(), text, "{lang}: {name} as generated");
        }
        assert_eq!(std::fs::read_to_string(dir.join("mine.txt")).unwrap(), "written by hand\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn write_rust_and_openrpc_write_one_file_and_name_a_place_they_cannot_write() {
    let dir = temp("files");
    acp().write_rust(dir.join("acp.rs")).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("acp.rs")).unwrap(), acp().generate_rust().unwrap());
    let kv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema");
    Config::new().schema_dir(&kv).write_openrpc(dir.join("openrpc.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("openrpc.json")).unwrap()).unwrap();
    assert_eq!(doc, Config::new().schema_dir(&kv).generate_openrpc().unwrap());

    let nowhere = dir.join("missing-folder/acp.rs");
    let e = acp().write_rust(&nowhere).expect_err("a missing folder");
    assert!(e.to_string().contains(&nowhere.display().to_string()) && e.to_string().contains("cannot write"), "{e}");
    let file = dir.join("acp.rs");
    let e = acp().write_python(&file).expect_err("a file where the folder should be");
    assert!(e.to_string().contains(&file.display().to_string()), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
