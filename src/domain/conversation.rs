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
    pub agent: AgentName,
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

/// The `agent` of a portal lead's message in the history: the customer's words written on a
/// portal (Idealista…), not on WhatsApp. The assistants read it as where the conversation
/// starts; the reports do not count it as the customer writing to us.
pub const PORTAL_AGENT: &str = "portal_lead";

/// An assistant's name as the prompts folder spells it (`appointment_assistant`), or the name
/// a step taken without one writes in the history (`guard`, `handoff`).
///
/// It reads as a `str` (`Deref`, `Borrow`, comparisons with strings), so code that only
/// reads a name takes `&str` and lookups by name need no copy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentName(String);

impl AgentName {
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for AgentName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for AgentName {
    fn from(name: &str) -> Self {
        Self::new(name)
    }
}

impl From<String> for AgentName {
    fn from(name: String) -> Self {
        Self(name)
    }
}

impl From<&AgentName> for AgentName {
    fn from(name: &AgentName) -> Self {
        name.clone()
    }
}

impl From<AgentName> for String {
    fn from(name: AgentName) -> Self {
        name.0
    }
}

impl std::ops::Deref for AgentName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for AgentName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for AgentName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for AgentName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for AgentName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for AgentName {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<AgentName> for str {
    fn eq(&self, other: &AgentName) -> bool {
        self == other.0
    }
}

impl PartialEq<AgentName> for &str {
    fn eq(&self, other: &AgentName) -> bool {
        *self == other.0
    }
}

/// `conversations.dialog_state`: the subgraph assistant holding the conversation, or none (the
/// role's primary assistant answers). The design allows no other shape, so the type does not
/// either; it is stored and shown as the seed keeps it, a list of at most one name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DialogState(Option<AgentName>);

impl DialogState {
    /// With the primary assistant: `[]`.
    pub fn primary() -> Self {
        Self(None)
    }

    /// Inside the subgraph `agent`: `[agent]`.
    pub fn entered(agent: impl Into<AgentName>) -> Self {
        Self(Some(agent.into()))
    }

    /// The subgraph's name.
    pub fn current(&self) -> Option<&str> {
        self.0.as_ref().map(AgentName::as_str)
    }

    pub fn is_primary(&self) -> bool {
        self.0.is_none()
    }

    /// The stored form: `[]` or `[agent]`.
    pub fn to_list(&self) -> Vec<String> {
        self.0.iter().map(|agent| agent.0.clone()).collect()
    }

    /// From the stored list. A list of several names is no state this service writes (a hand
    /// edit): the last one is followed, as the seed's `dialog_state[-1]`, and the caller hears
    /// how many there were.
    pub fn from_list(mut names: Vec<String>) -> (Self, Option<usize>) {
        let several = (names.len() > 1).then_some(names.len());
        (Self(names.pop().map(AgentName)), several)
    }
}

impl std::fmt::Display for DialogState {
    /// As stored: `[]`, `[appointment_assistant]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(agent) => write!(f, "[{agent}]"),
            None => f.write_str("[]"),
        }
    }
}

impl Serialize for DialogState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_list().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DialogState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self::from_list(Vec::<String>::deserialize(deserializer)?).0)
    }
}
