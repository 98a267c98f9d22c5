//! `messages`: the history, and what a tool shows besides text.

use crate::domain::{AgentName, MessageRole, ToolCall, WaId, WaMessageId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{ListRow, ReplyButton};

/// A message to append to a conversation's history.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub wa_id: WaId,
    pub role: MessageRole,
    pub content: String,
    pub agent: Option<AgentName>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    /// For a human message: the inbox messages it carries (several when merged). Lets a
    /// resumed turn see that they are already in the history.
    pub wamids: Vec<WaMessageId>,
    /// For a tool message, or an AI message of offline mode: what the customer is shown with
    /// the turn's reply (photos, a list to tap, buttons), sent after its text.
    pub attachments: Vec<Attachment>,
    pub at: DateTime<Utc>,
}

impl NewMessage {
    /// An AI message of `agent`: the assistant's (or a step's without a model, or an
    /// operator's) words and tool calls, nothing attached yet.
    pub fn ai(
        wa_id: &WaId,
        content: impl Into<String>,
        agent: impl Into<AgentName>,
        tool_calls: Vec<ToolCall>,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            wa_id: wa_id.clone(),
            role: MessageRole::Ai,
            content: content.into(),
            agent: Some(agent.into()),
            tool_calls,
            tool_call_id: None,
            wamids: Vec::new(),
            attachments: Vec::new(),
            at,
        }
    }
}

/// Something a tool shows the customer besides the assistant's words, in Spanish; the reply
/// puts it into the conversation's language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Attachment {
    /// A photo by its https link, with a caption.
    Image { link: String, caption: String },
    /// Options to tap: `text` above them, one row each.
    List { text: String, rows: Vec<ListRow> },
    /// A question with up to three reply buttons (titles of 20 characters at most); a press
    /// comes back as the button's title.
    Buttons {
        text: String,
        buttons: Vec<ReplyButton>,
    },
}

/// A `messages` document.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Per-conversation, strictly increasing.
    pub seq: i64,
    pub message: NewMessage,
}
