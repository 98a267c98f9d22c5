//! The [`Llm`] spoken as OpenAI's Chat Completions API (`POST {base}/chat/completions`), which
//! OpenAI and most self-hosted servers (vLLM, Ollama, LiteLLM…) accept.
//!
//! Hand-written on reqwest + serde rather than an SDK: we use one endpoint and a handful of fields,
//! and we want exact control of the wire — which fields are sent (system first, `content: null`
//! beside tool calls, `parallel_tool_calls: false`), how a malformed answer is classified, and that
//! tool-call ids stay valid for every provider. The neutral types of [`super`] are converted here
//! and nowhere else; the shapes are checked against OpenAI's own OpenAPI description in
//! `tests/suite/llm_openai.rs`.

use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use url::Url;

use super::http::{self, EncodedTools, WireTools, is_portable_id, new_call_id};
use super::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse, ToolSpec, Usage};
use crate::domain::ToolCall;

/// A Chat Completions client for one model; build it once and share it.
pub struct OpenAiClient {
    /// One pooled client for every call, so connections (and TLS sessions) are reused.
    http: http::Clients,
    /// `{base_url}/chat/completions`, computed once.
    endpoint: Url,
    /// `None` for local servers that need no key.
    api_key: Option<SecretString>,
    model: String,
    tools: EncodedTools,
}

impl OpenAiClient {
    /// `base_url` is the API root including its version path, e.g. `https://api.openai.com/v1`;
    /// `timeout` bounds each whole call (connect, send and read the answer).
    pub fn new(
        base_url: Url,
        api_key: Option<SecretString>,
        model: String,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let endpoint = http::endpoint(base_url, &["chat", "completions"])?;
        let http = http::Clients::single(http::client(timeout)?);
        Ok(Self {
            http,
            endpoint,
            api_key,
            model,
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
        name = "llm.openai",
        skip_all,
        fields(llm.provider = "openai", llm.model = %self.model, llm.agent = %request.agent)
    )]
    async fn call(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        // In a block: what is moved into the request keeps no room in the waiting future.
        let outgoing = {
            let mut headers = ::http::HeaderMap::new();
            if let Some(key) = &self.api_key {
                headers.insert(
                    ::http::header::AUTHORIZATION,
                    http::secret_header(&format!("Bearer {}", key.expose_secret()))?,
                );
            }
            http::Outgoing::new(headers, self.encode(request).into())
        };
        let answer: WireResponse = self
            .http
            .post_json(&self.endpoint, outgoing, self.api_key.as_ref(), "openai")
            .await?;
        from_wire(answer)
    }
}

impl OpenAiClient {
    /// The body of `request`, its tools encoded once per list.
    pub fn encode(&self, request: &LlmRequest) -> Vec<u8> {
        let tools = self
            .tools
            .get(&request.tools, || wire_tools(&request.tools));
        let system = request.system.text();
        let mut wire = wire_request(&self.model, &system, request);
        wire.tools = WireTools::Encoded(&tools);
        serde_json::to_vec(&wire).expect("the wire request is plain JSON")
    }
}

/// The body this client sends for `request`: a call's own work before the network.
pub fn encode_request(model: &str, request: &LlmRequest) -> Vec<u8> {
    let system = request.system.text();
    serde_json::to_vec(&wire_request(model, &system, request))
        .expect("the wire request is plain JSON")
}

/// Reads a Chat Completions answer as the client does: a call's own work after the network.
pub fn decode_response(body: &[u8]) -> Result<LlmResponse, LlmError> {
    let answer: WireResponse = serde_json::from_slice(body)
        .map_err(|e| LlmError::Unavailable(format!("unparseable answer: {e}")))?;
    from_wire(answer)
}

#[async_trait]
impl Llm for OpenAiClient {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.call(request).await
    }
}

// ---- request ------------------------------------------------------------------------------

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "WireTools::is_empty")]
    tools: WireTools<'a, WireTool<'a>>,
    /// `Some(false)` whenever tools are offered: the engine runs one tool call per step.
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` (not `""`) when the turn is only tool calls.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    /// The arguments as a JSON *string*, as the API wants them.
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolSpec,
}

fn wire_request<'a>(model: &'a str, system: &'a str, request: &'a LlmRequest) -> WireRequest<'a> {
    let system = (!system.is_empty()).then_some(WireMessage::System { content: system });
    let messages = system
        .into_iter()
        .chain(request.messages.iter().map(wire_message))
        .collect();
    let parallel_tool_calls = (!request.tools.is_empty()).then_some(false);
    WireRequest {
        model,
        messages,
        tools: WireTools::Fresh(wire_tools(&request.tools)),
        parallel_tool_calls,
    }
}

fn wire_tools(tools: &[ToolSpec]) -> Vec<WireTool<'_>> {
    tools
        .iter()
        .map(|function| WireTool {
            kind: "function",
            function,
        })
        .collect()
}

fn wire_message(message: &ChatMessage) -> WireMessage<'_> {
    match message {
        ChatMessage::Human { content } => WireMessage::User { content },
        ChatMessage::Ai {
            content,
            tool_calls,
        } => WireMessage::Assistant {
            content: (!content.is_empty()).then_some(content.as_str()),
            tool_calls: tool_calls
                .iter()
                .map(|call| WireToolCall {
                    id: &call.id,
                    kind: "function",
                    function: WireFunctionCall {
                        name: &call.name,
                        arguments: call.args.to_string(),
                    },
                })
                .collect(),
        },
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => WireMessage::Tool {
            tool_call_id,
            content,
        },
    }
}

// ---- response -----------------------------------------------------------------------------

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireAnswer,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireAnswer {
    content: Option<String>,
    tool_calls: Option<Vec<WireAnswerToolCall>>,
    /// The model's own refusal (structured outputs), when it declines.
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct WireAnswerToolCall {
    id: Option<String>,
    function: WireAnswerFunction,
}

#[derive(Deserialize)]
struct WireAnswerFunction {
    name: String,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

fn from_wire(answer: WireResponse) -> Result<LlmResponse, LlmError> {
    let choice = answer
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| LlmError::Unavailable("the answer has no choices".to_owned()))?;
    // A refusal that comes as a 200: the content filter cut the answer, or the model declined.
    if choice.finish_reason.as_deref() == Some("content_filter") {
        return Err(LlmError::Rejected {
            status: 200,
            message: "content_filter: the answer was withheld by the provider's content filter"
                .to_owned(),
        });
    }
    if let Some(refusal) = choice.message.refusal.as_deref().filter(|r| !r.is_empty())
        && choice.message.content.as_deref().is_none_or(str::is_empty)
        && choice.message.tool_calls.as_ref().is_none_or(Vec::is_empty)
    {
        return Err(LlmError::Rejected {
            status: 200,
            message: format!("refusal: {refusal}"),
        });
    }
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| ToolCall {
            id: call
                .id
                .filter(|id| is_portable_id(id))
                .unwrap_or_else(new_call_id),
            args: parse_arguments(call.function.arguments.as_deref().unwrap_or("")).into(),
            name: call.function.name,
        })
        .collect();
    let usage = answer.usage.map_or_else(Usage::default, |u| Usage {
        input_tokens: u.prompt_tokens,
        output_tokens: u.completion_tokens,
    });
    Ok(LlmResponse {
        content: choice.message.content.unwrap_or_default(),
        tool_calls,
        usage,
    })
}

/// The model's argument string as JSON. Empty means no arguments (`{}`). Anything that is not
/// JSON is kept, not fatal: the call becomes `{"_raw": <the string>, "_error": "arguments are not
/// valid JSON"}`, so the engine can answer the model with a tool error and let it try again
/// instead of losing the whole turn.
fn parse_arguments(raw: &str) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(
        |_| serde_json::json!({ "_raw": raw, "_error": "arguments are not valid JSON" }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call waiting on the model is boxed whole by `async_trait`: its future keeps no room for
    /// connecting or for reqwest's path, which are boxed where they run.
    #[test]
    fn a_waiting_call_is_small() {
        let client = OpenAiClient::new(
            Url::parse("http://127.0.0.1:9/v1").unwrap(),
            None,
            "m".to_owned(),
            Duration::from_secs(1),
        )
        .unwrap()
        .with_transport(http::Http2::PriorKnowledge, 64, Duration::from_secs(1))
        .unwrap();
        let request = LlmRequest {
            agent: crate::domain::AgentName::new("primary_assistant"),
            conversation: None,
            system: String::new().into(),
            messages: Vec::new(),
            tools: Vec::new().into(),
        };
        let call = client.complete(&request);
        assert!(
            std::mem::size_of_val(&*call) <= 700,
            "{}",
            std::mem::size_of_val(&*call)
        );
    }

    #[test]
    fn empty_arguments_mean_no_arguments_and_bad_ones_are_kept_raw() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#), serde_json::json!({"a": 1}));
        let bad = parse_arguments("{oops");
        assert_eq!(bad["_raw"], "{oops");
        assert_eq!(bad["_error"], "arguments are not valid JSON");
    }

    #[test]
    fn the_endpoint_keeps_the_version_path() {
        for base in ["https://api.openai.com/v1", "https://api.openai.com/v1/"] {
            let client = OpenAiClient::new(
                Url::parse(base).unwrap(),
                None,
                "m".to_owned(),
                Duration::from_secs(1),
            )
            .unwrap();
            assert_eq!(
                client.endpoint.as_str(),
                "https://api.openai.com/v1/chat/completions"
            );
        }
    }
}
