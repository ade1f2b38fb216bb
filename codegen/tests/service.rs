//! The `service` option of the Rust emitter: off, the generated code names nothing of
//! `openagents-rpc`; on, the service module of a method union and of `x-side` sides (a snapshot,
//! compiled by examples/kv, which generates its own schema's with it); and what it refuses.

use std::path::{Path, PathBuf};

use openagents_codegen::Config;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A schema file written to a fresh folder, for `Config::schema_dir`.
fn schema_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oa-service-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp folder");
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, text).expect("write");
    path
}

/// The generated `pub mod service { … }`, through its closing brace (the first at the start of
/// a line).
fn service_part(code: &str) -> String {
    let start = code.find("/// Typed service traits").expect("a service module");
    let rest = &code[start..];
    let end = rest.find("\n}\n").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

#[test]
fn without_the_option_nothing_names_openagents_rpc() {
    let mut schemas: Vec<PathBuf> = vec![manifest().join("../schema"), manifest().join("../tests/third-party-schemas/acp-v1.schema.json"), manifest().join("../examples/kv/schema")];
    let fixtures = manifest().join("tests/fixtures");
    schemas.extend(std::fs::read_dir(&fixtures).expect("fixtures").flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")));
    for schema in schemas {
        let code = Config::new().schema_dir(&schema).generate_rust().unwrap_or_else(|e| panic!("{}: {e}", schema.display()));
        assert!(!code.contains("openagents_rpc") && !code.contains("pub mod service"), "{} names openagents_rpc without the option", schema.display());
        let on = Config::new().schema_dir(&schema).service(true).generate_rust().unwrap_or_else(|e| panic!("{}: {e}", schema.display()));
        let has_methods = code.contains("pub enum Method ") || code.contains("_side {");
        assert_eq!(on.contains("pub mod service"), has_methods, "{}: a service module exactly when there are methods", schema.display());
    }
}

#[test]
fn the_service_module_of_a_method_union() {
    let code = Config::new().schema_dir(manifest().join("tests/fixtures/methods.json")).runtime("::openagents_rt").service(true).generate_rust().expect("generates");
    insta::assert_snapshot!("service_methods", service_part(&code));
}

#[test]
fn the_service_modules_of_sides_and_the_error_helpers() {
    let code = Config::new().schema_dir(manifest().join("../examples/kv/schema")).runtime("::openagents_rt").rpc_crate("::rpc").generate_rust().expect("generates");
    let part = service_part(&code);
    assert!(part.contains("::rpc::") && !part.contains("::openagents_rpc::"), "the crate path is the option's");
    insta::assert_snapshot!("service_kv", part);
}

#[test]
fn what_a_service_cannot_be_made_of_is_refused_naming_it() {
    let cases = [
        (
            "clash",
            r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"Client": {"type": "object"}}, "oneOf": [{"type": "object", "required": ["method"], "properties": {"method": {"const": "a"}, "params": {"$ref": "#/$defs/Client"}}, "x-result": {}}]}"##,
            ("/$defs/Client", "the generated service module defines `Client`"),
        ),
        (
            "unnamed",
            r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "oneOf": [{"type": "object", "required": ["method"], "properties": {"method": {"const": "a"}, "params": {"type": "string"}}, "x-result": {}}]}"#,
            ("/oneOf/0", "a service needs a named params type for `a`"),
        ),
    ];
    for (name, schema, (pointer, says)) in cases {
        let path = schema_file(name, schema);
        assert!(Config::new().schema_dir(&path).generate_rust().is_ok(), "{name}: fine without the option");
        let e = Config::new().schema_dir(&path).service(true).generate_rust().expect_err(name);
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), (pointer, "service"), "{name}: {e}");
        assert!(e.to_string().contains(says) && e.file.ends_with(&format!("{name}.json")), "{name}: {e}");
    }
}
