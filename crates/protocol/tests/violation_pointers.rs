//! A request that cannot be represented is refused at the member at fault, also when that member
//! came before the tag and was decoded only once the tag was read.

use openagents_protocol::validate_json;

fn pointer(json: &str) -> String {
    let v = validate_json("RpcRequest", json.as_bytes()).expect_err(json);
    assert_eq!(v.len(), 1, "{json}: {v:?}");
    assert!(v[0].message.starts_with("cannot be represented"), "{json}: {v:?}");
    v[0].pointer.clone()
}

#[test]
fn a_member_before_the_tag_is_named_not_the_tag() {
    for (json, at) in [
        (r#"{"jsonrpc":"2.0","id":1,"params":{"since":99999999999999999999},"method":"subscribe"}"#, "/params/since"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"since":99999999999999999999}}"#, "/params/since"),
        (r#"{"jsonrpc":"2.0","id":1,"params":{"since":1,"since":2},"method":"subscribe"}"#, "/params/since"),
        (r#"{"jsonrpc":"2.0","id":1,"params":{},"params":{},"method":"subscribe"}"#, "/params"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"since":1,"since":2}}"#, "/params/since"),
    ] {
        assert_eq!(pointer(json), at, "{json}");
    }
}
