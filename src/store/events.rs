//! `events`: what happened in the business that the agency's CRM should hear of — a visit
//! booked, an offer made, a customer asking for a person, a new lead. Written in the step that
//! makes the change, under an id derived from what changed (so a replayed step writes nothing
//! new), then delivered by [`crate::crm`] in order per conversation, once.

use chrono::{DateTime, Utc};

pub use crate::domain::BusinessEvent;
use crate::domain::WaId;

/// Where an event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStatus {
    /// Not delivered yet (maybe waiting for a retry).
    Pending,
    Delivered,
    /// Refused for good by a receiver, or not accepted within a day: listed for an operator.
    Failed,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Delivered => "delivered",
            EventStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A conversation in an event's id: 16 hex digits of SHA-256 over its key, the same for every
/// event of it, and not its number.
pub(crate) fn conversation_digest(wa_id: &WaId) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::new()
        .chain_update(b"zaguan:event:")
        .chain_update(wa_id.as_str().as_bytes())
        .finalize();
    hex::encode(&digest[..8])
}

/// An `events` document.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `{type}:{conversation}:{subject}`, the conversation as a digest of its number (no phone
    /// number in an id: it travels as the receivers' `Idempotency-Key`, into their logs).
    pub id: String,
    /// The conversation it belongs to: events of one conversation are delivered in order.
    pub wa_id: WaId,
    pub at: DateTime<Utc>,
    pub event: BusinessEvent,
    pub status: EventStatus,
    pub attempts: u32,
    /// Not before then (a retry's backoff).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Held by an instance delivering it until then.
    pub claimed_until: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    /// The last receiver's answer or the network error.
    pub error: Option<String>,
}

impl Event {
    /// A new event of `wa_id`'s conversation, at `at`.
    pub fn new(wa_id: &WaId, event: BusinessEvent, at: DateTime<Utc>) -> Self {
        Self::keyed(wa_id, event, at, &at.timestamp_millis().to_string())
    }

    /// A new event made by the step `key` names (a tool call, an inbound message): an event
    /// that names no record of its own takes the key as its subject, so the step replayed
    /// after a crash writes the same id again.
    pub fn keyed(wa_id: &WaId, event: BusinessEvent, at: DateTime<Utc>, key: &str) -> Self {
        let subject = event.subject().unwrap_or_else(|| key.to_owned());
        let conversation = conversation_digest(wa_id);
        let id = if subject.is_empty() {
            format!("{}:{conversation}", event.kind())
        } else {
            format!("{}:{conversation}:{subject}", event.kind())
        };
        Self {
            id,
            wa_id: wa_id.clone(),
            at,
            event,
            status: EventStatus::Pending,
            attempts: 0,
            next_attempt_at: None,
            claimed_until: None,
            delivered_at: None,
            error: None,
        }
    }

    /// The JSON body receivers get.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::to_value(&self.event).unwrap_or_default();
        body["id"] = serde_json::json!(self.id);
        body["at"] = serde_json::json!(self.at);
        body["conversation"] = serde_json::json!(self.wa_id.as_str());
        body
    }
}

/// How a delivery attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum EventUpdate {
    Delivered { at: DateTime<Utc> },
    Retry { at: DateTime<Utc>, error: String },
    Failed { error: String },
}

/// Which events an operator lists.
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    pub status: Option<EventStatus>,
    pub since: Option<DateTime<Utc>>,
    pub wa_id: Option<WaId>,
    /// Only events of this type (`lead.created`…).
    pub kind: Option<String>,
    pub limit: usize,
    /// The oldest `limit` events rather than the newest (an export pages forward from `since`).
    pub oldest_first: bool,
}

impl Event {
    /// The event after `update`, let go by whoever held it.
    pub fn apply(&mut self, update: &EventUpdate) {
        self.attempts += 1;
        self.claimed_until = None;
        match update {
            EventUpdate::Delivered { at } => {
                self.status = EventStatus::Delivered;
                self.delivered_at = Some(*at);
                self.error = None;
            }
            EventUpdate::Retry { at, error } => {
                self.next_attempt_at = Some(*at);
                self.error = Some(error.clone());
            }
            EventUpdate::Failed { error } => {
                self.status = EventStatus::Failed;
                self.error = Some(error.clone());
            }
        }
    }
}

impl EventQuery {
    pub fn admits(&self, event: &Event) -> bool {
        self.status.is_none_or(|s| s == event.status)
            && self.since.is_none_or(|since| event.at >= since)
            && self.wa_id.as_ref().is_none_or(|w| *w == event.wa_id)
            && self.kind.as_deref().is_none_or(|k| k == event.event.kind())
    }
}

/// Of pending events oldest first, the first of each conversation, when it is due and not
/// held: the ones behind a waiting event wait with it, so a conversation's events arrive in
/// order.
pub fn heads_due(
    pending: impl IntoIterator<Item = Event>,
    now: DateTime<Utc>,
    limit: usize,
) -> Vec<Event> {
    let mut seen = std::collections::HashSet::new();
    pending
        .into_iter()
        .filter(|e| seen.insert(e.wa_id.clone()))
        .filter(|e| {
            e.next_attempt_at.is_none_or(|at| at <= now)
                && e.claimed_until.is_none_or(|until| until <= now)
        })
        .take(limit)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_names_its_conversation_without_its_number() {
        let wa_id = WaId::parse("34611300005").unwrap();
        let at = Utc::now();
        let event = BusinessEvent::HandoffRequested {
            reason: "Quiere una persona".into(),
        };
        let first = Event::keyed(&wa_id, event.clone(), at, "call_7");
        assert!(!first.id.contains("34611300005"), "{}", first.id);
        assert!(!first.id.contains("611300005"), "{}", first.id);
        assert!(first.id.starts_with("handoff.requested:"), "{}", first.id);
        // The same step writes the same id; another conversation's, another.
        assert_eq!(
            Event::keyed(&wa_id, event.clone(), at, "call_7").id,
            first.id
        );
        let other = WaId::parse("34611300006").unwrap();
        assert_ne!(Event::keyed(&other, event, at, "call_7").id, first.id);
    }
}
