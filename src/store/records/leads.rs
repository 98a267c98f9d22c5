//! `leads`: the enquiries portals and CRMs send about a listing (Idealista's e-mail, a CRM's
//! push), one document per lead, each answered once on WhatsApp.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::WaId;

/// Where a lead stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeadStatus {
    /// Stored, not contacted yet.
    New,
    /// The first contact is queued (a template, or text inside an open window).
    Contacted,
    /// The customer wrote back.
    Answered,
    /// The send governor did not send it (the contact opted out): `why` says so.
    Skipped,
    /// WhatsApp refused the number (131026): the staff were told, with the e-mail.
    Unreachable,
    /// No number WhatsApp could have: stored with why, never contacted.
    Uncontactable,
    /// An e-mail no reader understood: kept whole for the console.
    Unreadable,
}

impl LeadStatus {
    pub const ALL: [LeadStatus; 7] = [
        LeadStatus::New,
        LeadStatus::Contacted,
        LeadStatus::Answered,
        LeadStatus::Skipped,
        LeadStatus::Unreachable,
        LeadStatus::Uncontactable,
        LeadStatus::Unreadable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LeadStatus::New => "new",
            LeadStatus::Contacted => "contacted",
            LeadStatus::Answered => "answered",
            LeadStatus::Skipped => "skipped",
            LeadStatus::Unreachable => "unreachable",
            LeadStatus::Uncontactable => "uncontactable",
            LeadStatus::Unreadable => "unreadable",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// One portal lead (`leads`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortalLead {
    /// `L-…`, derived from what makes two pushes the same lead ([`PortalLead::key`]): the same
    /// lead pushed twice, to any instance, is stored once.
    pub id: String,
    /// `idealista`, `fotocasa`, `habitaclia`, `pisos.com`, a CRM's name…
    pub source: String,
    /// The portal's own id of the lead, when it gives one.
    pub portal_lead_id: Option<String>,
    pub name: Option<String>,
    /// The number as the portal wrote it.
    pub phone: Option<String>,
    /// The number as a WhatsApp id, when it is one.
    pub wa_id: Option<WaId>,
    pub email: Option<String>,
    /// The listing as the portal named it (the agency's reference or the portal's own).
    pub listing_ref: Option<String>,
    /// The agency's listing it names, when Zaguan holds it.
    pub listing_id: Option<String>,
    pub message: Option<String>,
    /// ISO 639-1: the portal's, else the message's.
    pub lang: Option<String>,
    /// When the portal received it.
    pub received_at: DateTime<Utc>,
    /// When Zaguan stored it.
    pub stored_at: DateTime<Utc>,
    pub status: LeadStatus,
    /// Why it is not contacted (no number, opted out, not on WhatsApp, unreadable).
    pub why: Option<String>,
    pub first_contact_at: Option<DateTime<Utc>>,
    /// When the customer first wrote back.
    pub answered_at: Option<DateTime<Utc>>,
    /// The e-mail as received, for a lead that came by e-mail (the console shows the
    /// original of an unreadable one).
    pub raw_email: Option<String>,
}

impl PortalLead {
    /// What makes two pushes one lead: the portal's id, else the number, the listing and the
    /// day; with neither, the e-mail or the text, the listing and the day.
    pub fn key(&self) -> String {
        if let Some(id) = &self.portal_lead_id {
            return format!("{}\u{1f}{id}", self.source);
        }
        let day = self.received_at.date_naive();
        let listing = self.listing_id.as_ref().or(self.listing_ref.as_ref());
        let who = self
            .wa_id
            .as_ref()
            .map(|w| w.as_str().to_owned())
            .or_else(|| self.email.clone().map(|e| e.to_lowercase()))
            .or_else(|| self.message.clone())
            .or_else(|| self.raw_email.clone())
            .unwrap_or_default();
        format!(
            "{who}\u{1f}{}\u{1f}{day}",
            listing.map_or("", String::as_str)
        )
    }

    /// The id [`PortalLead::key`] derives.
    pub fn derived_id(&self) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(self.key().as_bytes());
        format!("L-{}", hex::encode(&digest[..8]))
    }
}

/// Which leads a list shows, newest first.
#[derive(Debug, Clone, Default)]
pub struct LeadFilter {
    pub status: Option<LeadStatus>,
    pub wa_id: Option<WaId>,
    pub since: Option<DateTime<Utc>>,
    pub limit: usize,
    /// Oldest received first (an export's pages) instead of newest.
    pub oldest_first: bool,
}
