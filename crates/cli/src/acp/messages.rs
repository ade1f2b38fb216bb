//! The ACP messages `openagents acp` writes, built from the types generated from ACP's published
//! schema (`openagents_protocol::acp`, from the vendored `tests/third-party-schemas/acp-v1.schema.json`),
//! and the one it reads block by block: a `session/prompt`, bounded before it is decoded.
//!
//! Everything we read goes through the generated exact decoders and validators
//! ([`rt::parse_validated_bounded`]: at most [`MAX_ACP_VALUES`] JSON values are decoded); what is
//! ours in a message is only what ACP leaves to us: the `_meta` members named `openagents/…`, a
//! tool call's `rawInput`, and an error's `data`.

use openagents_protocol::acp;
use openagents_protocol::rt::{self, BoundedError, Skip};
use serde::Serialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// `v` as a JSON value (a generated type always encodes).
pub fn value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The ACP major version we speak.
pub const ACP_PROTOCOL_VERSION: i64 = 1;

/// The most JSON values one message's params may hold. A typed decode holds each in a struct,
/// an enum or a `serde_json::Value`, so this bounds what decoding costs beyond the line itself;
/// the largest message we accept (a prompt of [`super::MAX_PROMPT_BLOCKS`] resource links with
/// annotations) holds a few tens of thousands.
pub const MAX_ACP_VALUES: usize = 65_536;

/// The permission option that approves.
pub const APPROVE_OPTION: &str = "approve";
/// The permission option that denies.
pub const DENY_OPTION: &str = "deny";

/// `v` (one of our `_meta` records, each a struct of named members) as a `_meta` object.
fn meta<T: Serialize>(v: &T) -> Option<rt::RawObject> {
    rt::RawObject::from_serialize(v).ok()
}

/// Our members of `initialize`'s `_meta`.
#[derive(Serialize)]
pub struct InitializeMeta {
    /// Our protocol's version.
    #[serde(rename = "openagents/protocolVersion")]
    pub protocol_version: String,
    /// Our schema's digest.
    #[serde(rename = "openagents/schemaDigest")]
    pub schema_digest: String,
    /// `--max-sessions`.
    #[serde(rename = "openagents/maxSessions")]
    pub max_sessions: usize,
}

/// `initialize`'s result: `session/load`, text and resource links in prompts, no MCP,
/// `session/list` and `session/close`, our extension methods named in `_meta`.
pub fn initialize_response(version: &str, ours: &InitializeMeta) -> acp::InitializeResponse {
    #[derive(Serialize)]
    struct CapabilitiesMeta {
        #[serde(rename = "openagents/extensions")]
        extensions: [&'static str; 1],
    }
    acp::InitializeResponse {
        protocol_version: ACP_PROTOCOL_VERSION,
        agent_capabilities: Some(acp::AgentCapabilities {
            load_session: Some(true),
            prompt_capabilities: Some(acp::PromptCapabilities { image: Some(false), audio: Some(false), embedded_context: Some(false), meta: None }),
            mcp_capabilities: Some(acp::McpCapabilities { http: Some(false), sse: Some(false), meta: None }),
            session_capabilities: Some(acp::SessionCapabilities {
                close: Some(acp::SessionCloseCapabilities::default()),
                list: Some(acp::SessionListCapabilities::default()),
                resume: Some(acp::SessionResumeCapabilities::default()),
                ..Default::default()
            }),
            auth: None,
            meta: meta(&CapabilitiesMeta { extensions: ["_openagents/status"] }),
        }),
        auth_methods: Some(Vec::new()),
        agent_info: Some(acp::Implementation { name: "openagents".into(), title: Some("openagents".into()), version: version.into(), meta: None }),
        meta: meta(ours),
    }
}

/// `session/new`'s result; `ignored` names the MCP servers the client sent, which we never start.
pub fn new_session_response(session_id: String, ignored: Vec<String>) -> acp::NewSessionResponse {
    #[derive(Serialize)]
    struct Ignored {
        #[serde(rename = "openagents/ignoredMcpServers")]
        ignored_mcp_servers: Vec<String>,
    }
    let meta = if ignored.is_empty() { None } else { meta(&Ignored { ignored_mcp_servers: ignored }) };
    acp::NewSessionResponse { session_id, modes: None, config_options: None, meta }
}

/// A `text` content block.
pub fn text(text: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text { annotations: None, text: text.into(), meta: None }
}

/// The user's message (a turn's task, replayed by `session/load`), as message `message_id`.
pub fn user_message(content: impl Into<String>, message_id: String) -> acp::SessionUpdate {
    acp::SessionUpdate::UserMessageChunk { content: text(content), message_id: Some(message_id), meta: None }
}

/// The agent's message (a turn's result), as message `message_id`.
pub fn message(content: impl Into<String>, message_id: String) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentMessageChunk { content: text(content), message_id: Some(message_id), meta: None }
}

/// The agent's thought (a turn's progress), as message `message_id`.
pub fn thought(content: impl Into<String>, message_id: String) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentThoughtChunk { content: text(content), message_id: Some(message_id), meta: None }
}

/// A warning notice (for clients that advertise `session.notices`).
pub fn warning(title: String) -> acp::SessionUpdate {
    acp::SessionUpdate::Notice { severity: acp::NoticeSeverity::Warning, title, description: None, meta: None }
}

/// An approval's card: a pending `other` tool call showing the whole prompt.
pub fn approval_card(tool_call_id: String, title: String, prompt: String) -> acp::SessionUpdate {
    #[derive(Serialize)]
    struct RawInput<'a> {
        prompt: &'a str,
    }
    acp::SessionUpdate::ToolCall {
        tool_call_id,
        title,
        name: None,
        kind: Some(acp::ToolKind::Other),
        status: Some(acp::ToolCallStatus::Pending),
        content: Some(vec![acp::ToolCallContent::Content { content: text(prompt.clone()), meta: None }]),
        locations: None,
        raw_input: Some(value(&RawInput { prompt: &prompt })),
        raw_output: None,
        meta: None,
    }
}

/// An approval's card closed: `completed` when approved, `failed` otherwise.
pub fn card_closed(tool_call_id: String, approved: bool) -> acp::SessionUpdate {
    let status = if approved { acp::ToolCallStatus::Completed } else { acp::ToolCallStatus::Failed };
    acp::SessionUpdate::ToolCallUpdate { tool_call_id, kind: None, status: Some(status), title: None, name: None, content: None, locations: None, raw_input: None, raw_output: None, meta: None }
}

/// `session/request_permission`'s params for the card `tool_call_id`: approve or deny, once.
pub fn permission_request(session_id: String, tool_call_id: String, title: String) -> acp::RequestPermissionRequest {
    let option = |id: &str, name: &str, kind| acp::PermissionOption { option_id: id.into(), name: name.into(), kind, meta: None };
    acp::RequestPermissionRequest {
        session_id,
        tool_call: acp::ToolCallUpdate {
            tool_call_id,
            kind: Some(acp::ToolKind::Other),
            status: Some(acp::ToolCallStatus::Pending),
            title: Some(title),
            name: None,
            content: None,
            locations: None,
            raw_input: None,
            raw_output: None,
            meta: None,
        },
        options: vec![option(APPROVE_OPTION, "Approve", acp::PermissionOptionKind::AllowOnce), option(DENY_OPTION, "Deny", acp::PermissionOptionKind::RejectOnce)],
        meta: None,
    }
}

/// Whether an answer to `session/request_permission` approves.
pub fn approves(r: &acp::RequestPermissionResponse) -> bool {
    matches!(&r.outcome, acp::RequestPermissionOutcome::Selected { option_id, .. } if option_id == APPROVE_OPTION)
}

/// `method`'s params (absent: `{}`), decoded and validated against ACP's schema.
///
/// # Errors
///
/// What is wrong, for a person: the first violation, and how many there are.
pub fn decode<T: rt::Wire + rt::Validate + rt::SchemaCheck>(text: Option<&str>) -> Result<T, (String, Vec<rt::Violation>)> {
    rt::parse_validated_bounded::<T>(text.unwrap_or("{}"), MAX_ACP_VALUES).map_err(|e| match e {
        BoundedError::TooManyValues(n) => too_many_values(n),
        BoundedError::Document(e) => document_error(e),
    })
}

/// Why params holding more than `n` JSON values are refused.
pub fn too_many_values(n: usize) -> (String, Vec<rt::Violation>) {
    (format!("more than {n} JSON values (MAX_ACP_VALUES); no ACP message needs that many"), Vec::new())
}

/// What was wrong with a document a generated decoder refused, and every violation.
pub fn document_error(e: rt::DocumentError) -> (String, Vec<rt::Violation>) {
    match e {
        rt::DocumentError::NotJson(m) => (format!("not JSON: {m}"), Vec::new()),
        rt::DocumentError::Invalid(v) => {
            let first = v.first().map(ToString::to_string).unwrap_or_default();
            let more = if v.len() > 1 { format!(" (and {} more)", v.len() - 1) } else { String::new() };
            (format!("{first}{more}"), v)
        }
    }
}

/// Why a `session/prompt` was refused.
#[derive(Debug, PartialEq)]
pub enum PromptError {
    /// More blocks than the cap (counted before anything is decoded).
    TooManyBlocks,
    /// Block `index` is valid ACP but not a kind we accept.
    Unsupported {
        /// Its place in the prompt.
        index: usize,
        /// Its `type`.
        kind: &'static str,
    },
}

/// A `session/prompt`, its blocks flattened into one task.
#[derive(Debug)]
pub struct Prompt {
    /// The session.
    pub session_id: String,
    /// Text as it is, a resource link as `[name](uri)`, blocks separated by a blank line; cut
    /// one character past the limit (the task is refused then).
    pub task: String,
}

/// Whether the `session/prompt` params `text` hold more than `max` content blocks: counted
/// without building anything, so that a prompt past the cap is refused unread.
pub fn too_many_blocks(text: &str, max: usize) -> bool {
    count_blocks(text, max) > max
}

/// A `session/prompt` decoded by ACP's generated decoder and validator: its text and
/// resource-link blocks flattened into the task, cut one character past `max_chars`.
///
/// # Errors
///
/// [`PromptError::Unsupported`] for a block of another kind.
pub fn flatten_prompt(req: acp::PromptRequest, max_chars: usize) -> Result<Prompt, PromptError> {
    let mut flat = Flatten { task: String::new(), chars: 0, blocks: 0, max_chars };
    for (index, block) in req.prompt.iter().enumerate() {
        match block {
            acp::ContentBlock::Text { text, .. } => flat.push(text),
            acp::ContentBlock::ResourceLink { uri, name, .. } => flat.push(&format!("[{name}]({uri})")),
            acp::ContentBlock::Image { .. } => return Err(PromptError::Unsupported { index, kind: "image" }),
            acp::ContentBlock::Audio { .. } => return Err(PromptError::Unsupported { index, kind: "audio" }),
            acp::ContentBlock::Resource { .. } => return Err(PromptError::Unsupported { index, kind: "resource" }),
        }
    }
    Ok(Prompt { session_id: req.session_id, task: flat.task })
}

struct Flatten {
    task: String,
    chars: usize,
    blocks: usize,
    max_chars: usize,
}

impl Flatten {
    /// Appends one block's text (after a blank line), up to one character past the limit.
    fn push(&mut self, text: &str) {
        let first = self.blocks == 0;
        self.blocks += 1;
        if self.chars > self.max_chars {
            return;
        }
        for part in [if first { "" } else { "\n\n" }, text] {
            let room = self.max_chars + 1 - self.chars;
            match part.char_indices().nth(room) {
                None => {
                    self.task.push_str(part);
                    self.chars += part.chars().count();
                }
                Some((cut, _)) => {
                    self.task.push_str(&part[..cut]);
                    self.chars += room;
                    return;
                }
            }
        }
    }
}

/// How many elements the params' `prompt` array has, counted up to `max + 1` without building
/// any (0 when the params are not an object with an array there: the decoder says why then).
fn count_blocks(params: &str, max: usize) -> usize {
    struct Params {
        blocks: usize,
        max: usize,
    }
    impl<'de> Visitor<'de> for &mut Params {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<rt::Key<'de>>()? {
                if key.as_str() == "prompt" {
                    map.next_value_seed(Blocks(&mut *self))?;
                } else {
                    map.next_value::<Skip>()?;
                }
            }
            Ok(())
        }
    }
    struct Blocks<'p>(&'p mut Params);
    impl<'de> DeserializeSeed<'de> for Blocks<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Blocks<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of content blocks")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element::<Skip>()?.is_some() {
                self.0.blocks += 1;
                if self.0.blocks > self.0.max {
                    return Err(de::Error::custom("too many blocks"));
                }
            }
            Ok(())
        }
    }
    let mut p = Params { blocks: 0, max };
    let mut de = serde_json::Deserializer::from_str(params);
    let _ = de.deserialize_map(&mut p);
    p.blocks
}

/// One encoded value of each message we write, by its `$defs` name in ACP's schema: kept equal
/// to `tests/acp-editor/vectors.json`, which the editor tests validate against the schema.
#[cfg(test)]
pub fn vectors() -> Vec<(&'static str, Value)> {
    let update = |u: acp::SessionUpdate| value(&acp::SessionNotification { session_id: "acp-1".into(), update: u, meta: None });
    let ours = InitializeMeta { protocol_version: "1.1.0".into(), schema_digest: "0".repeat(64), max_sessions: 256 };
    vec![
        ("InitializeResponse", value(&initialize_response("0.0.0", &ours))),
        ("NewSessionResponse", value(&new_session_response("acp-1".into(), Vec::new()))),
        ("CloseSessionResponse", value(&acp::CloseSessionResponse::default())),
        ("NewSessionResponse", value(&new_session_response("acp-1".into(), vec!["fs".into()]))),
        ("PromptResponse", value(&acp::PromptResponse { stop_reason: acp::StopReason::EndTurn, meta: None })),
        ("PromptResponse", value(&acp::PromptResponse { stop_reason: acp::StopReason::Cancelled, meta: None })),
        ("SessionNotification", update(message("hello", "a:result".into()))),
        ("SessionNotification", update(thought("hello", "a:progress".into()))),
        ("SessionNotification", update(approval_card("approval-1".into(), "May I?".into(), "hello".into()))),
        ("SessionNotification", update(card_closed("approval-1".into(), true))),
        ("SessionNotification", update(card_closed("approval-1".into(), false))),
        ("SessionNotification", update(warning("ignored".into()))),
        ("RequestPermissionRequest", value(&permission_request("acp-1".into(), "approval-1".into(), "May I?".into()))),
        ("CancelRequestNotification", value(&acp::CancelRequestNotification { request_id: Value::from(7), meta: None })),
        ("Error", value(&openagents_rpc::RpcError::new(-32007, "the runner failed").with_data(serde_json::json!({"code": "runner_failed", "message": "the runner failed", "retryable": true})))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why the prompt helper below refused.
    #[derive(Debug, PartialEq)]
    enum Refused {
        /// By the count or the flattening.
        Prompt(PromptError),
        /// By ACP's decoder: what, and every violation.
        Invalid(String, Vec<rt::Violation>),
    }

    /// `session/prompt` params as `openagents acp` reads them: the blocks counted first, building
    /// nothing, then ACP's generated decoder and validator, then the flattening.
    fn decode_prompt(params: Option<&str>, max_blocks: usize, max_chars: usize) -> Result<Prompt, Refused> {
        let text = params.unwrap_or("{}");
        if too_many_blocks(text, max_blocks) {
            return Err(Refused::Prompt(PromptError::TooManyBlocks));
        }
        let req: acp::PromptRequest = decode(Some(text)).map_err(|(m, v)| Refused::Invalid(m, v))?;
        flatten_prompt(req, max_chars).map_err(Refused::Prompt)
    }

    #[test]
    fn vectors_match_the_committed_file() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/acp-editor/vectors.json");
        let ours = Value::Array(vectors().into_iter().map(|(def, v)| serde_json::json!({"def": def, "value": v})).collect());
        if std::env::var_os("OPENAGENTS_WRITE_ACP_VECTORS").is_some() {
            std::fs::write(path, serde_json::to_string_pretty(&ours).unwrap() + "\n").unwrap();
        }
        let committed: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("tests/acp-editor/vectors.json exists")).expect("vectors.json is JSON");
        assert_eq!(committed, ours, "tests/acp-editor/vectors.json is out of date: rerun with OPENAGENTS_WRITE_ACP_VECTORS=1 and commit it");
    }

    #[test]
    fn every_message_we_write_is_valid_against_acps_schema() {
        let validator = |name: &str, v: &Value| acp::validate_json(name, &serde_json::to_vec(v).unwrap());
        for (def, v) in vectors() {
            if def != "Error" {
                assert_eq!(validator(def, &v), Ok(()), "{def}: {v}");
            }
        }
    }

    #[test]
    fn answers_to_a_permission_request_decode_through_acps_types() {
        let r: acp::RequestPermissionResponse = decode(Some(r#"{"outcome":{"outcome":"selected","optionId":"approve"}}"#)).unwrap();
        assert!(approves(&r));
        let r: acp::RequestPermissionResponse = decode(Some(r#"{"outcome":{"outcome":"selected","optionId":"deny"}}"#)).unwrap();
        assert!(!approves(&r));
        let r: acp::RequestPermissionResponse = decode(Some(r#"{"outcome":{"outcome":"cancelled"}}"#)).unwrap();
        assert!(!approves(&r));
        // What the schema refuses is refused, saying where.
        let (why, v) = decode::<acp::RequestPermissionResponse>(Some(r#"{"outcome":{"outcome":"selected"}}"#)).unwrap_err();
        assert!(!v.is_empty() && why.contains("/outcome"), "{why}");
    }

    #[test]
    fn a_prompt_is_counted_then_decoded_by_acps_types_then_flattened() {
        let p = decode_prompt(Some(r#"{"prompt":[{"type":"text","text":"look at"},{"type":"resource_link","uri":"file:///a","name":"a","size":3}],"sessionId":"s","_meta":{"x":[1]}}"#), 8, 100).unwrap();
        assert_eq!((p.session_id.as_str(), p.task.as_str()), ("s", "look at\n\n[a](file:///a)"));
        // At the block cap exactly: fine; one more: refused before anything is decoded, whatever
        // the blocks are.
        let blocks = |n: usize| (0..n).map(|_| r#"{"type":"text","text":"x"}"#).collect::<Vec<_>>().join(",");
        assert_eq!(decode_prompt(Some(&format!(r#"{{"sessionId":"s","prompt":[{}]}}"#, blocks(3))), 3, 100).unwrap().task, "x\n\nx\n\nx");
        assert_eq!(decode_prompt(Some(&format!(r#"{{"sessionId":"s","prompt":[{},"not even a block"]}}"#, blocks(3))), 3, 100).unwrap_err(), Refused::Prompt(PromptError::TooManyBlocks));
        // The task stops one character past the limit (code points, never inside one).
        let p = decode_prompt(Some(r#"{"sessionId":"s","prompt":[{"type":"text","text":"ééé"},{"type":"text","text":"ééé"}]}"#), 8, 4).unwrap();
        assert_eq!(p.task, "ééé\n\n");
        let p = decode_prompt(Some(r#"{"sessionId":"s","prompt":[{"type":"text","text":"éééééé"}]}"#), 8, 4).unwrap();
        assert_eq!(p.task, "ééééé");
        // Valid ACP we do not take, by block.
        let e = decode_prompt(Some(r#"{"sessionId":"s","prompt":[{"type":"text","text":"a"},{"type":"image","data":"","mimeType":"image/png"}]}"#), 8, 100).unwrap_err();
        assert_eq!(e, Refused::Prompt(PromptError::Unsupported { index: 1, kind: "image" }));
        // Invalid ACP, with the schema's pointer.
        let Err(Refused::Invalid(why, v)) = decode_prompt(Some(r#"{"sessionId":"s","prompt":[{"text":"a"}]}"#), 8, 100) else { panic!("a block without a type is invalid") };
        assert!(v.iter().any(|v| v.pointer.starts_with("/prompt/0")), "{why}: {v:?}");
        for bad in [r#"{"sessionId":"s"}"#, r#"{"prompt":[]}"#, r#"{"sessionId":"s","prompt":"text"}"#, "null", "[]", r#"{"sessionId":7,"prompt":[]}"#] {
            assert!(matches!(decode_prompt(Some(bad), 8, 100), Err(Refused::Invalid(..))), "{bad}");
        }
    }

    #[test]
    fn params_with_more_values_than_the_cap_are_refused_before_decoding() {
        let many = format!(r#"{{"cwd":"/","mcpServers":[],"_meta":{{"x":[{}]}}}}"#, vec!["0"; MAX_ACP_VALUES].join(","));
        let (why, v) = decode::<acp::NewSessionRequest>(Some(&many)).unwrap_err();
        assert!(why.contains("MAX_ACP_VALUES") && v.is_empty(), "{why}");
        let few = r#"{"cwd":"/","mcpServers":[{"name":"fs","command":"/bin/fs","args":[],"env":[]}],"_meta":{"openagents/runner":"echo"}}"#;
        let req: acp::NewSessionRequest = decode(Some(few)).unwrap();
        assert_eq!(req.meta.map(|m| m.get().to_owned()).as_deref(), Some(r#"{"openagents/runner":"echo"}"#));
    }
}
