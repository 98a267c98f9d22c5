//! A business event: what happened in the business that the agency's CRM should hear of (a
//! visit booked, an offer made, a customer asking for a person, a new lead). Vocabulary: the
//! store keeps it (`events`), `crm` delivers it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What happened, with only what a receiver needs. Serialised as `{"type": …, "data": {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum BusinessEvent {
    #[serde(rename = "appointment.booked")]
    AppointmentBooked {
        appointment_id: String,
        property_id: String,
        starts_at: DateTime<Utc>,
    },
    #[serde(rename = "appointment.rescheduled")]
    AppointmentRescheduled {
        appointment_id: String,
        property_id: String,
        previous_starts_at: DateTime<Utc>,
        starts_at: DateTime<Utc>,
    },
    #[serde(rename = "appointment.cancelled")]
    AppointmentCancelled {
        appointment_id: String,
        property_id: String,
        starts_at: DateTime<Utc>,
    },
    #[serde(rename = "offer.submitted")]
    OfferSubmitted {
        offer_id: String,
        property_id: String,
        amount: u64,
        currency: String,
        conditions: Option<String>,
    },
    #[serde(rename = "visit_feedback.recorded")]
    VisitFeedbackRecorded {
        visit_id: String,
        property_id: String,
        interest: String,
        feedback: String,
    },
    #[serde(rename = "handoff.requested")]
    HandoffRequested { reason: String },
    #[serde(rename = "handoff.taken")]
    HandoffTaken {
        operator: String,
        until: DateTime<Utc>,
    },
    #[serde(rename = "handoff.released")]
    HandoffReleased { operator: String },
    /// A contact wrote for the first time; `assistant` is the one their first message reached.
    #[serde(rename = "lead.created")]
    LeadCreated {
        name: Option<String>,
        assistant: String,
    },
    #[serde(rename = "listing_change.requested")]
    ListingChangeRequested {
        request_id: String,
        property_id: String,
        change: String,
        new_price: Option<u64>,
    },
    #[serde(rename = "callback.requested")]
    CallbackRequested {
        request_id: String,
        reason: String,
        preferred_time: Option<String>,
    },
    /// A booked visit took place (`by`: who recorded it).
    #[serde(rename = "visit.done")]
    VisitDone {
        appointment_id: String,
        visit_id: String,
        property_id: String,
        starts_at: DateTime<Utc>,
        by: String,
    },
    #[serde(rename = "visit.no_show")]
    VisitNoShow {
        appointment_id: String,
        property_id: String,
        starts_at: DateTime<Utc>,
        by: String,
    },
    #[serde(rename = "offer.accepted")]
    OfferAccepted {
        offer_id: String,
        property_id: String,
        amount: u64,
        currency: String,
        by: String,
    },
    #[serde(rename = "offer.rejected")]
    OfferRejected {
        offer_id: String,
        property_id: String,
        amount: u64,
        currency: String,
        by: String,
    },
    #[serde(rename = "offer.countered")]
    OfferCountered {
        offer_id: String,
        property_id: String,
        amount: u64,
        counter_amount: u64,
        currency: String,
        by: String,
    },
    /// A portal or the CRM sent a lead (`leads`): what it asked about, and how it was taken.
    #[serde(rename = "lead.received")]
    LeadReceived {
        lead_id: String,
        source: String,
        listing_id: Option<String>,
        status: String,
    },
}

impl BusinessEvent {
    /// Every type, as receivers and `ZAGUAN_EVENTS_TYPES` name them.
    pub const TYPES: [&'static str; 17] = [
        "appointment.booked",
        "appointment.rescheduled",
        "appointment.cancelled",
        "offer.submitted",
        "visit_feedback.recorded",
        "handoff.requested",
        "handoff.taken",
        "handoff.released",
        "lead.created",
        "listing_change.requested",
        "callback.requested",
        "visit.done",
        "visit.no_show",
        "offer.accepted",
        "offer.rejected",
        "offer.countered",
        "lead.received",
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            BusinessEvent::AppointmentBooked { .. } => Self::TYPES[0],
            BusinessEvent::AppointmentRescheduled { .. } => Self::TYPES[1],
            BusinessEvent::AppointmentCancelled { .. } => Self::TYPES[2],
            BusinessEvent::OfferSubmitted { .. } => Self::TYPES[3],
            BusinessEvent::VisitFeedbackRecorded { .. } => Self::TYPES[4],
            BusinessEvent::HandoffRequested { .. } => Self::TYPES[5],
            BusinessEvent::HandoffTaken { .. } => Self::TYPES[6],
            BusinessEvent::HandoffReleased { .. } => Self::TYPES[7],
            BusinessEvent::LeadCreated { .. } => Self::TYPES[8],
            BusinessEvent::ListingChangeRequested { .. } => Self::TYPES[9],
            BusinessEvent::CallbackRequested { .. } => Self::TYPES[10],
            BusinessEvent::VisitDone { .. } => Self::TYPES[11],
            BusinessEvent::VisitNoShow { .. } => Self::TYPES[12],
            BusinessEvent::OfferAccepted { .. } => Self::TYPES[13],
            BusinessEvent::OfferRejected { .. } => Self::TYPES[14],
            BusinessEvent::OfferCountered { .. } => Self::TYPES[15],
            BusinessEvent::LeadReceived { .. } => Self::TYPES[16],
        }
    }

    /// What changed, for the event's id: the same change always gives the same id. `None`
    /// for the events that name no record (handoffs): the step's key, or the time, stands in.
    pub(crate) fn subject(&self) -> Option<String> {
        Some(match self {
            BusinessEvent::HandoffRequested { .. }
            | BusinessEvent::HandoffTaken { .. }
            | BusinessEvent::HandoffReleased { .. } => return None,
            other => other.record_subject(),
        })
    }

    fn record_subject(&self) -> String {
        match self {
            BusinessEvent::AppointmentBooked { appointment_id, .. }
            | BusinessEvent::AppointmentCancelled { appointment_id, .. } => appointment_id.clone(),
            BusinessEvent::AppointmentRescheduled {
                appointment_id,
                starts_at,
                ..
            } => format!("{appointment_id}@{}", starts_at.timestamp()),
            // An offer is accepted, rejected or countered once at most (each answer moves it
            // from the status the answer is to).
            BusinessEvent::OfferSubmitted { offer_id, .. }
            | BusinessEvent::OfferAccepted { offer_id, .. }
            | BusinessEvent::OfferRejected { offer_id, .. }
            | BusinessEvent::OfferCountered { offer_id, .. } => offer_id.clone(),
            BusinessEvent::VisitDone { appointment_id, .. }
            | BusinessEvent::VisitNoShow { appointment_id, .. } => appointment_id.clone(),
            BusinessEvent::VisitFeedbackRecorded { visit_id, .. } => visit_id.clone(),
            BusinessEvent::LeadReceived { lead_id, .. } => lead_id.clone(),
            BusinessEvent::ListingChangeRequested { request_id, .. }
            | BusinessEvent::CallbackRequested { request_id, .. } => request_id.clone(),
            BusinessEvent::LeadCreated { .. }
            | BusinessEvent::HandoffRequested { .. }
            | BusinessEvent::HandoffTaken { .. }
            | BusinessEvent::HandoffReleased { .. } => String::new(),
        }
    }
}
