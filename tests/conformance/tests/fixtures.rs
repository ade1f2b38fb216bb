//! Behaviour of the code generated from each fixture schema in `codegen/tests/fixtures/` (that
//! it compiles is proved by this crate building): a few documents per fixture, valid and not,
//! through the typed path, plus the typed values they decode to.

use openagents_conformance::fixtures::*;
use openagents_rt::{self as rt, DocumentError, Validate};

/// The keywords of the violations, or `NotJson`.
fn keywords(r: Result<(), DocumentError>) -> Vec<String> {
    match r {
        Ok(()) => Vec::new(),
        Err(DocumentError::Invalid(v)) => v.into_iter().map(|v| v.keyword).collect(),
        Err(DocumentError::NotJson(m)) => vec![format!("NotJson: {m}")],
    }
}

/// Asserts `doc` is valid as `ty` through `validate`.
fn ok(validate: fn(&str, &[u8]) -> Option<Result<(), DocumentError>>, ty: &str, doc: &str) {
    let r = validate(ty, doc.as_bytes()).unwrap_or_else(|| panic!("no type `{ty}`"));
    assert!(r.is_ok(), "{ty}: {doc} must be valid: {r:?}");
}

/// Asserts `doc` is invalid as `ty`, with a violation of `keyword`.
fn bad(validate: fn(&str, &[u8]) -> Option<Result<(), DocumentError>>, ty: &str, doc: &str, keyword: &str) {
    let r = validate(ty, doc.as_bytes()).unwrap_or_else(|| panic!("no type `{ty}`"));
    let k = keywords(r);
    assert!(k.iter().any(|k| k == keyword), "{ty}: {doc} must break `{keyword}`, got {k:?}");
}

#[test]
fn every_fixture_lists_its_root_type() {
    let lists: &[(&str, &[rt::TypeInfo])] = &[
        ("Additional", additional::TYPES),
        ("Closed", closed_required::TYPES),
        ("Arrays", arrays::TYPES),
        ("Const", const_values::TYPES),
        ("Limits", x_constants::TYPES),
        ("ErrorCode", extensible_enum::TYPES),
        ("Event", extensible_union::TYPES),
        ("Lengths", lengths::TYPES),
        ("Request", methods::TYPES),
        ("Request", methods_extra::TYPES),
        ("Nullable", nullable::TYPES),
        ("Numbers", numbers::TYPES),
        ("Object2", object::TYPES),
        ("Pattern", pattern::TYPES),
        ("Tree", recursive::TYPES),
        ("Color", string_enum::TYPES),
        ("Shape", tagged_union::TYPES),
        ("Types", types::TYPES),
        ("Unique", unique_items::TYPES),
    ];
    for (root, types) in lists {
        let roots: Vec<&str> = types.iter().filter(|t| t.root).map(|t| t.name).collect();
        assert_eq!(roots, [*root]);
    }
}

#[test]
fn types_and_null() {
    let v = types::validate_document;
    let full = r#"{"text":"a","count":1,"ratio":0.5,"flag":true,"note":null,"tags":[1,"x"],"extra":{"k":[]},"anything":null}"#;
    ok(v, "Types", full);
    ok(v, "Types", r#"{"text":"a","count":2.0,"ratio":1,"flag":false,"note":"n"}"#);
    bad(v, "Types", r#"{"text":"a","count":1.5,"ratio":1,"flag":false,"note":null}"#, "type");
    bad(v, "Types", r#"{"text":1,"count":1,"ratio":1,"flag":false,"note":null}"#, "type");
    bad(v, "Types", r#"{"text":"a","count":1,"ratio":1,"flag":0,"note":null}"#, "type");
    // Null is not missing: `note` is required and may be null, but not absent.
    bad(v, "Types", r#"{"text":"a","count":1,"ratio":1,"flag":false}"#, "required");
    bad(v, "Types", r#"{"text":"a","count":1,"ratio":1,"flag":false,"note":null,"tags":{}}"#, "type");
    bad(v, "Types", r#"["text"]"#, "type");
    let t: types::Types = rt::parse_validated(full.as_bytes()).expect("valid");
    assert_eq!((t.text.as_str(), t.count, t.ratio, t.flag, t.note), ("a", 1, 0.5, true, None));
    assert_eq!(t.tags.map(|a| a.len()), Some(2));
}

#[test]
fn closed_object() {
    let v = object::validate_document;
    ok(v, "Object2", r#"{"id":"x"}"#);
    ok(v, "Object2", r#"{"id":"x","label":"y"}"#);
    bad(v, "Object2", r#"{"label":"y"}"#, "required");
    bad(v, "Object2", r#"{"id":"x","other":1}"#, "additionalProperties");
    let o: object::Object2 = rt::parse_validated(br#"{"label":"y","id":"x"}"#).expect("valid");
    assert_eq!(o, object::Object2 { id: "x".into(), label: Some("y".into()) });
    assert!(rt::parse_validated::<object::Object2>(br#"{"id":"x","id":"y"}"#).is_err(), "a duplicate key is refused");
}

#[test]
fn a_required_member_a_closed_object_does_not_declare() {
    // Given, it is an undeclared member; left out, a missing one: JSON Schema's keywords, on both
    // Rust paths (the typed decoder and the check of an untyped value).
    let v = closed_required::validate_document;
    bad(v, "Closed", r#"{"id":"x"}"#, "required");
    bad(v, "Closed", r#"{"id":"x","ghost":1}"#, "additionalProperties");
    bad(v, "Kinds", r#"{"kind":"a"}"#, "required");
    bad(v, "Kinds", r#"{"kind":"a","ghost":null}"#, "additionalProperties");
    ok(v, "Kinds", r#"{"kind":"b","ghost":1}"#);
    let check = |doc: &str, f: fn(&serde_json::Value, &rt::Path<'_>, &mut Vec<rt::Violation>)| {
        let mut out = Vec::new();
        f(&serde_json::from_str(doc).expect("JSON"), &rt::Path::Root, &mut out);
        out.into_iter().map(|v| (v.pointer, v.keyword)).collect::<Vec<_>>()
    };
    let closed = <closed_required::Closed as rt::SchemaCheck>::check_value;
    let kinds = <closed_required::Kinds as rt::SchemaCheck>::check_value;
    assert_eq!(check(r#"{"id":"x","ghost":1}"#, closed), [("/ghost".to_owned(), "additionalProperties".to_owned())]);
    assert_eq!(check(r#"{"id":"x"}"#, closed), [(String::new(), "required".to_owned())]);
    assert_eq!(check(r#"{"kind":"a","ghost":1}"#, kinds), [("/ghost".to_owned(), "additionalProperties".to_owned())]);
    let d = closed_required::validate_document("Closed", br#"{"id":"x","ghost":1}"#).expect("a type").expect_err("invalid");
    assert!(!keywords(Err(d)).iter().any(|k| k == "false"), "never keyword `false`");
}

#[test]
fn unique_items() {
    // No two elements equal as JSON values, on both Rust paths: the typed decoder (each typed
    // element compared as the JSON it is written as) and the check of an untyped value.
    let v = unique_items::validate_document;
    ok(v, "Unique", r#"{"tags":["a","b"],"scores":[1,1.5],"points":[{"x":1},{"x":1,"y":2}],"kinds":["a","b"],"anything":[1,true,"1",[1],[true],{"a":1},{"a":true}]}"#);
    ok(v, "Unique", r#"{"points":null,"loose":["a","a"]}"#);
    bad(v, "Unique", r#"{"tags":["a","b","a"]}"#, "uniqueItems");
    bad(v, "Unique", r#"{"scores":[1,1.0]}"#, "uniqueItems");
    bad(v, "Unique", r#"{"points":[{"x":1,"y":2},{"y":2,"x":1}]}"#, "uniqueItems");
    // What the typed form leaves out (an undeclared member, digits past a double's precision)
    // still tells two elements apart: the document itself is checked again.
    ok(v, "Unique", r#"{"points":[{"x":1,"z":1},{"x":1}]}"#);
    ok(v, "Unique", r#"{"scores":[9007199254740993,9007199254740992]}"#);
    bad(v, "Unique", r#"{"points":[{"x":1,"z":[1]},{"x":1,"z":[1.0]}]}"#, "uniqueItems");
    bad(v, "Unique", r#"{"kinds":["b","b"]}"#, "uniqueItems");
    bad(v, "Unique", r#"{"anything":[{"a":[1,{"b":null}]},{"a":[1.0,{"b":null}]}]}"#, "uniqueItems");
    // An integer and the double it would round to are not equal (2^53 + 1 is not 2^53).
    ok(v, "Unique", r#"{"anything":[9007199254740993,9007199254740992.0]}"#);
    bad(v, "Unique", r#"{"anything":[9007199254740992,9007199254740992.0]}"#, "uniqueItems");
    ok(v, "Mixed", r#""aa""#);
    ok(v, "Mixed", r#"["a","b"]"#);
    bad(v, "Mixed", r#"["a",1,"a"]"#, "uniqueItems");
    let check = |doc: &str| {
        let mut out = Vec::new();
        <unique_items::Unique as rt::SchemaCheck>::check_value(&serde_json::from_str(doc).expect("JSON"), &rt::Path::Root, &mut out);
        out.into_iter().map(|v| (v.pointer, v.keyword, v.message)).collect::<Vec<_>>()
    };
    let found = check(r#"{"tags":["x","y","x"]}"#);
    assert_eq!(found, [("/tags".to_owned(), "uniqueItems".to_owned(), "items 0 and 2 are equal; the items must be unique".to_owned())]);
    let typed: unique_items::Unique = rt::parse_validated(br#"{"scores":[1,2.5]}"#).expect("valid");
    let mut out = Vec::new();
    let doubled = unique_items::Unique { scores: Some(vec![2.5, 2.5]), ..typed };
    doubled.validate_at(&rt::Path::Root, &mut out);
    assert_eq!(out.iter().map(|v| (v.pointer.as_str(), v.keyword.as_str())).collect::<Vec<_>>(), [("/scores", "uniqueItems")]);
}

#[test]
fn additional_properties_schema() {
    let v = additional::validate_document;
    ok(v, "Additional", r#"{"name":"n"}"#);
    ok(v, "Additional", r#"{"name":"n","a":0,"b":7}"#);
    bad(v, "Additional", r#"{"name":"n","a":-1}"#, "minimum");
    bad(v, "Additional", r#"{"name":"n","a":"1"}"#, "type");
    let a: additional::Additional = rt::parse_validated(br#"{"name":"n","b":7,"a":1}"#).expect("valid");
    assert_eq!(a.additional.into_iter().collect::<Vec<_>>(), [("a".to_owned(), 1), ("b".to_owned(), 7)]);
}

#[test]
fn string_enum_with_docs() {
    use string_enum::Color;
    let v = string_enum::validate_document;
    ok(v, "Color", r#""light-blue""#);
    bad(v, "Color", r#""blue""#, "enum");
    bad(v, "Color", "1", "type");
    assert_eq!(Color::VALUES, ["red", "green", "light-blue"]);
    assert_eq!(rt::parse_validated::<Color>(br#""light-blue""#), Ok(Color::LightBlue));
    assert_eq!(Color::Green.to_string(), "green");
}

#[test]
fn extensible_enum_keeps_unknown_values() {
    use extensible_enum::ErrorCode;
    let v = extensible_enum::validate_document;
    ok(v, "ErrorCode", r#""busy""#);
    bad(v, "ErrorCode", r#""later""#, "enum");
    // Typed readers keep the value; validation still reports it.
    let mut de = serde_json::Deserializer::from_str(r#""later""#);
    let code = <ErrorCode as rt::Wire>::decode(&mut de).expect("an unknown value decodes");
    assert_eq!(code, ErrorCode::Unknown("later".into()));
    assert!(code.validate().is_err());
    assert_eq!((ErrorCode::Busy.retryable(), ErrorCode::Busy.rpc_code()), (true, -32001));
    assert_eq!((ErrorCode::Invalid.retryable(), ErrorCode::Invalid.rpc_code()), (false, -32602));
}

#[test]
fn const_values() {
    let v = const_values::validate_document;
    ok(v, "Const", r#"{"schema":"openagents.fixture.v1","version":2}"#);
    ok(v, "Const", r#"{"schema":"openagents.fixture.v1","version":2.0,"enabled":false}"#);
    bad(v, "Const", r#"{"schema":"openagents.fixture.v2","version":2}"#, "const");
    bad(v, "Const", r#"{"schema":"openagents.fixture.v1","version":3}"#, "const");
    bad(v, "Const", r#"{"schema":"openagents.fixture.v1","version":2,"enabled":true}"#, "const");
    // false is not 0.
    bad(v, "Const", r#"{"schema":"openagents.fixture.v1","version":2,"enabled":0}"#, "const");
}

#[test]
fn closed_tagged_union() {
    use tagged_union::Shape;
    let v = tagged_union::validate_document;
    ok(v, "Shape", r#"{"kind":"circle","radius":0.5}"#);
    ok(v, "Shape", r#"{"side":2,"kind":"square"}"#);
    bad(v, "Shape", r#"{"kind":"circle","radius":0}"#, "exclusiveMinimum");
    bad(v, "Shape", r#"{"kind":"square","side":0}"#, "minimum");
    bad(v, "Shape", r#"{"kind":"square","radius":1}"#, "required");
    bad(v, "Shape", r#"{"kind":"circle","radius":1,"side":1}"#, "additionalProperties");
    bad(v, "Shape", r#"{"kind":"triangle"}"#, "oneOf");
    bad(v, "Shape", r#"{"radius":1}"#, "required");
    let s: Shape = rt::parse_validated(br#"{"kind":"square","side":3}"#).expect("valid");
    assert_eq!(s, Shape::Square { side: 3 });
    assert_eq!((s.tag(), Shape::TAGS), ("square", &["circle", "square"][..]));
    assert_eq!(serde_json::to_value(&s).expect("serializes"), serde_json::json!({"kind": "square", "side": 3}));
}

#[test]
fn extensible_tagged_union() {
    use extensible_union::Event;
    let v = extensible_union::validate_document;
    ok(v, "Event", r#"{"type":"started","at":1}"#);
    ok(v, "Event", r#"{"type":"stopped","reason":"done","more":true}"#);
    bad(v, "Event", r#"{"type":"started","at":-1}"#, "minimum");
    bad(v, "Event", r#"{"type":"paused"}"#, "oneOf");
    let mut de = serde_json::Deserializer::from_str(r#"{"type":"paused","for":3}"#);
    let e = <Event as rt::Wire>::decode(&mut de).expect("an unknown kind decodes");
    assert!(matches!(&e, Event::Unknown(m) if m["for"] == 3));
    assert_eq!(e.tag(), "paused");
    assert!(e.validate().is_err(), "validation still refuses an unknown kind");
}

#[test]
fn nullable_one_of() {
    let v = nullable::validate_document;
    ok(v, "Nullable", r#"{"parent":null}"#);
    ok(v, "Nullable", r#"{"parent":{"id":"p"},"limit":null}"#);
    ok(v, "Nullable", r#"{"parent":null,"limit":10}"#);
    bad(v, "Nullable", r#"{}"#, "required");
    bad(v, "Nullable", r#"{"parent":{"id":""}}"#, "minLength");
    bad(v, "Nullable", r#"{"parent":null,"limit":11}"#, "maximum");
    bad(v, "Nullable", r#"{"parent":"p"}"#, "type");
    let n: nullable::Nullable = rt::parse_validated(br#"{"parent":{"id":"p"}}"#).expect("valid");
    assert_eq!(n.parent.map(|p| p.id), Some("p".to_owned()));
    assert_eq!(n.limit, None);
}

#[test]
fn recursive_ref() {
    let v = recursive::validate_document;
    ok(v, "Tree", r#"{"root":{"value":1}}"#);
    ok(v, "Tree", r#"{"root":{"value":1,"children":[{"value":2,"children":[]},{"value":3,"next":{"value":4,"next":null}}]}}"#);
    bad(v, "Tree", r#"{"root":{"value":1,"children":[{"value":-2}]}}"#, "minimum");
    bad(v, "Tree", r#"{"root":{"value":1,"next":{"value":2,"next":{"value":3,"x":0}}}}"#, "additionalProperties");
    bad(v, "Tree", r#"{"root":{"children":[]}}"#, "required");
    let t: recursive::Tree = rt::parse_validated(br#"{"root":{"value":1,"next":{"value":4}}}"#).expect("valid");
    assert_eq!(t.root.next.map(|n| n.value), Some(4));
    // Violations name the place.
    let Err(DocumentError::Invalid(violations)) =
        rt::parse_validated::<recursive::Tree>(br#"{"root":{"value":1,"children":[{"value":0},{"value":-1}]}}"#)
    else {
        panic!("must be invalid")
    };
    assert_eq!(violations[0].pointer, "/root/children/1/value");
}

#[test]
fn patterns() {
    let v = pattern::validate_document;
    ok(v, "Pattern", r#"{"id":"a1._:-z","contains_digit":"x7y","word":"école"}"#);
    bad(v, "Pattern", r#"{"id":"-a"}"#, "pattern");
    bad(v, "Pattern", r#"{"id":"a b"}"#, "pattern");
    bad(v, "Pattern", r#"{"contains_digit":"seven"}"#, "pattern");
    bad(v, "Pattern", r#"{"word":"e1"}"#, "pattern");
}

#[test]
fn lengths_count_code_points() {
    let v = lengths::validate_document;
    ok(v, "Lengths", r#""ab""#);
    ok(v, "Lengths", r#""😀😀😀😀""#);
    bad(v, "Lengths", r#""😀""#, "minLength");
    bad(v, "Lengths", r#""abcde""#, "maxLength");
    bad(v, "Lengths", r#""ééééé""#, "maxLength");
}

#[test]
fn number_bounds() {
    let v = numbers::validate_document;
    ok(v, "Numbers", r#"{"percent":0,"ratio":0.5}"#);
    ok(v, "Numbers", r#"{"percent":100.0}"#);
    bad(v, "Numbers", r#"{"percent":101}"#, "maximum");
    bad(v, "Numbers", r#"{"percent":-1}"#, "minimum");
    bad(v, "Numbers", r#"{"ratio":0}"#, "exclusiveMinimum");
    bad(v, "Numbers", r#"{"ratio":1}"#, "exclusiveMaximum");
    bad(v, "Numbers", r#"{"percent":50.5}"#, "type");
}

#[test]
fn arrays() {
    let v = arrays::validate_document;
    ok(v, "Arrays", r#"["a","bb","ccc"]"#);
    bad(v, "Arrays", r#"[]"#, "minItems");
    bad(v, "Arrays", r#"["a","b","c","d"]"#, "maxItems");
    bad(v, "Arrays", r#"["abcd"]"#, "maxLength");
    bad(v, "Arrays", r#"[1]"#, "type");
    bad(v, "Arrays", r#"{"0":"a"}"#, "type");
}

#[test]
fn a_check_lists_at_most_max_reported_violations() {
    // Five thousand bad elements: the first violations, then one that says more were found, on
    // both paths (the typed decoder's checks, and the untyped check after a decode error).
    let long = format!("[{}]", vec![r#""abcd""#; 5000].join(","));
    let mixed = format!("[{}]", vec!["1"; 5000].join(","));
    for doc in [long, mixed] {
        let Some(Err(DocumentError::Invalid(found))) = arrays::validate_document("Arrays", doc.as_bytes()) else { panic!("invalid") };
        assert_eq!(found.len(), rt::MAX_REPORTED);
        let last = found.last().expect("violations");
        assert_eq!((last.pointer.as_str(), last.keyword.as_str()), ("", "maxViolations"));
        assert!(found[..found.len() - 1].iter().all(|v| v.keyword != "maxViolations"));
        // 5000 items of the wrong kind and one `maxItems`: all counted.
        assert_eq!(found.len() - 1 + rt::unlisted(&found), 5001, "{}", last.message);
    }
}

#[test]
fn constants() {
    assert_eq!(x_constants::MAX_NAME_CHARS, 64);
    assert_eq!(x_constants::PROTOCOL, "openagents.fixture.v1");
    let v = x_constants::validate_document;
    ok(v, "Limits", &format!("{:?}", "x".repeat(x_constants::MAX_NAME_CHARS)));
    bad(v, "Limits", &format!("{:?}", "x".repeat(x_constants::MAX_NAME_CHARS + 1)), "maxLength");
}

#[test]
fn method_union() {
    use methods::{EchoParams, Method, Request};
    use rt::RpcMethod;
    let v = methods::validate_document;
    ok(v, "Request", r#"{"id":1,"method":"echo","params":{"text":"hi"}}"#);
    ok(v, "Request", r#"{"method":"ping"}"#);
    ok(v, "Request", r#"{"id":"a","method":"ping","params":null}"#);
    ok(v, "Request", r#"{"id":null,"method":"ping","params":{}}"#);
    bad(v, "Request", r#"{"method":"echo"}"#, "required");
    bad(v, "Request", r#"{"method":"echo","params":{"text":"this text is too long"}}"#, "maxLength");
    bad(v, "Request", r#"{"method":"ping","params":{"x":1}}"#, "additionalProperties");
    bad(v, "Request", r#"{"method":"sleep","params":{"ms":1}}"#, "oneOf");
    bad(v, "Request", r#"{"id":true,"method":"ping"}"#, "type");
    let r: Request = rt::parse_validated(br#"{"id":7,"method":"echo","params":{"text":"hi"}}"#).expect("valid");
    assert_eq!(r.method_name(), "echo");
    assert_eq!(r.id(), &Some(serde_json::json!(7)));
    let answer = match r.into_method() {
        Method::Echo(p) => p.text,
        Method::Ping(_) => "pong".to_owned(),
    };
    assert_eq!(answer, "hi");
    assert_eq!(Method::NAMES, ["echo", "ping"]);
    assert_eq!(<methods::methods::Echo as RpcMethod>::NAME, "echo");
    let _: <methods::methods::Echo as RpcMethod>::Params = EchoParams { text: String::new() };
    let result: <methods::methods::Ping as RpcMethod>::Result = rt::parse_validated(br#"{"pong":true}"#).expect("valid result");
    assert!(result.pong);
    assert_eq!(methods_extra::Method::NAMES, ["echo", "ping", "sleep"]);
    ok(methods_extra::validate_document, "Request", r#"{"method":"sleep","params":{"ms":1}}"#);
}
