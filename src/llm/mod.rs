//! The LLM behind one trait, with one provider-neutral message and tool model. Conversion to a
//! provider's wire format happens only at the provider boundary (`openai.rs`, `anthropic.rs`);
//! the engine, the history hygiene and the store all speak these types. `policy.rs` wraps the
//! providers in the fallback chain and reports each call to a `call_log::CallLog` (the engine
//! keeps the records); `http.rs` is the transport every provider shares (HTTP/2, timeouts,
//! error texts without keys).

pub mod anthropic;
pub mod call_log;
mod http;
mod lane;
pub mod offline;
pub mod openai;
pub mod policy;
pub mod scripted;
pub mod settings;

use crate::domain::{AgentName, ToolCall};
use async_trait::async_trait;
use serde::Serialize;
use std::borrow::Cow;
use std::sync::Arc;

pub use anthropic::AnthropicClient;
pub use call_log::CallLog;
pub use http::Http2;
pub(crate) use http::new_call_id;
pub use offline::OfflineLlm;
pub use openai::OpenAiClient;
pub use policy::{CallPolicy, FallbackChain};
pub use scripted::ScriptedLlm;
pub use settings::{LlmProvider, LlmSettings, LlmSpec};

/// One message of a conversation as the LLM sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    Human {
        content: String,
    },
    Ai {
        content: String,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl ChatMessage {
    pub fn human(content: impl Into<String>) -> Self {
        ChatMessage::Human {
            content: content.into(),
        }
    }

    pub fn ai(content: impl Into<String>) -> Self {
        ChatMessage::Ai {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }

    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// A tool offered to the model: name, what it is for, JSON-schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One call to a model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LlmRequest {
    /// Which agent asks (for scripts, logs and metrics).
    pub agent: AgentName,
    /// The conversation's contact key, for usage accounting; `None` outside a conversation.
    pub conversation: Option<String>,
    pub system: SystemPrompt,
    pub messages: Vec<ChatMessage>,
    /// Shared: an assistant's tools are built once per prompt set, not per call.
    pub tools: std::sync::Arc<[ToolSpec]>,
}

/// A call's system prompt: written out, or rendered each time the call is encoded.
///
/// An assistant's prompt is about 2 KB of text that differs per customer (name, language, the
/// time), and a call keeps its request for the policy's retries and fallback while it waits on
/// the model. Rendering it again per attempt costs microseconds; keeping it costs every waiting
/// turn its size.
#[derive(Clone)]
pub enum SystemPrompt {
    Text(String),
    Rendered(Arc<dyn RenderPrompt>),
}

/// What a [`SystemPrompt::Rendered`] is rendered from: a template and the few fields it fills.
pub trait RenderPrompt: Send + Sync {
    /// The prompt's text; empty, after logging why, when the template cannot render.
    fn render(&self) -> String;
}

impl SystemPrompt {
    /// The prompt's text.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            SystemPrompt::Text(text) => Cow::Borrowed(text),
            SystemPrompt::Rendered(prompt) => Cow::Owned(prompt.render()),
        }
    }
}

impl Default for SystemPrompt {
    fn default() -> Self {
        SystemPrompt::Text(String::new())
    }
}

impl From<String> for SystemPrompt {
    fn from(text: String) -> Self {
        SystemPrompt::Text(text)
    }
}

impl From<&str> for SystemPrompt {
    fn from(text: &str) -> Self {
        SystemPrompt::Text(text.to_owned())
    }
}

impl PartialEq for SystemPrompt {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl std::fmt::Display for SystemPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

impl std::fmt::Debug for SystemPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.text(), f)
    }
}

/// Tokens a call used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// What the model answered: text, tool calls, or both.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LlmResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

/// What the caller can do about a failed call.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Worth retrying or falling back (timeouts, 429, 5xx, connection errors).
    #[error("LLM unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the request (a 4xx other than 408/429): a revoked key, a retired
    /// model, a context too long, a content filter. The next provider is tried all the same.
    #[error("LLM refused the request: {message}")]
    Rejected { status: u16, message: String },
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

#[async_trait]
pub trait Llm: Send + Sync + 'static {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError>;
}
