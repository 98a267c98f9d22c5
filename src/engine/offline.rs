//! Offline mode's seam: when no model can answer (no key, every provider down, the breaker
//! open, the budget spent), the assistant a message is routed to is served by a deterministic
//! engine over the same tools instead of the model. It reads the conversation and answers with
//! what a model would have: tool calls (run by the Router like any other, confirmations
//! included) or a reply. The engine that knows the business's data implements it
//! (`crate::realestate::offline`); this side knows only the turn.

use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::agents::Agent;
use crate::domain::{GeoPoint, Role, ToolCall};
use crate::store::{Attachment, StoredMessage};

/// What an offline assistant sees of the turn.
pub struct OfflineTurn<'a> {
    pub agent: &'a Agent,
    pub role: Role,
    /// The conversation's language (`es` when not known yet).
    pub lang: &'a str,
    /// The last location the customer shared.
    pub location: Option<GeoPoint>,
    /// The window, oldest first; the last message is the customer's or the results of the
    /// calls this assistant (or the model, before it went down) made.
    pub messages: &'a [StoredMessage],
    pub now: DateTime<Utc>,
    /// The assistants this customer may be sent to (for a menu of what can be done).
    pub assistants: Vec<&'a str>,
    /// How the customer reaches the agency's people, when known.
    pub contact: Option<&'a str>,
}

/// What an offline assistant does with the turn: the same moves a model makes.
#[derive(Debug, Clone, PartialEq)]
pub enum OfflineAnswer {
    /// Run these tools (a data-changing one asks the customer to confirm first).
    Calls(Vec<ToolCall>),
    /// Answer the customer: words, then what they can tap.
    Reply {
        text: String,
        attachments: Vec<Attachment>,
    },
    /// Put the customer through to the staff on duty, for `reason` (told to them).
    Handoff { reason: String },
    /// Hand the customer's message to another assistant, which has the tools for it (a listing
    /// picked in a search, whose photos only the property assistant sends).
    Transfer { to: &'static str },
}

/// The assistants served without a model.
#[async_trait]
pub trait OfflineAssistants: Send + Sync + 'static {
    /// `None`: not an assistant this engine knows; its prompt's `offline_reply` answers.
    async fn answer(&self, turn: &OfflineTurn<'_>) -> Option<OfflineAnswer>;

    /// Whether the assistant holding the conversation serves the customer's last message
    /// itself, whatever the router reads in it.
    fn keeps(&self, turn: &OfflineTurn<'_>) -> Keep;

    /// The assistant the customer's last message asks for by the domain's own words (a visit,
    /// an offer, a mortgage, a listing's reference), where the router could not tell.
    fn route(&self, turn: &OfflineTurn<'_>) -> Option<&'static str>;
}

/// How much an offline assistant holds on to the customer's last message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// It answers what the assistant just showed (a city picked, a button pressed): its own,
    /// whatever the words alone read as.
    Answer,
    /// The assistant can serve it (a search's criteria): kept unless the router reads it as
    /// another assistant's.
    Own,
    /// Nothing of its own: the router decides.
    No,
}

/// Whether this process answers without a model, and since when: what the console shows. An
/// atomic, not a lock: every model call that answers checks it.
#[derive(Debug, Default)]
pub struct ModelStatus {
    /// Milliseconds since the epoch when the spell began; 0 while a model answers.
    offline_since_ms: AtomicI64,
}

impl ModelStatus {
    /// A turn found no model: offline from `at`, unless already.
    pub fn went_offline(&self, at: DateTime<Utc>) {
        let ms = at.timestamp_millis().max(1);
        if self
            .offline_since_ms
            .compare_exchange(0, ms, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            tracing::warn!("no model answers: the assistants are served offline");
            metrics::gauge!("zaguan_offline").set(1.0);
        }
    }

    /// A model answered: back online.
    pub fn answered(&self) {
        if self.offline_since_ms.load(Ordering::Acquire) != 0
            && self.offline_since_ms.swap(0, Ordering::AcqRel) != 0
        {
            tracing::info!("a model answers again: offline mode is over");
            metrics::gauge!("zaguan_offline").set(0.0);
        }
    }

    /// When the offline spell still going on began; `None` while a model answers.
    pub fn offline_since(&self) -> Option<DateTime<Utc>> {
        match self.offline_since_ms.load(Ordering::Acquire) {
            0 => None,
            ms => DateTime::from_timestamp_millis(ms),
        }
    }
}
