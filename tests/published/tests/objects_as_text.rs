//! The published schemas generated with free-form objects kept as text (the default) against
//! the same schemas generated with `serde_json::Map` (`Config::objects_as_text(false)`): on
//! every document of the agreement corpus the typed path gives the same verdict and the same
//! violations, word for word, and a decoded `tools/call` request or `session/update`
//! notification writes out as the same JSON.

use openagents_published::corpus::{self, PROTOCOLS};
use openagents_published::{GENERATED, ValidateDocument};
use openagents_published::{acp_v1, acp_v1_maps, mcp_2026_07_28, mcp_2026_07_28_maps};
use openagents_rt as rt;

/// `text` decoded as `A` and as `B`, each written back out as a JSON value.
fn written<A, B>(text: &str) -> (Option<serde_json::Value>, Option<serde_json::Value>)
where
    A: rt::Wire + rt::Validate + rt::SchemaCheck + serde::Serialize,
    B: rt::Wire + rt::Validate + rt::SchemaCheck + serde::Serialize,
{
    let a = rt::parse_validated::<A>(text.as_bytes()).ok();
    let b = rt::parse_validated::<B>(text.as_bytes()).ok();
    let out = |v: Result<serde_json::Value, serde_json::Error>| v.expect("a decoded value writes out");
    (a.map(|a| out(serde_json::to_value(a))), b.map(|b| out(serde_json::to_value(b))))
}

#[test]
fn objects_kept_as_text_give_the_verdicts_maps_give() {
    let pairs: [(&str, ValidateDocument); 2] = [
        ("acp-v1", acp_v1_maps::validate_document),
        ("mcp-2026-07-28", mcp_2026_07_28_maps::validate_document),
    ];
    for (name, as_maps) in pairs {
        let (protocol, g) = PROTOCOLS
            .iter()
            .zip(GENERATED.iter())
            .find(|(p, _)| p.name == name)
            .expect("the protocol is in the corpus");
        let c = corpus::build(*protocol);
        let (mut accepted, mut refused, mut written_alike) = (0, 0, 0);
        for doc in &c.docs {
            let ty = g.type_of(&doc.def).expect("a generated type");
            let as_map = as_maps(ty, doc.text.as_bytes());
            let kept = (g.validate_document)(ty, doc.text.as_bytes());
            match &as_map {
                Some(Ok(())) => accepted += 1,
                _ => refused += 1,
            }
            assert_eq!(kept, as_map, "{name} {ty} ({}): {}", doc.origin, doc.text);
            let (a, b) = match (name, ty) {
                ("mcp-2026-07-28", "CallToolRequest") => written::<
                    mcp_2026_07_28_maps::CallToolRequest,
                    mcp_2026_07_28::CallToolRequest,
                >(&doc.text),
                ("acp-v1", "SessionNotification") => {
                    written::<acp_v1_maps::SessionNotification, acp_v1::SessionNotification>(
                        &doc.text,
                    )
                }
                _ => continue,
            };
            assert_eq!(a, b, "{name} {ty} ({}) writes out otherwise", doc.origin);
            written_alike += usize::from(a.is_some());
        }
        assert!(accepted > 100 && refused > 100, "{name}: {accepted} accepted, {refused} refused");
        assert!(written_alike > 0, "{name}: no document of the benchmark types was accepted");
    }
}

/// A `session/update` notification whose update carries `_meta` nested `depth` objects deep,
/// before or after the union's tag (`sessionUpdate`).
fn update_with_meta(depth: usize, before_tag: bool) -> String {
    let meta = format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth));
    let (tag, content) = (r#""sessionUpdate":"agent_message_chunk""#, r#""content":{"type":"text","text":"hi"}"#);
    let update = if before_tag {
        format!("{{\"_meta\":{meta},{tag},{content}}}")
    } else {
        format!("{{{tag},{content},\"_meta\":{meta}}}")
    };
    format!("{{\"sessionId\":\"s\",\"update\":{update}}}")
}

#[test]
fn an_object_kept_as_text_nests_as_deep_before_a_tag_as_after_it() {
    let (mut accepted, mut refused) = (0, 0);
    for depth in 118..=130 {
        let verdicts: Vec<bool> = [true, false]
            .into_iter()
            .flat_map(|before| {
                let text = update_with_meta(depth, before);
                let as_map = rt::parse_validated::<acp_v1_maps::SessionNotification>(text.as_bytes()).is_ok();
                let kept = rt::parse_validated::<acp_v1::SessionNotification>(text.as_bytes()).is_ok();
                [as_map, kept]
            })
            .collect();
        assert!(verdicts.iter().all(|v| *v == verdicts[0]), "_meta {depth} deep: {verdicts:?} (map before the tag, text before, map after, text after)");
        if verdicts[0] {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    assert!(accepted > 0 && refused > 0, "the depths straddle the limit: {accepted} accepted, {refused} refused");
}

/// `text` decoded as `T` and written back out, as a JSON value.
fn round_trip<T: rt::Wire + rt::Validate + rt::SchemaCheck + serde::Serialize>(text: &str) -> serde_json::Value {
    let decoded = rt::parse_validated::<T>(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e:?}"));
    serde_json::to_value(decoded).expect("writes out")
}

#[test]
fn an_object_named_in_defs_that_says_nothing_of_its_members_keeps_them() {
    // MCP's `MetaObject` (`_meta` on 53 types) and ACP's `NoticeCapabilities` are
    // `{"type": "object"}` in `$defs`: each member must come back out, in both forms.
    let image = r#"{"type":"image","data":"aGk=","mimeType":"image/png","_meta":{"io.example/trace":{"id":7,"tags":["a"]},"n":null}}"#;
    let expected: serde_json::Value = serde_json::from_str(image).expect("JSON");
    assert_eq!(round_trip::<mcp_2026_07_28::ImageContent>(image), expected);
    assert_eq!(round_trip::<mcp_2026_07_28_maps::ImageContent>(image), expected);
    let session = r#"{"notices":{"levels":["info"],"x":{"y":true}}}"#;
    let expected: serde_json::Value = serde_json::from_str(session).expect("JSON");
    assert_eq!(round_trip::<acp_v1::ClientSessionCapabilities>(session), expected);
    assert_eq!(round_trip::<acp_v1_maps::ClientSessionCapabilities>(session), expected);
}
