//! Where a value that cannot be represented, or a key given twice, sits: the violation's JSON
//! pointer names it (it was always the document's root).

use openagents_rt::{DocumentError, parse_value_exact, pointer_at, skim_exact};

fn pointer_of(e: DocumentError) -> String {
    match e {
        DocumentError::Invalid(v) => {
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].message.starts_with("cannot be represented"), "{v:?}");
            v[0].pointer.clone()
        }
        other => panic!("not a violation: {other:?}"),
    }
}

#[test]
fn a_key_given_twice_is_named_where_it_sits() {
    for (text, want) in [
        (r#"{"a": 1, "a": 2}"#, "/a"),
        (r#"{"x": {"b": [1, {"c": 1, "c": 2}]}}"#, "/x/b/1/c"),
        ("{\n  \"list\": [\n    {},\n    {\"k\": 1, \"k\": 1}\n  ]\n}", "/list/1/k"),
        (r#"{"a~b/c": {"d": 1, "d": 2}}"#, "/a~0b~1c/d"),
        (r#"{"q\"uote": {"e": 1, "e": 2}}"#, "/q\"uote/e"),
    ] {
        assert_eq!(pointer_of(parse_value_exact(text.as_bytes()).expect_err(text)), want, "{text}");
        assert_eq!(pointer_of(skim_exact(text.as_bytes()).expect_err(text)), want, "{text}");
    }
}

#[test]
fn positions_map_to_the_members_and_items_on_the_way() {
    let text = "{\"a\": [10, 20, {\"b\": 30}], \"c\": \"x,y:{\"}";
    let at = |needle: &str| {
        let i = text.find(needle).expect(needle) + needle.len();
        pointer_at(text.as_bytes(), 1, i)
    };
    assert_eq!(at("10"), "/a/0");
    assert_eq!(at("20"), "/a/1");
    assert_eq!(at("30"), "/a/2/b");
    assert_eq!(at("x,y:{"), "/c");
    assert_eq!(pointer_at(text.as_bytes(), 1, 1), "");
    assert_eq!(pointer_at(text.as_bytes(), 7, 1), "", "a line past the end");
}
