//! A conversation's vocabulary: who the user is to the business, who wrote a message, the
//! action waiting for a yes, and the operator who took over.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Prospect,
    Owner,
    Agent,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Prospect => "prospect",
            Role::Owner => "owner",
            Role::Agent => "agent",
        }
    }

    /// Unknown roles (typed by hand in mongosh) count as the least privileged.
    pub fn parse(s: &str) -> Self {
        match s {
            "owner" => Role::Owner,
            "agent" => Role::Agent,
            _ => Role::Prospect,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    Human,
    Ai,
    Tool,
}

impl MessageRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::Human => "human",
            MessageRole::Ai => "ai",
            MessageRole::Tool => "tool",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "human" => MessageRole::Human,
            "ai" => MessageRole::Ai,
            "tool" => MessageRole::Tool,
            _ => return None,
        })
    }
}

/// A tool call that changes data, held until the user confirms it (`conversations.pending_action`).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingAction {
    /// Carried by its Confirm / Cancel buttons, so that only its own buttons answer it; empty
    /// for an action stored before ids (its old buttons are stale, and it is asked again).
    pub id: String,
    pub tool: String,
    pub args: serde_json::Value,
    /// The one line the user was asked to confirm.
    pub summary: String,
    /// The assistant that asked.
    pub agent: String,
    pub created_at: DateTime<Utc>,
}

/// `conversations.handoff`: an operator answers instead of the bot until they release the
/// conversation or `until` passes, whichever comes first.
#[derive(Debug, Clone, PartialEq)]
pub struct Handoff {
    pub operator: String,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

impl Handoff {
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        now < self.until
    }
}
