//! The ACP v1 messages `openagents acp` reads and writes, as hand-written serde types.
//!
//! Outgoing types are closed: each is a struct or enum naming exactly the fields we send, so
//! nothing else can reach stdout. They are checked against ACP's published
//! `schema/v1/schema.json` twice: `tests/acp-editor/vectors.json` holds one encoded value per
//! type (the unit test below keeps it equal to what these types encode, and the editor tests
//! validate it against the schema's `$defs`), and the editor tests validate every message the
//! adapter writes against the per-method `$defs`.
//!
//! Incoming types read only the fields we use and ignore the rest: ACP adds capabilities and
//! fields in minor releases, and a newer client must not be refused for them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The only ACP major version we speak.
pub const ACP_PROTOCOL_VERSION: u16 = 1;

// ---------------------------------------------------------------------------------------------
// Incoming (client → agent).

/// `initialize` params (only what we read).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The version the client asks for: any integer; we answer ours.
    pub protocol_version: u64,
    /// What the client can do.
    #[serde(default)]
    pub client_capabilities: Option<ClientCapabilities>,
    /// Who the client is.
    #[serde(default)]
    pub client_info: Option<ClientInfo>,
}

/// The client capabilities we look at.
#[derive(Debug, Default, Deserialize)]
pub struct ClientCapabilities {
    /// Session capabilities (`notices`).
    #[serde(default)]
    pub session: Option<ClientSessionCapabilities>,
}

/// `clientCapabilities.session`.
#[derive(Debug, Default, Deserialize)]
pub struct ClientSessionCapabilities {
    /// `{}` when the client shows `notice` updates.
    #[serde(default)]
    pub notices: Option<Value>,
}

/// `clientInfo`.
#[derive(Debug, Deserialize)]
pub struct ClientInfo {
    /// The client's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its version.
    #[serde(default)]
    pub version: Option<String>,
}

/// `session/new` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// The absolute working folder.
    pub cwd: String,
    /// MCP servers the client would like us to launch (we cannot: a turn never names an
    /// executable). Read only for their names.
    #[serde(default)]
    pub mcp_servers: Option<Vec<Value>>,
}

/// `session/prompt` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The content blocks (tagged by `type`; read one by one, see [`PromptBlock`]).
    pub prompt: Vec<Value>,
}

/// The prompt blocks we accept (the baseline: text and resource links).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PromptBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A link to a resource the runner can read itself.
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
    },
}

/// `session/cancel` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn to cancel.
    pub session_id: String,
}

/// The client's answer to `session/request_permission`.
#[derive(Debug, Deserialize)]
pub struct RequestPermissionResponse {
    /// What the user chose.
    pub outcome: PermissionOutcome,
}

/// `RequestPermissionOutcome`.
#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PermissionOutcome {
    /// The prompt turn was cancelled.
    Cancelled,
    /// An option was chosen.
    #[serde(rename_all = "camelCase")]
    Selected {
        /// Which one.
        option_id: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Outgoing (agent → client).

/// The `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// Always [`ACP_PROTOCOL_VERSION`].
    pub protocol_version: u16,
    /// What we support.
    pub agent_capabilities: AgentCapabilities,
    /// No authentication: always empty.
    pub auth_methods: Vec<Value>,
    /// Who we are.
    pub agent_info: Implementation,
    /// Our protocol version and schema digest.
    #[serde(rename = "_meta")]
    pub meta: InitializeMeta,
}

/// `agentCapabilities`: only what we do.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// No `session/load`: the runtime keeps no transcript.
    pub load_session: bool,
    /// Text and resource links only (the baseline).
    pub prompt_capabilities: PromptCapabilities,
    /// No MCP servers of any transport.
    pub mcp_capabilities: McpCapabilities,
    /// No optional session methods.
    pub session_capabilities: Empty,
    /// Our extension methods.
    #[serde(rename = "_meta")]
    pub meta: CapabilitiesMeta,
}

/// `promptCapabilities`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Always false.
    pub image: bool,
    /// Always false.
    pub audio: bool,
    /// Always false.
    pub embedded_context: bool,
}

/// `mcpCapabilities`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpCapabilities {
    /// Always false.
    pub http: bool,
    /// Always false.
    pub sse: bool,
}

/// An empty object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Empty {}

/// `agentCapabilities._meta`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapabilitiesMeta {
    /// Extension methods we answer: `_openagents/status`.
    #[serde(rename = "openagents/extensions")]
    pub extensions: Vec<&'static str>,
}

/// `initialize` `_meta`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InitializeMeta {
    /// Our `PROTOCOL_VERSION`.
    #[serde(rename = "openagents/protocolVersion")]
    pub protocol_version: String,
    /// Our `SCHEMA_DIGEST`.
    #[serde(rename = "openagents/schemaDigest")]
    pub schema_digest: String,
}

/// `Implementation`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Implementation {
    /// `openagents`.
    pub name: String,
    /// For people.
    pub title: String,
    /// The binary's version.
    pub version: String,
}

/// The `session/new` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// Our conversation id.
    pub session_id: String,
    /// What we ignored.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<NewSessionMeta>,
}

/// `session/new` `_meta`: the MCP servers we did not launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewSessionMeta {
    /// Their names.
    #[serde(rename = "openagents/ignoredMcpServers")]
    pub ignored_mcp_servers: Vec<String>,
}

/// The `session/prompt` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Only `end_turn` or `cancelled`: every failure is a JSON-RPC error instead.
    pub stop_reason: StopReason,
}

/// The stop reasons we produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The turn completed.
    EndTurn,
    /// The client cancelled the turn.
    Cancelled,
}

/// `session/update` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session.
    pub session_id: String,
    /// What changed.
    pub update: SessionUpdate,
}

/// The session updates we send.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// The turn's result.
    #[serde(rename_all = "camelCase")]
    AgentMessageChunk {
        /// The text.
        content: TextBlock,
        /// `<assignment>:result`.
        message_id: String,
    },
    /// Progress text.
    #[serde(rename_all = "camelCase")]
    AgentThoughtChunk {
        /// The text.
        content: TextBlock,
        /// `<assignment>:progress`.
        message_id: String,
    },
    /// An approval request's card.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The approval's request id.
        tool_call_id: String,
        /// The first line of the prompt.
        title: String,
        /// Always `other`.
        kind: ToolKind,
        /// Always `pending`.
        status: ToolCallStatus,
        /// The full prompt.
        content: Vec<ToolCallContent>,
        /// `{prompt}`.
        raw_input: RawInput,
    },
    /// The card closed.
    #[serde(rename_all = "camelCase")]
    ToolCallUpdate {
        /// The approval's request id.
        tool_call_id: String,
        /// `completed` (approved) or `failed` (denied).
        status: ToolCallStatus,
    },
    /// A warning for clients that show notices.
    Notice {
        /// Always `warning`.
        severity: NoticeSeverity,
        /// What happened.
        title: String,
    },
}

/// A `text` content block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: TextTag,
    /// The text.
    pub text: String,
}

impl TextBlock {
    /// A text block.
    pub fn new(text: impl Into<String>) -> Self {
        TextBlock { kind: TextTag::Text, text: text.into() }
    }
}

/// The `text` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TextTag {
    /// `text`.
    Text,
}

/// `ToolCallContent`: only `{type: "content", content}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallContent {
    /// Always `content`.
    #[serde(rename = "type")]
    pub kind: ContentTag,
    /// The text.
    pub content: TextBlock,
}

/// The `content` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentTag {
    /// `content`.
    Content,
}

/// A tool call's `rawInput`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawInput {
    /// The approval prompt.
    pub prompt: String,
}

/// `ToolKind` (we only use `other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// `other`.
    Other,
}

/// `ToolCallStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Waiting for the answer.
    Pending,
    /// Approved.
    Completed,
    /// Denied.
    Failed,
}

/// `NoticeSeverity` (we only warn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeSeverity {
    /// `warning`.
    Warning,
}

/// `session/request_permission` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session of the turn asking.
    pub session_id: String,
    /// The card the request is about.
    pub tool_call: ToolCallRef,
    /// Approve once or deny once: nothing is remembered, so no `*_always`.
    pub options: Vec<PermissionOption>,
}

/// The `toolCall` of a permission request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRef {
    /// The approval's request id.
    pub tool_call_id: String,
    /// The first line of the prompt.
    pub title: String,
    /// Always `other`.
    pub kind: ToolKind,
    /// Always `pending`.
    pub status: ToolCallStatus,
}

/// `PermissionOption`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// `approve` or `deny`.
    pub option_id: &'static str,
    /// For people.
    pub name: &'static str,
    /// `allow_once` or `reject_once`.
    pub kind: PermissionOptionKind,
}

/// `PermissionOptionKind` (only the once kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// `allow_once`.
    AllowOnce,
    /// `reject_once`.
    RejectOnce,
}

/// The option id that approves; any other answer denies.
pub const APPROVE_OPTION: &str = "approve";
/// The option id that denies.
pub const DENY_OPTION: &str = "deny";

/// The two options of every permission request.
pub fn permission_options() -> Vec<PermissionOption> {
    vec![
        PermissionOption { option_id: APPROVE_OPTION, name: "Approve", kind: PermissionOptionKind::AllowOnce },
        PermissionOption { option_id: DENY_OPTION, name: "Deny", kind: PermissionOptionKind::RejectOnce },
    ]
}

/// `$/cancel_request` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequestNotification {
    /// Our request the client should stop answering.
    pub request_id: i64,
}

/// A JSON-RPC error object: our code, and `data` our typed `RuntimeSubmitError` (with
/// `sessionId` for an unknown session).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    /// The JSON-RPC code.
    pub code: i64,
    /// For people.
    pub message: String,
    /// The typed error.
    pub data: Value,
}

/// One line we write: a response, a request or a notification, always with `"jsonrpc":"2.0"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outgoing {
    /// A successful response.
    Result {
        /// `2.0`.
        jsonrpc: JsonRpc,
        /// The request's id.
        id: Value,
        /// The result.
        result: Value,
    },
    /// An error response.
    Error {
        /// `2.0`.
        jsonrpc: JsonRpc,
        /// The request's id (`null` when it could not be read).
        id: Value,
        /// The error.
        error: ErrorObject,
    },
    /// A request to the client.
    Request {
        /// `2.0`.
        jsonrpc: JsonRpc,
        /// Our id.
        id: i64,
        /// The method.
        method: &'static str,
        /// Its params.
        params: Value,
    },
    /// A notification to the client.
    Notification {
        /// `2.0`.
        jsonrpc: JsonRpc,
        /// The method.
        method: &'static str,
        /// Its params.
        params: Value,
    },
}

/// The `jsonrpc` member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum JsonRpc {
    /// `2.0`.
    #[serde(rename = "2.0")]
    V2,
}

impl Outgoing {
    /// The line, without its newline (serde_json never writes a raw newline inside a value).
    pub fn to_line(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|e| format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"cannot encode a message: {e}","data":null}}}}"#).into_bytes())
    }
}

/// The encoded value of `v`.
pub fn value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The sample values `tests/acp-editor/vectors.json` holds, by ACP `$defs` name.
#[cfg(test)]
pub fn vectors() -> Vec<(&'static str, Value)> {
    let text = || TextBlock::new("hello");
    let update = |u: SessionUpdate| value(&SessionNotification { session_id: "acp-1".into(), update: u });
    vec![
        (
            "InitializeResponse",
            value(&InitializeResponse {
                protocol_version: ACP_PROTOCOL_VERSION,
                agent_capabilities: AgentCapabilities {
                    load_session: false,
                    prompt_capabilities: PromptCapabilities { image: false, audio: false, embedded_context: false },
                    mcp_capabilities: McpCapabilities { http: false, sse: false },
                    session_capabilities: Empty {},
                    meta: CapabilitiesMeta { extensions: vec!["_openagents/status"] },
                },
                auth_methods: vec![],
                agent_info: Implementation { name: "openagents".into(), title: "openagents".into(), version: "0.0.0".into() },
                meta: InitializeMeta { protocol_version: "1.1.0".into(), schema_digest: "0".repeat(64) },
            }),
        ),
        ("NewSessionResponse", value(&NewSessionResponse { session_id: "acp-1".into(), meta: None })),
        ("NewSessionResponse", value(&NewSessionResponse { session_id: "acp-1".into(), meta: Some(NewSessionMeta { ignored_mcp_servers: vec!["fs".into()] }) })),
        ("PromptResponse", value(&PromptResponse { stop_reason: StopReason::EndTurn })),
        ("PromptResponse", value(&PromptResponse { stop_reason: StopReason::Cancelled })),
        ("SessionNotification", update(SessionUpdate::AgentMessageChunk { content: text(), message_id: "a:result".into() })),
        ("SessionNotification", update(SessionUpdate::AgentThoughtChunk { content: text(), message_id: "a:progress".into() })),
        (
            "SessionNotification",
            update(SessionUpdate::ToolCall {
                tool_call_id: "approval-1".into(),
                title: "May I?".into(),
                kind: ToolKind::Other,
                status: ToolCallStatus::Pending,
                content: vec![ToolCallContent { kind: ContentTag::Content, content: text() }],
                raw_input: RawInput { prompt: "May I?".into() },
            }),
        ),
        ("SessionNotification", update(SessionUpdate::ToolCallUpdate { tool_call_id: "approval-1".into(), status: ToolCallStatus::Completed })),
        ("SessionNotification", update(SessionUpdate::ToolCallUpdate { tool_call_id: "approval-1".into(), status: ToolCallStatus::Failed })),
        ("SessionNotification", update(SessionUpdate::Notice { severity: NoticeSeverity::Warning, title: "ignored".into() })),
        (
            "RequestPermissionRequest",
            value(&RequestPermissionRequest {
                session_id: "acp-1".into(),
                tool_call: ToolCallRef { tool_call_id: "approval-1".into(), title: "May I?".into(), kind: ToolKind::Other, status: ToolCallStatus::Pending },
                options: permission_options(),
            }),
        ),
        ("CancelRequestNotification", value(&CancelRequestNotification { request_id: 7 })),
        ("Error", value(&ErrorObject { code: -32007, message: "the runner failed".into(), data: serde_json::json!({"code": "runner_failed", "message": "the runner failed", "retryable": true}) })),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed vectors are exactly what these types encode (the editor tests validate the
    /// same file against ACP's schema).
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
    fn incoming_blocks_and_outcomes_decode() {
        let b: PromptBlock = serde_json::from_value(serde_json::json!({"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain"})).unwrap();
        assert!(matches!(b, PromptBlock::ResourceLink { ref name, .. } if name == "a"));
        assert!(serde_json::from_value::<PromptBlock>(serde_json::json!({"type": "image", "data": "", "mimeType": "image/png"})).is_err());
        let o: RequestPermissionResponse = serde_json::from_value(serde_json::json!({"outcome": {"outcome": "selected", "optionId": "approve"}})).unwrap();
        assert!(matches!(o.outcome, PermissionOutcome::Selected { ref option_id } if option_id == APPROVE_OPTION));
        let o: RequestPermissionResponse = serde_json::from_value(serde_json::json!({"outcome": {"outcome": "cancelled"}})).unwrap();
        assert!(matches!(o.outcome, PermissionOutcome::Cancelled));
    }
}
