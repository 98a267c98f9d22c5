//! `conversations`: where each conversation stands, and how operators find them.

use crate::domain::{AgentName, DialogState};
use crate::domain::{GeoPoint, Handoff, PendingAction, Role, WaId};
use chrono::{DateTime, Utc};

use crate::store::RoleSource;

/// A `conversations` document (the fields this version reads).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub wa_id: WaId,
    /// The phone number, when known.
    pub phone: Option<String>,
    pub user_id: Option<String>,
    /// The subgraph holding the conversation, if any.
    pub dialog_state: DialogState,
    pub lang: Option<String>,
    /// Opens WhatsApp's 24-hour customer-service window.
    pub last_inbound_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    /// When the current `dialog_state` was entered (for the idle TTL).
    pub state_entered_at: Option<DateTime<Utc>>,
    /// A data-changing tool call waiting for the user's yes or no.
    pub pending_action: Option<PendingAction>,
    /// The last location the user shared.
    pub location: Option<GeoPoint>,
    /// Who last reset the conversation by hand, and when.
    pub reset_by: Option<String>,
    pub reset_at: Option<DateTime<Utc>>,
    /// When someone other than the conversation's turns last wrote to its history (an
    /// operator's reply): a window read before then is stale.
    pub history_at: Option<DateTime<Utc>>,
    /// The user's role as last set by staff (`users.role` is the record; this copy lets a
    /// turn read one document).
    pub role: Option<Role>,
    /// Who set that copy.
    pub role_source: Option<RoleSource>,
    /// A human operator has the conversation: the bot stays silent.
    pub handoff: Option<Handoff>,
    /// An assistant asked for a person, and no operator has taken the conversation yet.
    pub handoff_requested: Option<HandoffRequest>,
}

/// `conversations.handoff_requested`: the customer asked for a person, and how far the staff
/// on duty have been told (the first one, the next one after `ZAGUAN_HANDOFF_SLA`, then all).
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffRequest {
    /// When the first request came: the customer has waited since then.
    pub at: DateTime<Utc>,
    /// Every reason given, in order, joined with « · »: what operators read.
    pub reason: String,
    /// Each request: a repeated one is appended, never overwrites the first.
    pub reasons: Vec<HandoffReason>,
    /// The staff members told so far (`staff._id`), in order.
    pub notified: Vec<String>,
    /// How far the escalation went: 0 nobody told yet, 1 the first on duty, 2 the next one,
    /// 3 all of them.
    pub level: u8,
    /// When the next notice is due; `None`: nothing left to send.
    pub next_notice_at: Option<DateTime<Utc>>,
    /// The notices that could not reach their staff member, skipped or refused by WhatsApp:
    /// what the queue shows, and who is not tried again for this request.
    pub failures: Vec<NoticeFailure>,
}

/// A staff notice of a handoff request that did not reach its staff member.
#[derive(Debug, Clone, PartialEq)]
pub struct NoticeFailure {
    /// The staff member's number.
    pub member: WaId,
    /// Why, as operators read it (the refusal's code and message, or the rule that held it).
    pub reason: String,
    pub at: DateTime<Utc>,
}

impl HandoffRequest {
    /// Whether the notices left `member` unreached for this request.
    pub fn failed_for(&self, member: &WaId) -> bool {
        self.failures.iter().any(|f| f.member == *member)
    }
}

/// One request for a person: when, why, and the key of the step that made it (a tool call,
/// an inbound message), so a step replayed after a crash appends nothing new.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffReason {
    pub at: DateTime<Utc>,
    pub reason: String,
    pub key: String,
}

impl HandoffRequest {
    /// A first request, its first notice due at `next_notice_at`.
    pub fn first(reason: HandoffReason, next_notice_at: Option<DateTime<Utc>>) -> Self {
        Self {
            at: reason.at,
            reason: reason.reason.clone(),
            reasons: vec![reason],
            notified: Vec::new(),
            level: 0,
            next_notice_at,
            failures: Vec::new(),
        }
    }

    /// `reason` added, unless its key is there already: whether it was added.
    pub fn add(&mut self, reason: HandoffReason) -> bool {
        if !reason.key.is_empty() && self.reasons.iter().any(|r| r.key == reason.key) {
            return false;
        }
        self.reasons.push(reason);
        self.reason = self
            .reasons
            .iter()
            .map(|r| r.reason.as_str())
            .collect::<Vec<_>>()
            .join(" · ");
        true
    }
}

/// What one escalation step of a handoff request did: who it told, and when the next is due.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffStep {
    pub level: u8,
    /// Staff told in this step (`staff._id`), added to `notified`.
    pub told: Vec<String>,
    /// Staff who could not be told in this step, added to `failures`.
    pub failed: Vec<NoticeFailure>,
    pub next_notice_at: Option<DateTime<Utc>>,
}

impl Conversation {
    /// When anything last happened: the user wrote or the conversation moved. The stores
    /// only ever raise `updated_at`, and raise it with `last_inbound_at`, so for a conversation
    /// written by this version it is `updated_at`, which MongoDB can sort by from an index.
    pub fn last_activity(&self) -> Option<DateTime<Utc>> {
        self.last_inbound_at.max(self.updated_at)
    }

    /// A conversation never written: with the primary agent, nothing known.
    pub fn new(wa_id: WaId) -> Self {
        Self {
            wa_id,
            phone: None,
            user_id: None,
            dialog_state: DialogState::primary(),
            lang: None,
            last_inbound_at: None,
            updated_at: None,
            state_entered_at: None,
            pending_action: None,
            location: None,
            reset_by: None,
            reset_at: None,
            history_at: None,
            role: None,
            role_source: None,
            handoff: None,
            handoff_requested: None,
        }
    }
}

/// A conversation's latest lease, as operators see it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LeaseView {
    /// The instance (`ZAGUAN_INSTANCE_ID`) or tool holding it.
    pub owner: String,
    pub until: DateTime<Utc>,
    pub released: bool,
}

/// Which conversations an operator lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationQuery {
    /// Only conversations whose `dialog_state` holds this agent.
    pub agent: Option<AgentName>,
    /// Only conversations with no activity since then.
    pub idle_since: Option<DateTime<Utc>>,
    /// Only conversations in this handoff state.
    pub handoff: Option<HandoffFilter>,
    /// Only conversations held by an assistant other than the primary one.
    pub in_assistant: bool,
    pub skip: usize,
    pub limit: usize,
}

impl ConversationQuery {
    /// Whether `conversation` is one this query asks for (its page aside).
    pub fn admits(&self, conversation: &Conversation) -> bool {
        self.agent
            .as_ref()
            .is_none_or(|agent| conversation.dialog_state.current() == Some(agent.as_str()))
            && self
                .idle_since
                .is_none_or(|since| conversation.last_activity().is_none_or(|at| at <= since))
            && self
                .handoff
                .is_none_or(|filter| filter.admits(conversation))
            && (!self.in_assistant || !conversation.dialog_state.is_primary())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffFilter {
    /// An assistant asked for a person; nobody took it yet.
    Requested,
    /// An operator has it at this instant.
    ActiveAt(DateTime<Utc>),
}

impl HandoffFilter {
    pub fn admits(self, conversation: &Conversation) -> bool {
        match self {
            HandoffFilter::Requested => conversation.handoff_requested.is_some(),
            HandoffFilter::ActiveAt(now) => conversation
                .handoff
                .as_ref()
                .is_some_and(|handoff| handoff.is_active(now)),
        }
    }
}
