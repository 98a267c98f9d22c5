//! What an assistant asks of its tools, and what one call to a model cost: the records the
//! provider layer produces and the store keeps.

use std::time::Duration;

use crate::domain::AgentName;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A tool call an assistant asked for. Ids are ours, `[A-Za-z0-9_-]`, valid for every provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Shared: a call is copied into the history, the turn's window and each request after
    /// it, and an object of arguments takes a 632-byte B-tree leaf however few its fields.
    pub args: std::sync::Arc<serde_json::Value>,
}

/// How one call ended, as a metric label and a stored field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    /// No text and no tool call.
    Empty,
    /// Our own per-call timeout fired.
    Timeout,
    /// Connection error, 429, 5xx, unparsable answer.
    Unavailable,
    /// 400-class: our request was refused.
    Rejected,
    Error,
}

impl CallOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Empty => "empty",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Unavailable => "unavailable",
            CallOutcome::Rejected => "rejected",
            CallOutcome::Error => "error",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            CallOutcome::Ok,
            CallOutcome::Empty,
            CallOutcome::Timeout,
            CallOutcome::Unavailable,
            CallOutcome::Rejected,
            CallOutcome::Error,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
    }
}

/// `llm_calls.provider` of a step an assistant took without a model: keywords or a tapped row.
pub const FAST_PATH: &str = "fast_path";
/// `llm_calls.provider` of a step served from the agency's data while no model answered.
pub const OFFLINE: &str = "offline";

/// One call to one provider (a retry or a fallback is a call of its own).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCall {
    /// The conversation's contact key; `None` for calls outside a conversation.
    pub conversation: Option<String>,
    /// The assistant (or the guard's step) that made the call.
    pub agent: AgentName,
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: String,
    pub outcome: CallOutcome,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub latency: Duration,
    /// What went wrong, for failed calls (never a secret: see `http::excerpt`).
    pub error: Option<String>,
    pub at: DateTime<Utc>,
}
