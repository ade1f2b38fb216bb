//! Numbers as every reading path of the runtime reads them: each the correctly rounded (nearest)
//! double of its text, however the build's serde_json would round on its own, and an integer
//! held as an `i64` only when it is the integer the text wrote.
//!
//! `cargo test -p openagents-rt` builds serde_json with no feature but the ones this crate asks
//! for (no `jsonschema` in the graph to turn on `float_roundtrip`), which is the build a user's
//! crate gets from `serde_json = "1"` beside `openagents-rt`: the build these tests must hold in.

use openagents_rt::{
    DocumentError, Early, Path, RawObject, SchemaCheck, Validate, Violation, Wire, from_buffered,
};
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// A generated type for `{"value": {"type": "number", "maximum": 100}, "ratio": {"type":
/// "number", "exclusiveMaximum": 1}, "count": {"type": "integer"}}`, written as the generator
/// writes it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Reading {
    value: Option<f64>,
    ratio: Option<f64>,
    count: Option<i64>,
}

impl Wire for Reading {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        openagents_rt::decode_in_slot(d)
    }
    fn decode_into<'de, D: Deserializer<'de>>(d: D, place: &mut Option<Self>) -> Result<(), D::Error> {
        struct V<'a>(&'a mut Option<Reading>);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a `Reading` object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                let (mut value, mut ratio, mut count) = (None, None, None);
                while let Some(key) = map.next_key::<openagents_rt::Key<'de>>()? {
                    match key.as_str() {
                        "value" if value.is_some() => return Err(openagents_rt::duplicate("value")),
                        "value" => map.next_value_seed(openagents_rt::IntoSeed(&mut value))?,
                        "ratio" if ratio.is_some() => return Err(openagents_rt::duplicate("ratio")),
                        "ratio" => map.next_value_seed(openagents_rt::IntoSeed(&mut ratio))?,
                        "count" if count.is_some() => return Err(openagents_rt::duplicate("count")),
                        "count" => map.next_value_seed(openagents_rt::IntoSeed(&mut count))?,
                        _ => {
                            map.next_value::<openagents_rt::Skip>()?;
                        }
                    }
                }
                *self.0 = Some(Reading { value, ratio, count });
                Ok(())
            }
        }
        d.deserialize_map(V(place))
    }
}

impl<'de> serde::Deserialize<'de> for Reading {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <Self as Wire>::decode(d)
    }
}

impl Validate for Reading {
    fn validate_at(&self, path: &Path<'_>, out: &mut Vec<Violation>) {
        if let Some(v) = self.value
            && v > 100f64
        {
            openagents_rt::bound_violation(out, &path.key("value"), "maximum", v, 100f64);
        }
        if let Some(v) = self.ratio
            && v >= 1f64
        {
            openagents_rt::bound_violation(out, &path.key("ratio"), "exclusiveMaximum", v, 1f64);
        }
    }
}

impl SchemaCheck for Reading {
    fn check_value(value: &Value, path: &Path<'_>, out: &mut Vec<Violation>) {
        let Some(obj) = value.as_object() else {
            openagents_rt::type_violation(out, path, "object", value);
            return;
        };
        for (name, integer) in [("value", false), ("ratio", false), ("count", true)] {
            let Some(v) = obj.get(name) else { continue };
            let p = path.key(name);
            let f = match v {
                Value::Number(n) if !integer || openagents_rt::is_integer(n) => n.as_f64().unwrap_or(f64::NAN),
                _ => {
                    openagents_rt::type_violation(out, &p, if integer { "integer" } else { "number" }, v);
                    continue;
                }
            };
            if name == "value" && f > 100f64 {
                openagents_rt::bound_violation(out, &p, "maximum", f, 100f64);
            }
            if name == "ratio" && f >= 1f64 {
                openagents_rt::bound_violation(out, &p, "exclusiveMaximum", f, 1f64);
            }
        }
    }
}

/// The nearest double to `text`: the standard library rounds correctly.
fn nearest(text: &str) -> f64 {
    text.parse().expect("a number")
}

/// A number the runtime's own reader leaves to serde_json (longer than it reads itself), so that
/// a document holding it is read by serde_json from its start.
fn long_number() -> String {
    format!("1.{}", "0".repeat(300))
}

/// Reads every member of an object as a tagged union keeps the members before its tag, then
/// reads each kept one back as `f64`.
struct Kept(Vec<f64>);

impl Wire for Kept {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <Kept as serde::Deserialize>::deserialize(d)
    }
}

impl<'de> serde::Deserialize<'de> for Kept {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Kept;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kept, A::Error> {
                let mut early = Early::default();
                while let Some(key) = map.next_key::<openagents_rt::Key<'de>>()? {
                    early.keep(&mut map, key)?;
                }
                early.into_items().into_iter().map(|(_, v)| from_buffered::<f64, A::Error>(v)).collect::<Result<_, _>>().map(Kept)
            }
        }
        d.deserialize_map(V)
    }
}

/// [`Reading`] without its checks, so that what was read can be seen however it compares.
struct Unchecked(Reading);

impl Wire for Unchecked {
    fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Reading::decode(d).map(Unchecked)
    }
}

impl Validate for Unchecked {
    fn validate_at(&self, _path: &Path<'_>, _out: &mut Vec<Violation>) {}
}

impl SchemaCheck for Unchecked {
    fn check_value(_value: &Value, _path: &Path<'_>, _out: &mut Vec<Violation>) {}
}

/// Every double the runtime reads out of `text`, one number alone, by every path it offers: its
/// own reader and serde_json, typed (`f64`, a member of a generated object) and untyped (`Value`),
/// the document entry points, free-form objects kept as text, and members kept before a tag.
fn every_reading(text: &str) -> Vec<(String, f64)> {
    let object = format!("{{\"value\":{text}}}");
    let forced = format!("{{\"pad\":{},\"value\":{text}}}", long_number());
    let mut out = Vec::new();
    let mut add = |how: &str, f: Option<f64>| out.push((how.to_owned(), f.unwrap_or_else(|| panic!("{how}: {text} is read"))));
    let value_of = |r: Result<Unchecked, DocumentError>| r.ok().and_then(|r| r.0.value);
    let no_validate = |_: &Unchecked, _: &Path<'_>, _: &mut Vec<Violation>| {};
    let no_check = |_: &Value, _: &Path<'_>, _: &mut Vec<Violation>| {};

    // The document entry points, which read with the runtime's reader, and again with
    // serde_json when the document holds what that reader leaves to it.
    for (doc, by) in [(&object, ""), (&forced, ", read by serde_json")] {
        let mut add = |how: &str, f: Option<f64>| add(&format!("{how}{by}"), f);
        add("parse_validated", value_of(openagents_rt::parse_validated::<Unchecked>(doc.as_bytes())));
        add("parse_validated_str", value_of(openagents_rt::parse_validated_str::<Unchecked>(doc)));
        add("parse_params", value_of(openagents_rt::parse_params::<Unchecked>(doc)));
        add("parse_validated_with", value_of(openagents_rt::parse_validated_with::<Unchecked>(doc.as_bytes(), no_validate, no_check)));
        add("parse_validated_bounded", openagents_rt::parse_validated_bounded::<Unchecked>(doc, 16).ok().and_then(|r| r.0.value));
        add("parse_value_exact", openagents_rt::parse_value_exact(doc.as_bytes()).ok().and_then(|v| v["value"].as_f64()));
        add("parse_value", openagents_rt::parse_value(doc.as_bytes()).ok().and_then(|v| v["value"].as_f64()));
        // A free-form object kept as text (by the runtime's reader, its text as it came; by
        // serde_json, the map as it wrote it), read back.
        let raw = openagents_rt::parse_validated_with::<RawObject>(doc.as_bytes(), |_, _, _| {}, no_check).ok();
        add("RawObject::to_map", raw.as_ref().and_then(|r| r.to_map().ok()).and_then(|m| m["value"].as_f64()));
        add("RawObject::parse", raw.as_ref().and_then(|r| r.parse::<Reading>().ok()).and_then(|r| r.value));
        // Members kept as text before a tag, read back.
        add("kept before a tag", openagents_rt::parse_validated_with::<Kept>(doc.as_bytes(), |_, _, _| {}, no_check).ok().and_then(|k| k.0.last().copied()));
    }
    add("parse_value_exact, alone", openagents_rt::parse_value_exact(text.as_bytes()).ok().and_then(|v| v.as_f64()));
    add("f64 alone", openagents_rt::parse_validated_with::<f64>(text.as_bytes(), |_, _, _| {}, no_check).ok());

    // Wire decoders driven by serde_json, and serde's own.
    let mut de = serde_json::Deserializer::from_str(text);
    add("f64 through serde_json", f64::decode(&mut de).ok());
    let mut de = serde_json::Deserializer::from_str(text);
    add("Value through serde_json", Value::decode(&mut de).ok().and_then(|v| v.as_f64()));
    let mut de = serde_json::Deserializer::from_str(&object);
    add("a member through serde_json", Reading::decode(&mut de).ok().and_then(|r| r.value));
    add("serde_json::from_str", serde_json::from_str::<Reading>(&object).ok().and_then(|r| r.value));
    add("serde_json::from_str::<f64>", serde_json::from_str::<f64>(text).ok());
    add("serde_json::from_slice::<Value>", serde_json::from_slice::<Value>(text.as_bytes()).ok().and_then(|v| v.as_f64()));
    add("kept before a tag, through serde_json", serde_json::from_str::<Kept>(&object).ok().and_then(|k| k.0.last().copied()));

    // Untyped values and what is read out of them.
    add("literal", openagents_rt::literal(text).as_f64());
    let mut map = openagents_rt::parse_value(object.as_bytes()).ok().and_then(|v| v.as_object().cloned()).expect("an object");
    add("take_required", openagents_rt::take_required::<f64>(&mut map, "value").ok());
    let made = RawObject::try_from(object.clone()).expect("an object");
    add("RawObject made from text", made.to_map().ok().and_then(|m| m["value"].as_f64()));
    let mut de = serde_json::Deserializer::from_str(&object);
    let decoded = RawObject::decode(&mut de).expect("an object");
    add("RawObject decoded through serde_json", decoded.to_map().ok().and_then(|m| m["value"].as_f64()));
    out
}

#[test]
fn a_number_just_past_a_bound_is_read_past_it_by_every_path() {
    use std::cmp::Ordering::{Greater, Less};
    for (text, bound, side) in [
        ("100.00000000000001", 100.0, Greater),
        ("1.0000000000000001e2", 100.0, Greater),
        ("10000000000000001e-14", 100.0, Greater),
        ("-100.00000000000001", -100.0, Less),
        ("0.9999999999999999", 1.0, Less),
        ("9.999999999999999e-1", 1.0, Less),
    ] {
        let want = nearest(text);
        assert_eq!(want.partial_cmp(&bound), Some(side), "{text}: the nearest double is past {bound}");
        for (how, got) in every_reading(text) {
            assert_eq!(got.to_bits(), want.to_bits(), "{how}: {text} is read as {got}, not the nearest double {want}");
        }
    }
}

#[test]
fn many_seventeen_digit_numbers_are_read_as_the_nearest_double() {
    // 17 significant digits, written three ways: where a reader that multiplies the digits as
    // a double by a power of ten rounds twice, and so goes wrong, most often.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut wrong = Vec::new();
    for i in 0..3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let digits = 10_000_000_000_000_000 + state % 90_000_000_000_000_000;
        let point = (state >> 60) as usize % 16 + 1;
        let d = digits.to_string();
        let text = match i % 3 {
            0 => format!("{}.{}", &d[..point], &d[point..]),
            1 => format!("{d}e-{}", 17 - point),
            _ => format!("-0.{d}"),
        };
        let want = nearest(&text);
        let ours = openagents_rt::parse_value_exact(text.as_bytes()).ok().and_then(|v| v.as_f64());
        let theirs = serde_json::from_str::<f64>(&text).ok();
        let typed = openagents_rt::parse_validated_with::<f64>(text.as_bytes(), |_, _, _| {}, |_, _, _| {}).ok();
        for got in [ours, theirs, typed] {
            if got.map(f64::to_bits) != Some(want.to_bits()) {
                wrong.push(format!("{text}: {got:?}, not {want}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} read wrong, the first: {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
}

#[test]
fn a_generated_bound_refuses_a_number_just_past_it_and_keeps_one_just_inside() {
    for doc in [
        r#"{"value":100.00000000000001}"#.to_owned(),
        format!(r#"{{"pad":{},"value":100.00000000000001}}"#, long_number()),
    ] {
        let Err(DocumentError::Invalid(v)) = openagents_rt::parse_validated::<Reading>(doc.as_bytes()) else {
            panic!("{doc} is refused");
        };
        assert_eq!((v[0].pointer.as_str(), v[0].keyword.as_str()), ("/value", "maximum"), "{v:?}");
        let mut out = Vec::new();
        Reading::check_value(&openagents_rt::parse_value(doc.as_bytes()).expect("JSON"), &Path::Root, &mut out);
        assert_eq!(out.len(), 1, "the untyped check refuses it too: {out:?}");
        let decoded = serde_json::from_str::<Reading>(&doc).expect("decodes");
        assert!(decoded.validate().is_err(), "decoded through serde_json, it is refused");
    }
    for doc in [r#"{"ratio":0.9999999999999999}"#.to_owned(), format!(r#"{{"pad":{},"ratio":0.9999999999999999}}"#, long_number())] {
        let read = openagents_rt::parse_validated::<Reading>(doc.as_bytes()).unwrap_or_else(|e| panic!("{doc} is valid: {e}"));
        assert!(read.ratio.is_some_and(|r| r < 1.0));
        let mut out = Vec::new();
        Reading::check_value(&openagents_rt::parse_value(doc.as_bytes()).expect("JSON"), &Path::Root, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }
}

/// What `count` decodes to from `text`, by the runtime's reader and by serde_json (the message
/// on a refusal).
fn count(text: &str) -> [Result<i64, String>; 3] {
    let doc = format!(r#"{{"count":{text}}}"#);
    let forced = format!(r#"{{"pad":{},"count":{text}}}"#, long_number());
    let message = |e: DocumentError| e.into_violations().into_iter().map(|v| format!("{} {}: {}", v.pointer, v.keyword, v.message)).collect::<Vec<_>>().join("; ");
    let ours = openagents_rt::parse_validated::<Reading>(doc.as_bytes()).map(|r| r.count.expect("count")).map_err(message);
    let theirs = openagents_rt::parse_validated::<Reading>(forced.as_bytes()).map(|r| r.count.expect("count")).map_err(message);
    let mut de = serde_json::Deserializer::from_str(text);
    let bare = i64::decode(&mut de).map_err(|e| e.to_string());
    [ours, theirs, bare]
}

#[test]
fn an_integer_past_i64_is_refused_never_rounded_into_it() {
    for text in [
        "-9223372036854775809",
        "-9223372036854775810",
        "-9223372036854776833",
        "-9223372036854776832",
        "-9223372036854775808.0",
        "-9.223372036854775808e18",
        "-9223372036854775809.0",
        "-18446744073709551616",
        "9223372036854775808",
        "9223372036854775807.0",
        "9223372036854775808.0",
        "9.3e18",
        "18446744073709551616",
        "1e300",
        "-1e300",
    ] {
        for (how, got) in ["the runtime's reader", "serde_json", "i64 alone"].into_iter().zip(count(text)) {
            let message = match got {
                Ok(n) => panic!("{how}: {text} is read as {n}"),
                Err(m) => m,
            };
            assert!(message.contains("beyond the supported range of -2^63..2^63"), "{how}: {text}: {message}");
            if how != "i64 alone" {
                assert!(message.contains("cannot be represented"), "{how}: {text}: {message}");
            }
            // Never a rounded figure that looks exact: the text as written, or none.
            for rounded in ["9223372036854775808", "9223372036854778000", "9223372036854777856", "000000000"] {
                assert!(!message.contains(rounded) || text.trim_start_matches('-') == rounded, "{how}: {text}: {message}");
            }
        }
    }
}

#[test]
fn every_integer_inside_i64_is_kept_as_written() {
    for (text, want) in [
        ("-9223372036854775808", i64::MIN),
        ("-9223372036854775807", i64::MIN + 1),
        ("9223372036854775807", i64::MAX),
        ("0", 0),
        ("-0", 0),
        ("1.0", 1),
        ("-0.0", 0),
        ("1e2", 100),
        // The doubles nearest 2^63 inside the range, written as floats.
        ("-9223372036854774784.0", -9_223_372_036_854_774_784),
        ("9223372036854774784.0", 9_223_372_036_854_774_784),
        ("9.223372036854774784e18", 9_223_372_036_854_774_784),
    ] {
        for (how, got) in ["the runtime's reader", "serde_json", "i64 alone"].into_iter().zip(count(text)) {
            assert_eq!(got, Ok(want), "{how}: {text}");
        }
    }
    assert!(count("1.5").iter().all(Result::is_err));
}

#[test]
fn the_integer_decoder_takes_a_double_only_strictly_inside_the_range() {
    // What any deserializer hands over as a double (serde_json: an integer literal past 64 bits,
    // or any float): -2^63 itself is where every integer from about -2^63 - 1024 down lands.
    let decode = |f: f64| i64::decode(IntoDeserializer::<de::value::Error>::into_deserializer(f)).map_err(|e| e.to_string());
    assert_eq!(decode(-9_223_372_036_854_774_784.0), Ok(-9_223_372_036_854_774_784));
    assert_eq!(decode(9_223_372_036_854_774_784.0), Ok(9_223_372_036_854_774_784));
    for refused in [-9_223_372_036_854_775_808.0, 9_223_372_036_854_775_808.0, -1e19, 1e19, f64::MAX, f64::MIN] {
        let e = decode(refused).expect_err("out of range");
        assert_eq!(e, "integer is beyond the supported range of -2^63..2^63", "{refused}");
    }
    assert!(decode(0.5).is_err() && decode(f64::NAN).is_err() && decode(f64::INFINITY).is_err());
    // Exact integers: an u64 is printed as it is, being exact.
    let e = i64::decode(IntoDeserializer::<de::value::Error>::into_deserializer(9_223_372_036_854_775_808_u64)).expect_err("past i64");
    assert_eq!(e.to_string(), "integer 9223372036854775808 is beyond the supported range of -2^63..2^63");
}

#[test]
fn bounds_in_messages_are_written_short() {
    let mut out = Vec::new();
    openagents_rt::bound_violation(&mut out, &Path::Root, "exclusiveMaximum", 1e-299, 1e-300);
    openagents_rt::bound_violation(&mut out, &Path::Root, "maximum", 2e300, 1e300);
    openagents_rt::bound_violation(&mut out, &Path::Root, "minimum", 0.5, 2.25);
    openagents_rt::bound_violation(&mut out, &Path::Root, "minimum", -3.0, 0.0);
    let messages: Vec<&str> = out.iter().map(|v| v.message.as_str()).collect();
    assert_eq!(messages, ["must be less than 1e-300, is 1e-299", "must be at most 1e300, is 2e300", "must be at least 2.25, is 0.5", "must be at least 0, is -3"]);
}

#[test]
fn numbers_are_equal_only_when_they_are_the_same_number() {
    let n = |t: &str| serde_json::from_str::<Value>(t).expect("JSON");
    let eq = |a: &str, b: &str| openagents_rt::json_equal(&n(a), &n(b));
    for (a, b) in [("1", "1.0"), ("-7", "-7.0"), ("9007199254740993", "9007199254740993"), ("18446744073709551615", "18446744073709551615"), ("0.5", "5e-1"), ("[1, {\"a\": 2}]", "[1.0, {\"a\": 2.0}]")] {
        assert!(eq(a, b) && eq(b, a), "{a} == {b}");
    }
    // A double is only the whole number it is: not the integer it would round from.
    for (a, b) in [("9007199254740993", "9007199254740993.0"), ("9007199254740993", "9.007199254740993e15"), ("18446744073709551615", "18446744073709551616"), ("18446744073709551615", "1.8446744073709552e19"), ("9223372036854775807", "9223372036854775808"), ("1", "1.5"), ("1", "true")] {
        assert!(!eq(a, b) && !eq(b, a), "{a} != {b}");
    }
}

#[test]
fn multiple_of_reads_both_numbers_as_the_decimals_json_writes() {
    use openagents_rt::{multiple_of, multiple_of_i64, multiple_of_number};
    // Decimal, not binary: 0.3 / 0.1 is 2.9999999999999996 in doubles, 3 in the decimals written.
    for (v, m) in [(0.3, 0.1), (0.0075, 0.0001), (4.5, 1.5), (-4.5, 1.5), (0.0, 0.7), (1e308, 1e300), (10.0, 2.0), (1.1e-5, 1.1e-6), (12_391_239_123.0, 1e-8)] {
        assert!(multiple_of(v, m), "{v} is a multiple of {m}");
    }
    for (v, m) in [(0.00751, 0.0001), (35.0, 1.5), (7.0, 2.0), (1e308, 0.123_456_789), (1e-300, 1e-299), (f64::NAN, 1.0), (f64::INFINITY, 1.0)] {
        assert!(!multiple_of(v, m), "{v} is not a multiple of {m}");
    }
    // Integers exactly, past 2^53 where doubles round: 2^62 + 1 is odd, its double is not.
    let odd = (1i64 << 62) + 1;
    assert!(!multiple_of_i64(odd, 2.0) && multiple_of(odd as f64, 2.0));
    assert!(multiple_of_i64(i64::MIN, 2.0) && multiple_of_i64(-9, 3.0) && !multiple_of_i64(10, 4.0) && multiple_of_i64(10, 0.5));
    // A whole double is the integer it holds: 2^60 is a multiple of itself, not of the
    // 1152921504606847000 its shortest decimal says.
    let big = 1_152_921_504_606_846_976_f64;
    assert!(multiple_of(big, big) && multiple_of_i64(1 << 60, big) && !multiple_of_i64(1_152_921_504_606_847_000, big));
    let json = |t: &str| serde_json::from_str::<serde_json::Number>(t).expect("a number");
    assert!(!multiple_of_number(&json("18446744073709551615"), 2.0));
    assert!(multiple_of_number(&json("18446744073709551614"), 2.0));
    assert!(multiple_of_number(&json("0.3"), 0.1) && !multiple_of_number(&json("0.31"), 0.1));
}
