//! `RawObject`, the default type of a free-form object in generated Rust: made from what a user
//! has to send, read back into what they want, and given the map's schema for schemars.

use openagents_rt::RawObject;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value, json};

#[derive(Serialize)]
struct Meta {
    #[serde(rename = "openagents/runner")]
    runner: &'static str,
    depth: u8,
}

#[test]
fn a_struct_or_a_json_object_becomes_its_text_and_reads_back() {
    let raw = RawObject::from_serialize(&Meta { runner: "echo", depth: 2 }).expect("a struct of named members is an object");
    assert_eq!(raw.get(), r#"{"openagents/runner":"echo","depth":2}"#);
    assert_eq!(raw.parse::<Value>().expect("reads"), json!({"openagents/runner": "echo", "depth": 2}));
    let from_json = RawObject::from_serialize(&json!({"depth": 2, "openagents/runner": "echo"})).expect("an object");
    // Equal as values, whatever the order of the members in the text.
    assert_eq!(raw, from_json);
    let map: Map<String, Value> = raw.to_map().expect("a map");
    assert_eq!(RawObject::from_map(&map).expect("written"), raw);
}

#[test]
fn what_is_not_one_object_is_refused() {
    for not_an_object in [json!([1, 2]), json!("text"), json!(7), json!(null), json!(true)] {
        let e = RawObject::from_serialize(&not_an_object).expect_err("not an object");
        assert!(e.to_string().contains("expected an object"), "{not_an_object}: {e}");
    }
}

/// A map that writes the same key twice, as a hand-written `Serialize` can.
struct Twice;

impl Serialize for Twice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("a", &1)?;
        m.serialize_entry("a", &2)?;
        m.end()
    }
}

#[test]
fn a_key_given_twice_is_refused_as_decoding_refuses_it() {
    let e = RawObject::from_serialize(&Twice).expect_err("a key twice");
    assert!(e.to_string().contains("duplicate") || e.to_string().contains("twice"), "{e}");
    let nested = json!({"outer": Value::Null});
    let text = serde_json::to_string(&nested).expect("text").replace("null", r#"{"b":1,"b":2}"#);
    let decoded = serde_json::from_str::<RawObject>(&text).expect_err("a key twice, nested");
    assert!(decoded.to_string().contains("duplicate") || decoded.to_string().contains("twice"), "{decoded}");
}

#[test]
fn its_schemars_schema_is_the_maps() {
    assert_eq!(schemars::schema_for!(RawObject), schemars::schema_for!(Map<String, Value>));
    let schema = serde_json::to_value(schemars::schema_for!(RawObject)).expect("JSON");
    assert_eq!(schema.get("type"), Some(&json!("object")));
}

#[derive(Serialize)]
struct Holder {
    name: &'static str,
    meta: RawObject,
}

#[test]
fn serde_json_writes_the_text_as_it_came_and_other_formats_get_the_members() {
    let meta = RawObject::try_from(r#"{ "b" : [1, 2.50],"a":{"c":true} }"#.to_owned()).expect("an object");
    let holder = Holder { name: "x", meta };
    // serde_json: the text as it arrived, and the same value through `to_value`.
    assert_eq!(serde_json::to_string(&holder).expect("JSON"), r#"{"name":"x","meta":{ "b" : [1, 2.50],"a":{"c":true} }}"#);
    assert_eq!(serde_json::to_value(&holder).expect("a value"), json!({"name": "x", "meta": {"b": [1, 2.5], "a": {"c": true}}}));
    // TOML: the members, as a table, not serde_json's private raw-value struct.
    let text = toml::to_string(&holder).expect("TOML");
    let back: toml::Value = toml::from_str(&text).expect("reads back");
    assert_eq!(back["meta"]["a"]["c"].as_bool(), Some(true), "{text}");
    assert_eq!(back["meta"]["b"][1].as_float(), Some(2.5), "{text}");
    assert!(!text.contains("serde_json"), "{text}");
}
