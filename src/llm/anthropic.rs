//! The [`Llm`] spoken as Anthropic's Messages API (`POST {base}/v1/messages`).
//!
//! Hand-written on reqwest + serde like [`super::openai`], for the same reasons: one endpoint, a
//! handful of fields, and exact control of the wire. The neutral types of [`super`] are converted
//! here and nowhere else. What the Messages API demands beyond Chat Completions, and how it is met:
//!
//! - the system prompt is a top-level `system` field, not a message;
//! - messages are lists of content blocks (`text`, `tool_use`, `tool_result`), and a tool result
//!   is a block in a **user** message;
//! - roles must alternate, so consecutive messages of one role are merged into one message, their
//!   blocks kept in order (several tool results become one user message; a tool result followed by
//!   a human message becomes one user message too);
//! - the first message must be a user message (see `wire_messages` for what is dropped);
//! - text blocks must not be empty, and a `tool_use` input must be a JSON object;
//! - tool ids must match `^[A-Za-z0-9_-]{1,64}$`; ids outside that alphabet are replaced, in
//!   answers and (consistently within one request, so pairs still match) in histories.
//!
//! Failures are classified exactly as the OpenAI client does: 429, 408, 5xx (529 "overloaded"
//! included), timeouts, connection errors and an unparseable 200 are
//! [`LlmError::Unavailable`]; any other 4xx is [`LlmError::Rejected`]. Messages carry the status
//! and the provider's own message (or a short excerpt of the body), never the key; logs carry
//! neither message text nor the key.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::http::{self, EncodedTools, WireTools, is_portable_id, new_call_id};
use super::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse, ToolSpec, Usage};
use crate::domain::ToolCall;

/// The API version this client speaks (the `anthropic-version` header).
pub const API_VERSION: &str = "2023-06-01";

/// A Messages API client for one model; build it once and share it.
pub struct AnthropicClient {
    /// One pooled client for every call, so connections (and TLS sessions) are reused.
    http: http::Clients,
    /// `{base_url}/v1/messages`, computed once.
    endpoint: Url,
    /// `None` when a proxy in front adds the key.
    api_key: Option<SecretString>,
    model: String,
    /// The most tokens one answer may use (required by the API).
    max_tokens: u32,
    tools: EncodedTools,
}

impl AnthropicClient {
    /// `base_url` is the API root *without* its version path, e.g. `https://api.anthropic.com`;
    /// `timeout` bounds each whole call (connect, send and read the answer).
    pub fn new(
        base_url: Url,
        api_key: Option<SecretString>,
        model: String,
        max_tokens: u32,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let endpoint = http::endpoint(base_url, &["v1", "messages"])?;
        let http = http::Clients::single(http::client(timeout)?);
        Ok(Self {
            http,
            endpoint,
            api_key,
            model,
            max_tokens,
            tools: EncodedTools::default(),
        })
    }

    /// Speaks HTTP/2 as `http2` says, over enough connections for `in_flight` calls at once
    /// (see [`http::STREAMS_PER_CONNECTION`]); `timeout` as in `new`.
    pub fn with_transport(
        mut self,
        http2: http::Http2,
        in_flight: usize,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        self.http = http::Clients::new(&self.endpoint, timeout, http2, in_flight)?;
        tracing::debug!(transport = %self.http.describe(), ?http2, "LLM HTTP clients");
        Ok(self)
    }

    #[tracing::instrument(
        name = "llm.anthropic",
        skip_all,
        fields(llm.provider = "anthropic", llm.model = %self.model, llm.agent = %request.agent)
    )]
    async fn call(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        // In a block: what is moved into the request keeps no room in the waiting future.
        let outgoing = {
            let mut headers = ::http::HeaderMap::new();
            headers.insert(
                "anthropic-version",
                ::http::HeaderValue::from_static(API_VERSION),
            );
            if let Some(key) = &self.api_key {
                headers.insert("x-api-key", http::secret_header(key.expose_secret())?);
            }
            http::Outgoing::new(headers, self.encode(request).into())
        };
        let answer: WireResponse = self
            .http
            .post_json(&self.endpoint, outgoing, self.api_key.as_ref(), "anthropic")
            .await?;
        answered(answer)
    }
}

impl AnthropicClient {
    /// The body of `request`, its tools encoded once per list.
    pub fn encode(&self, request: &LlmRequest) -> Vec<u8> {
        let tools = self
            .tools
            .get(&request.tools, || wire_tools(&request.tools));
        let system = request.system.text();
        let mut wire = wire_request(&self.model, self.max_tokens, &system, request);
        wire.tools = WireTools::Encoded(&tools);
        serde_json::to_vec(&wire).expect("the wire request is plain JSON")
    }
}

/// The body this client sends for `request`: a call's own work before the network.
pub fn encode_request(model: &str, max_tokens: u32, request: &LlmRequest) -> Vec<u8> {
    let system = request.system.text();
    serde_json::to_vec(&wire_request(model, max_tokens, &system, request))
        .expect("the wire request is plain JSON")
}

/// Reads a Messages API answer as the client does: a call's own work after the network.
pub fn decode_response(body: &[u8]) -> Result<LlmResponse, LlmError> {
    let answer: WireResponse = serde_json::from_slice(body)
        .map_err(|e| LlmError::Unavailable(format!("unparseable answer: {e}")))?;
    answered(answer)
}

/// The answer, or the refusal that came as a 200: the model's safety classifiers declined to
/// go on (`stop_reason: "refusal"`).
fn answered(answer: WireResponse) -> Result<LlmResponse, LlmError> {
    if answer.stop_reason.as_deref() == Some("refusal") {
        return Err(LlmError::Rejected {
            status: 200,
            message: "refusal: the model declined to answer (stop_reason refusal)".to_owned(),
        });
    }
    Ok(from_wire(answer))
}

#[async_trait]
impl Llm for AnthropicClient {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.call(request).await
    }
}

// ---- request ------------------------------------------------------------------------------

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "WireTools::is_empty")]
    tools: WireTools<'a, WireTool<'a>>,
    /// Set whenever tools are offered: the engine runs one tool call per step.
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice>,
}

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<WireBlock<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        /// Always a JSON object, as the API requires.
        input: Cow<'a, Value>,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct WireToolChoice {
    #[serde(rename = "type")]
    kind: &'static str,
    disable_parallel_tool_use: bool,
}

fn wire_request<'a>(
    model: &'a str,
    max_tokens: u32,
    system: &'a str,
    request: &'a LlmRequest,
) -> WireRequest<'a> {
    let tool_choice = (!request.tools.is_empty()).then_some(WireToolChoice {
        kind: "auto",
        disable_parallel_tool_use: true,
    });
    WireRequest {
        model,
        max_tokens,
        system,
        messages: wire_messages(&request.messages),
        tools: WireTools::Fresh(wire_tools(&request.tools)),
        tool_choice,
    }
}

fn wire_tools(tools: &[ToolSpec]) -> Vec<WireTool<'_>> {
    tools
        .iter()
        .map(|tool| WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.parameters,
        })
        .collect()
}

/// The neutral history as Messages API turns: blocks per message, consecutive same-role messages
/// merged, and a user message first.
///
/// The API refuses a conversation that does not start with a user message. Ours can start with an
/// assistant turn when the history window was cut in front of it (or a greeting was sent before
/// the customer wrote); those leading assistant turns are dropped, since the model's earlier words
/// matter less than a call that is refused. Tool results at the start of the first user message
/// are dropped with them: their `tool_use` went with the dropped assistant turn, and an orphaned
/// `tool_result` is refused too.
fn wire_messages(history: &[ChatMessage]) -> Vec<WireMessage<'_>> {
    let mut ids = IdMap::default();
    let mut messages: Vec<WireMessage<'_>> = Vec::new();
    for message in history {
        let (role, blocks) = match message {
            ChatMessage::Human { content } => (Role::User, text_block(content)),
            ChatMessage::Ai {
                content,
                tool_calls,
            } => {
                let mut blocks = text_block(content);
                blocks.extend(tool_calls.iter().map(|call| WireBlock::ToolUse {
                    id: ids.portable(&call.id),
                    name: &call.name,
                    input: object_input(&call.args),
                }));
                (Role::Assistant, blocks)
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => (
                Role::User,
                vec![WireBlock::ToolResult {
                    tool_use_id: ids.portable(tool_call_id),
                    content,
                }],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }

    // A user message first (see above).
    let mut skip = 0;
    while let Some(first) = messages.get_mut(skip) {
        if first.role == Role::User {
            first
                .content
                .retain(|block| !matches!(block, WireBlock::ToolResult { .. }));
            if !first.content.is_empty() {
                break;
            }
        }
        skip += 1;
    }
    messages.drain(..skip);
    messages
}

/// A text block, or none for empty text (the API refuses empty text blocks).
fn text_block(text: &str) -> Vec<WireBlock<'_>> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![WireBlock::Text { text }]
    }
}

/// A `tool_use` input is always a JSON object. `null` (no arguments) becomes `{}`; any other
/// non-object (a string, a number, an array) is kept under `_raw`, like the OpenAI client keeps
/// arguments that are not JSON, so the model still sees what it sent.
fn object_input(args: &Value) -> Cow<'_, Value> {
    match args {
        Value::Object(_) => Cow::Borrowed(args),
        Value::Null => Cow::Owned(Value::Object(serde_json::Map::new())),
        other => Cow::Owned(serde_json::json!({ "_raw": other })),
    }
}

/// Tool ids as the API accepts them. Ours already are (every client makes them portable), but a
/// history stored by other means may hold others: each such id gets one fresh portable id for the
/// whole request, so a `tool_use` and its `tool_result` still pair.
#[derive(Default)]
struct IdMap<'a> {
    replaced: HashMap<&'a str, String>,
}

impl<'a> IdMap<'a> {
    fn portable(&mut self, id: &'a str) -> Cow<'a, str> {
        if is_portable_id(id) {
            Cow::Borrowed(id)
        } else {
            Cow::Owned(self.replaced.entry(id).or_insert_with(new_call_id).clone())
        }
    }
}

// ---- response -----------------------------------------------------------------------------

#[derive(Deserialize)]
struct WireResponse {
    /// Required: a 200 without it is not a Messages answer.
    content: Vec<WireAnswerBlock>,
    usage: Option<WireUsage>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireAnswerBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: Option<String>,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking and any block type added later: not ours to show.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

fn from_wire(answer: WireResponse) -> LlmResponse {
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    for block in answer.content {
        match block {
            WireAnswerBlock::Text { text } => content.push_str(&text),
            WireAnswerBlock::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id: id
                    .filter(|id| is_portable_id(id))
                    .unwrap_or_else(new_call_id),
                name,
                args: if input.is_null() {
                    serde_json::json!({})
                } else {
                    input
                }
                .into(),
            }),
            WireAnswerBlock::Other => {}
        }
    }
    let usage = answer.usage.map_or_else(Usage::default, |u| Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    });
    LlmResponse {
        content,
        tool_calls,
        usage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_versioned_messages_path_under_the_base() {
        for (base, expected) in [
            (
                "https://api.anthropic.com",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "https://api.anthropic.com/",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "http://proxy:8080/anthropic/",
                "http://proxy:8080/anthropic/v1/messages",
            ),
        ] {
            let client = AnthropicClient::new(
                Url::parse(base).unwrap(),
                None,
                "m".to_owned(),
                1024,
                Duration::from_secs(1),
            )
            .unwrap();
            assert_eq!(client.endpoint.as_str(), expected);
        }
    }

    #[test]
    fn tool_inputs_are_always_objects() {
        let object = serde_json::json!({"a": 1});
        assert_eq!(*object_input(&object), object);
        assert_eq!(*object_input(&Value::Null), serde_json::json!({}));
        assert_eq!(
            *object_input(&serde_json::json!("x")),
            serde_json::json!({"_raw": "x"})
        );
    }
}
