//! The schema digest: the SHA-256 of the bundle's canonical form, the one fingerprint of a
//! protocol version that every generated client and server can carry and compare.
//!
//! The canonical form is written here, by hand, so that it does not depend on how a
//! `serde_json::Map` happens to be ordered (the generator enables serde_json's `preserve_order`
//! feature, other crates in the workspace do not):
//!
//! - object keys sorted by their UTF-8 bytes (the same as Unicode code point order), each key
//!   once;
//! - no whitespace at all between tokens;
//! - strings escaped exactly as `serde_json` escapes them (`"`, `\`, and control characters;
//!   everything else as UTF-8);
//! - numbers written as `serde_json` writes them (integers as integers, other numbers in their
//!   shortest round-trip form).
//!
//! `sha256(canonical(bundle))` in lowercase hex is the digest `openagents schema --digest`
//! prints and the generated code embeds as `SCHEMA_DIGEST`.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical text of a JSON value: sorted keys, no insignificant whitespace.
pub fn canonical(value: &Value) -> String {
    let mut out = String::with_capacity(4096);
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json's own string escaping: one code path for every string, keys included.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\"")));
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// The digest of a bundle: the lowercase hex SHA-256 of its canonical form.
pub fn digest(bundle: &Value) -> String {
    sha256_hex(canonical(bundle).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(r#"{ "b": [1, 2.5, "x\n"], "a": {"z": null, "é": true, "A": false} }"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"A":false,"é":true,"z":null},"b":[1,2.5,"x\n"]}"#).unwrap();
        assert_eq!(canonical(&a), r#"{"a":{"A":false,"z":null,"é":true},"b":[1,2.5,"x\n"]}"#);
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(digest(&a), digest(&b));
    }

    #[test]
    fn sha256_of_known_inputs() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
