//! `users`: who wrote, and their role.

use crate::domain::{InboundMessage, Referral, Role, WaId};
use chrono::{DateTime, Utc};

/// A sender as an inbound message shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactSeen {
    pub wa_id: WaId,
    pub phone: Option<String>,
    pub user_id: Option<String>,
    pub name: Option<String>,
    pub username: Option<String>,
    pub seen_at: DateTime<Utc>,
}

impl ContactSeen {
    /// `seen_at` is when the user wrote (WhatsApp's timestamp), not when the webhook arrived:
    /// a redelivery hours later must not stretch the 24-hour window. Clocks ahead of `now` are
    /// not trusted.
    pub fn from_message(message: &InboundMessage, now: DateTime<Utc>) -> Self {
        Self {
            wa_id: message.wa_id.clone(),
            phone: message.phone.clone(),
            user_id: message.user_id.clone(),
            name: message.name.clone(),
            username: message.username.clone(),
            seen_at: message.sent_at.map_or(now, |sent| sent.min(now)),
        }
    }
}

/// Who decided a user's role (`users.role_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleSource {
    /// The business data: the number is an owner's or a staff member's, or neither (a
    /// prospect). It follows the data when the link changes.
    Data,
    /// An operator set it: the data no longer moves it.
    Operator,
}

impl RoleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RoleSource::Data => "data",
            RoleSource::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "data" => Some(RoleSource::Data),
            "operator" => Some(RoleSource::Operator),
            _ => None,
        }
    }
}

/// A role given to a user: by whom (an operator's name, or `data`) and when.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleAssignment {
    pub role: Role,
    pub source: RoleSource,
    pub by: String,
    pub at: DateTime<Utc>,
}

/// A `users` document.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub wa_id: WaId,
    pub name: Option<String>,
    pub username: Option<String>,
    pub role: Role,
    pub lang: Option<String>,
    /// Who set `role` (`None`: nobody yet, or by hand in the database), by whom and when.
    pub role_source: Option<RoleSource>,
    pub role_set_by: Option<String>,
    pub role_set_at: Option<DateTime<Utc>>,
    /// The contact asked for no proactive messages (`users.opted_out_at`): no reminder, alert,
    /// re-engagement or marketing goes to them; replies to their messages still do.
    pub opted_out_at: Option<DateTime<Utc>>,
    /// How they asked (`users.opt_out_source`): `keyword:BAJA`, `operator:lucia`…
    pub opt_out_source: Option<String>,
    /// When they first wrote and were answered (`users.lead_at`): a lead, kept as long as the
    /// profile, whatever the events' retention.
    pub lead_at: Option<DateTime<Utc>>,
    /// The assistant their first message led to (`users.lead_assistant`).
    pub lead_assistant: Option<String>,
    /// The portal or CRM that first sent them as a lead (`users.lead_source`).
    pub lead_source: Option<String>,
    /// They stopped marketing messages from inside WhatsApp (`users.marketing_opted_out_at`):
    /// no marketing template goes to them; utility ones and replies still do.
    pub marketing_opted_out_at: Option<DateTime<Utc>>,
    /// When they last chose (stop or resume): an older choice delivered late changes nothing.
    pub marketing_choice_at: Option<DateTime<Utc>>,
    /// The click-to-WhatsApp ad their first message came from (`users.referral`), and when.
    pub referral: Option<Referral>,
    pub referral_at: Option<DateTime<Utc>>,
}

/// The source of a contact who came from a click-to-WhatsApp ad.
pub const AD_SOURCE: &str = "click_to_whatsapp_ad";
/// The source of a contact who wrote on WhatsApp of their own accord.
pub const ORGANIC_SOURCE: &str = "organic";

/// A contact's wish not to be written to first (`users.opted_out_at`, `opt_out_source`).
#[derive(Debug, Clone, PartialEq)]
pub struct OptOut {
    pub at: DateTime<Utc>,
    pub source: String,
}

impl User {
    /// Whether the contact asked for no proactive messages.
    pub fn opted_out(&self) -> bool {
        self.opted_out_at.is_some()
    }

    /// Where the contact came from, as the funnel and the events say it: the portal or CRM
    /// that sent them as a lead, else [`AD_SOURCE`] for a click-to-WhatsApp ad, else
    /// [`ORGANIC_SOURCE`] (they wrote first).
    pub fn source(&self) -> &str {
        match (&self.lead_source, &self.referral) {
            (Some(source), _) => source,
            (None, Some(_)) => AD_SOURCE,
            (None, None) => ORGANIC_SOURCE,
        }
    }

    /// Someone never seen: a prospect.
    pub fn new(wa_id: WaId) -> Self {
        Self {
            wa_id,
            name: None,
            username: None,
            role: Role::Prospect,
            lang: None,
            role_source: None,
            role_set_by: None,
            role_set_at: None,
            opted_out_at: None,
            opt_out_source: None,
            lead_at: None,
            lead_assistant: None,
            lead_source: None,
            marketing_opted_out_at: None,
            marketing_choice_at: None,
            referral: None,
            referral_at: None,
        }
    }

    /// Whether the role follows the business data: one the data set, or the prospect everyone
    /// starts as. A role an operator set, or one typed into `users` by hand, stays.
    pub fn role_follows_data(&self) -> bool {
        match self.role_source {
            Some(RoleSource::Data) => true,
            Some(RoleSource::Operator) => false,
            None => self.role == Role::Prospect,
        }
    }
}
