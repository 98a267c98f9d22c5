//! `inbox` and `rejected`: what customers sent.

use crate::domain::{Content, InboundMessage, WaId, WaMessageId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Processing state of an inbox entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxStatus {
    Pending,
    Processing,
    Done,
    Failed,
}

impl InboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxStatus::Pending => "pending",
            InboxStatus::Processing => "processing",
            InboxStatus::Done => "done",
            InboxStatus::Failed => "failed",
        }
    }

    /// Not yet answered: waiting, or taken by a turn that may have died.
    pub fn is_open(self) -> bool {
        matches!(self, InboxStatus::Pending | InboxStatus::Processing)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => InboxStatus::Pending,
            "processing" => InboxStatus::Processing,
            "done" => InboxStatus::Done,
            "failed" => InboxStatus::Failed,
            _ => return None,
        })
    }
}

/// One `inbox` document: an inbound message waiting for (or done with) its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxEntry {
    /// `_id`.
    pub wamid: WaMessageId,
    pub wa_id: WaId,
    pub phone_number_id: String,
    /// The WhatsApp message `type`, as sent.
    pub kind: String,
    /// What the message says in words, when it says something.
    pub text: Option<String>,
    /// The message object as received (JSON), unknown fields included: for operators; the
    /// service reads [`content`](Self::content).
    pub payload: String,
    /// What the message says, as the webhook parsed it once.
    pub content: Content,
    /// The message this one replies to.
    pub context_id: Option<String>,
    /// WhatsApp's timestamp of the message.
    pub sent_at: Option<DateTime<Utc>>,
    pub status: InboxStatus,
    pub received_at: DateTime<Utc>,
    pub attempts: u32,
}

impl InboxEntry {
    /// A freshly received message, `pending`.
    pub fn pending(message: &InboundMessage, received_at: DateTime<Utc>) -> Self {
        Self {
            wamid: message.wamid.clone(),
            wa_id: message.wa_id.clone(),
            phone_number_id: message.phone_number_id.clone(),
            kind: message.kind.clone(),
            text: message.content.text(),
            payload: message.raw.clone(),
            content: message.content.clone(),
            context_id: message.context.as_ref().and_then(|c| c.message_id.clone()),
            sent_at: message.sent_at,
            status: InboxStatus::Pending,
            received_at,
            attempts: 0,
        }
    }
}

/// What `insert_inbox` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxInsert {
    pub inserted: usize,
    /// Already present: redeliveries, acknowledged and not processed again.
    pub duplicates: usize,
    /// The ids of those already present.
    pub known: Vec<WaMessageId>,
}

/// A part of an accepted webhook that could not be typed (`webhook_rejects`).
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedEntry {
    /// `message` or `status`.
    pub what: String,
    pub reason: String,
    pub raw: String,
    pub at: DateTime<Utc>,
}

/// The state of the inbox, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxBacklog {
    /// Messages not answered yet (`pending` or `processing`).
    pub open: u64,
    /// When the oldest of them arrived.
    pub oldest_received_at: Option<DateTime<Utc>>,
    /// Messages given up on (`failed`).
    pub failed: u64,
}

/// Inbox messages of a period by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct InboxOutcomes {
    pub answered: u64,
    pub failed: u64,
    /// Still pending or being answered.
    pub open: u64,
}
