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

use openagents_protocol::rt::{Key, Skip};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The only ACP major version we speak.
pub const ACP_PROTOCOL_VERSION: u16 = 1;

// ---------------------------------------------------------------------------------------------
// Incoming (client → agent).
//
// A line is read in two passes that build nothing of its size: `rt::Skip` checks it is one exact
// JSON document (no key twice at any depth, the parser's depth limit), then [`Envelope`] keeps
// each member as raw text borrowed from the line, and each method decodes its `params` straight
// into the typed structs below, skipping what it does not read. A prompt's blocks are flattened
// into its task one at a time as they are read ([`decode_prompt`]): no tree of the whole line,
// and no more blocks than the cap.

/// One message from the client, each member its raw JSON text (`None` when absent; a `null`
/// member is `Some("null")`).
#[derive(Debug, Default, Deserialize)]
pub struct Envelope<'a> {
    /// `"2.0"`.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub jsonrpc: Option<&'a RawValue>,
    /// The request's id.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub id: Option<&'a RawValue>,
    /// The method.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub method: Option<&'a RawValue>,
    /// Its params.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub params: Option<&'a RawValue>,
    /// A response's result.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub result: Option<&'a RawValue>,
    /// A response's error.
    #[serde(default, borrow, deserialize_with = "raw")]
    pub error: Option<&'a RawValue>,
}

fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// `raw` as a value when it is a scalar (`null`, a boolean, a number or a string); an array or
/// an object is `None`, never built.
pub fn scalar(raw: &RawValue) -> Option<Value> {
    let text = raw.get().trim_start();
    if text.starts_with('{') || text.starts_with('[') {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// A member read only when it is a string: anything else is noted, never built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loose {
    /// A string.
    Str(String),
    /// Something else (a number, an object, …).
    Other,
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Loose, E> {
                Ok(Loose::Str(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Loose, E> {
                Ok(Loose::Str(v))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Loose, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(Loose::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Loose, A::Error> {
                while map.next_key::<Skip>()?.is_some() {
                    map.next_value::<Skip>()?;
                }
                Ok(Loose::Other)
            }
        }
        d.deserialize_any(V)
    }
}

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
    /// Present and not `null` (`{}`) when the client shows `notice` updates; never read further.
    #[serde(default)]
    pub notices: Option<Skip>,
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
    pub mcp_servers: Option<Vec<McpServerName>>,
    /// `_meta`: the runner the session asks for.
    #[serde(default, rename = "_meta")]
    pub meta: Option<NewSessionRequestMeta>,
}

/// An MCP server of `session/new`, only its name read.
#[derive(Debug, Deserialize)]
pub struct McpServerName {
    /// Its name, when it is a string.
    #[serde(default)]
    pub name: Option<Loose>,
}

/// `session/new` `_meta` (only our key).
#[derive(Debug, Deserialize)]
pub struct NewSessionRequestMeta {
    /// `openagents/runner`: one of the agent's runners.
    #[serde(default, rename = "openagents/runner")]
    pub runner: Option<Loose>,
}

/// `session/close` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseSessionRequest {
    /// The session to close.
    pub session_id: String,
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

/// The members of a content block we read (`type`, `text`, `uri`, `name`), each only when it is
/// a string; every other member (`annotations`, `_meta`, an image's data) is skipped unbuilt.
#[derive(Debug, Default)]
struct BlockFields {
    kind: Option<Loose>,
    text: Option<Loose>,
    uri: Option<Loose>,
    name: Option<Loose>,
}

impl BlockFields {
    /// The block, or why it is not one we accept.
    fn into_block(self) -> Result<PromptBlock, String> {
        let string = |v: Option<Loose>, field: &str| match v {
            Some(Loose::Str(s)) => Ok(s),
            Some(Loose::Other) => Err(format!("`{field}` must be a string")),
            None => Err(format!("missing field `{field}`")),
        };
        match self.kind {
            Some(Loose::Str(k)) if k == "text" => Ok(PromptBlock::Text { text: string(self.text, "text")? }),
            Some(Loose::Str(k)) if k == "resource_link" => Ok(PromptBlock::ResourceLink { uri: string(self.uri, "uri")?, name: string(self.name, "name")? }),
            Some(Loose::Str(k)) => Err(format!("unknown variant `{k}`, expected `text` or `resource_link`")),
            Some(Loose::Other) => Err("`type` must be a string".into()),
            None => Err("missing field `type`".into()),
        }
    }
}

impl<'de> Deserialize<'de> for BlockFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlockFields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a content block (an object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BlockFields, A::Error> {
                let mut b = BlockFields::default();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let slot = match key.as_str() {
                        "type" => &mut b.kind,
                        "text" => &mut b.text,
                        "uri" => &mut b.uri,
                        "name" => &mut b.name,
                        _ => {
                            map.next_value::<Skip>()?;
                            continue;
                        }
                    };
                    if slot.is_some() {
                        return Err(openagents_protocol::rt::duplicate(key.as_str()));
                    }
                    *slot = Some(map.next_value::<Loose>()?);
                }
                Ok(b)
            }
        }
        d.deserialize_map(V)
    }
}

/// A `session/prompt`, its blocks flattened into the task.
#[derive(Debug)]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// Text as it is, a resource link as `[name](uri)`, blocks separated by a blank line; cut
    /// one character past `max_chars` (the task is refused then).
    pub task: String,
}

/// Why a `session/prompt`'s params were refused.
#[derive(Debug, PartialEq, Eq)]
pub enum PromptError {
    /// The params do not decode (not an object, a member missing or of the wrong type).
    Invalid(String),
    /// More blocks than the cap.
    TooManyBlocks,
    /// Block `index` is not one we accept.
    Block {
        /// Its place in the prompt.
        index: usize,
        /// Its `type`, `?` when it has none.
        kind: String,
        /// Why.
        why: String,
    },
}

/// Decodes `session/prompt` params from their raw text, each block read, flattened into the
/// task and dropped before the next: the memory it takes is the task (at most `max_chars` and
/// one more block) and one block at a time, and past `max_blocks` blocks it stops reading.
///
/// # Errors
///
/// [`PromptError`], saying which.
pub fn decode_prompt(params: &str, max_blocks: usize, max_chars: usize) -> Result<PromptRequest, PromptError> {
    let mut flat = Flatten { task: String::new(), chars: 0, blocks: 0, max_blocks, max_chars, failure: None };
    let mut de = serde_json::Deserializer::from_str(params);
    let decoded = PromptSeed(&mut flat).deserialize(&mut de).and_then(|s| de.end().map(|()| s));
    match decoded {
        Ok(session_id) => Ok(PromptRequest { session_id, task: flat.task }),
        Err(e) => Err(flat.failure.take().unwrap_or_else(|| PromptError::Invalid(openagents_protocol::rt::describe_json_error(&e)))),
    }
}

struct Flatten {
    task: String,
    chars: usize,
    blocks: usize,
    max_blocks: usize,
    max_chars: usize,
    failure: Option<PromptError>,
}

impl Flatten {
    /// Appends one block's text (after a blank line), up to one character past the limit.
    fn push(&mut self, text: &str) {
        if self.chars > self.max_chars {
            return;
        }
        let sep = if self.blocks > 0 { "\n\n" } else { "" };
        for part in [sep, text] {
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

/// The params object: `sessionId`, `prompt` (flattened as read), the rest skipped.
struct PromptSeed<'f>(&'f mut Flatten);

impl<'de> DeserializeSeed<'de> for PromptSeed<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PromptSeed<'_> {
    type Value = String;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("`session/prompt` params: an object with `sessionId` and `prompt`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let mut session_id = None;
        let mut prompt = false;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "sessionId" if session_id.is_none() => session_id = Some(map.next_value::<String>()?),
                "prompt" if !prompt => {
                    map.next_value_seed(BlocksSeed(&mut *self.0))?;
                    prompt = true;
                }
                "sessionId" | "prompt" => return Err(openagents_protocol::rt::duplicate(key.as_str())),
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        if !prompt {
            return Err(de::Error::missing_field("prompt"));
        }
        session_id.ok_or_else(|| de::Error::missing_field("sessionId"))
    }
}

/// The `prompt` array: each block decoded exactly on its own, flattened, then dropped.
struct BlocksSeed<'f>(&'f mut Flatten);

impl<'de> DeserializeSeed<'de> for BlocksSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BlocksSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of content blocks")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let flat = self.0;
        loop {
            let index = flat.blocks;
            if index == flat.max_blocks {
                if seq.next_element::<Skip>()?.is_some() {
                    flat.failure = Some(PromptError::TooManyBlocks);
                    return Err(de::Error::custom("too many content blocks"));
                }
                return Ok(());
            }
            let Some(block) = seq.next_element::<BlockFields>()? else { return Ok(()) };
            let kind = match &block.kind {
                Some(Loose::Str(k)) => k.clone(),
                _ => "?".to_owned(),
            };
            match block.into_block() {
                Ok(PromptBlock::Text { text }) => flat.push(&text),
                Ok(PromptBlock::ResourceLink { uri, name }) => flat.push(&format!("[{name}]({uri})")),
                Err(why) => {
                    let why = if matches!(kind.as_str(), "image" | "audio" | "resource") { "not supported (promptCapabilities: text and resource_link only)".to_owned() } else { why };
                    flat.failure = Some(PromptError::Block { index, kind, why });
                    return Err(de::Error::custom("a block we do not accept"));
                }
            }
            flat.blocks += 1;
        }
    }
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

/// A JSON-RPC error from the client: only its code is read.
#[derive(Debug, Deserialize)]
pub struct ErrorCodeOnly {
    /// The code (a number; anything else does not decode).
    #[serde(default)]
    pub code: Option<serde_json::Number>,
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
    /// Only `session/close`.
    pub session_capabilities: SessionCapabilities,
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

/// An empty object (also the `session/close` result).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Empty {}

/// `sessionCapabilities`: `session/close` and nothing else (no `list`, `resume` or `delete`:
/// the runtime keeps no transcript).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionCapabilities {
    /// `{}`: we close sessions.
    pub close: Empty,
}

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
    /// The most sessions kept at once (past it, `session/new` closes the one idle the longest).
    #[serde(rename = "openagents/maxSessions")]
    pub max_sessions: usize,
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
                    session_capabilities: SessionCapabilities { close: Empty {} },
                    meta: CapabilitiesMeta { extensions: vec!["_openagents/status"] },
                },
                auth_methods: vec![],
                agent_info: Implementation { name: "openagents".into(), title: "openagents".into(), version: "0.0.0".into() },
                meta: InitializeMeta { protocol_version: "1.1.0".into(), schema_digest: "0".repeat(64), max_sessions: 256 },
            }),
        ),
        ("NewSessionResponse", value(&NewSessionResponse { session_id: "acp-1".into(), meta: None })),
        ("CloseSessionResponse", value(&Empty {})),
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

    #[test]
    fn a_prompt_is_flattened_as_it_is_read_and_bounded() {
        let p = decode_prompt(r#"{"prompt":[{"type":"text","text":"look at"},{"type":"resource_link","uri":"file:///a","name":"a","size":3}],"sessionId":"s","_meta":{"x":[1]}}"#, 8, 100).unwrap();
        assert_eq!((p.session_id.as_str(), p.task.as_str()), ("s", "look at\n\n[a](file:///a)"));
        // At the block cap exactly: fine; one more: refused, whatever follows.
        let blocks = |n: usize| (0..n).map(|_| r#"{"type":"text","text":"x"}"#).collect::<Vec<_>>().join(",");
        assert_eq!(decode_prompt(&format!(r#"{{"sessionId":"s","prompt":[{}]}}"#, blocks(3)), 3, 100).unwrap().task, "x\n\nx\n\nx");
        assert_eq!(decode_prompt(&format!(r#"{{"sessionId":"s","prompt":[{},"not even a block"]}}"#, blocks(3)), 3, 100).unwrap_err(), PromptError::TooManyBlocks);
        // The task stops one character past the limit (code points, never inside one).
        let p = decode_prompt(r#"{"sessionId":"s","prompt":[{"type":"text","text":"ééé"},{"type":"text","text":"ééé"}]}"#, 8, 4).unwrap();
        assert_eq!(p.task, "ééé\n\n");
        let p = decode_prompt(r#"{"sessionId":"s","prompt":[{"type":"text","text":"éééééé"}]}"#, 8, 4).unwrap();
        assert_eq!(p.task, "ééééé");
        // What we do not accept, by block.
        let e = decode_prompt(r#"{"sessionId":"s","prompt":[{"type":"text","text":"a"},{"type":"image","data":"","mimeType":"image/png"}]}"#, 8, 100).unwrap_err();
        assert!(matches!(e, PromptError::Block { index: 1, ref kind, ref why } if kind == "image" && why.contains("not supported")), "{e:?}");
        let e = decode_prompt(r#"{"sessionId":"s","prompt":[{"text":"a"}]}"#, 8, 100).unwrap_err();
        assert!(matches!(e, PromptError::Block { index: 0, ref kind, .. } if kind == "?"), "{e:?}");
        for bad in [r#"{"sessionId":"s"}"#, r#"{"prompt":[]}"#, r#"{"sessionId":"s","prompt":"text"}"#, "null", "[]", r#"{"sessionId":"s","prompt":[],"prompt":[]}"#] {
            assert!(matches!(decode_prompt(bad, 8, 100), Err(PromptError::Invalid(_))), "{bad}");
        }
    }

    #[test]
    fn the_envelope_keeps_members_as_raw_text() {
        let line = r#"{"jsonrpc":"2.0","id":null,"method":"m","params":{"big":[1,2,3]},"extra":{"a":1}}"#;
        let e: Envelope<'_> = serde_json::from_str(line).unwrap();
        assert_eq!(e.id.map(RawValue::get), Some("null"));
        assert_eq!(e.params.map(RawValue::get), Some(r#"{"big":[1,2,3]}"#));
        assert!(e.result.is_none() && e.error.is_none());
        assert_eq!(e.method.and_then(scalar), Some(Value::String("m".into())));
        assert_eq!(e.params.and_then(scalar), None);
        let m: NewSessionRequest = serde_json::from_str(r#"{"cwd":"/","mcpServers":[{"name":"a"},{"name":{"x":1}},{}],"_meta":{"openagents/runner":7}}"#).unwrap();
        let names: Vec<_> = m.mcp_servers.unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(names, vec![Some(Loose::Str("a".into())), Some(Loose::Other), None]);
        assert_eq!(m.meta.and_then(|m| m.runner), Some(Loose::Other));
    }
}
