//! `outbox`: the parts of a reply, their media and buttons, and their delivery.

use crate::domain::{GraphError, OutboxId, Pricing, WaId, WaMessageId};
use crate::templates::Purpose;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What an outbox part shows besides text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Media {
    /// An image message; the part's `body` is its caption.
    Image { link: String },
    /// An interactive list message: `text` above it, `button` opens it. The part's `body` is
    /// the plain-text form, sent instead when WhatsApp refuses the list.
    List {
        text: String,
        button: String,
        rows: Vec<ListRow>,
    },
    /// An interactive media carousel: `text` above cards of photos, each with the part's
    /// buttons as quick replies. Refused, it goes as `text`, the photos and `question` with
    /// the buttons ([`Fallback::Photos`]).
    Carousel {
        text: String,
        cards: Vec<Card>,
        question: String,
    },
}

/// A carousel's card: a photo and a few words under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Card {
    pub link: String,
    pub caption: String,
}

/// A row of a list message: WhatsApp sends its `id` back when it is tapped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRow {
    pub id: String,
    pub title: String,
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    Queued,
    /// Handed to the Graph API; its answer not recorded yet. An entry left here by a crash
    /// waits for its status webhook (which names it by its callback data) for a grace period,
    /// then is sent again: a reply whose call was accepted but whose record and statuses were
    /// all lost goes out twice (the Graph API has no idempotency key), against losing it.
    Sending,
    Sent,
    Delivered,
    Read,
    /// A voice message was played: after `read`.
    Played,
    Failed,
    /// Not sent, by rule (the contact opted out, their window closed with no template to
    /// send): recorded with the reason in `error`, never sent.
    Skipped,
}

impl OutboxStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Queued => "queued",
            OutboxStatus::Sending => "sending",
            OutboxStatus::Sent => "sent",
            OutboxStatus::Delivered => "delivered",
            OutboxStatus::Read => "read",
            OutboxStatus::Played => "played",
            OutboxStatus::Failed => "failed",
            OutboxStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => OutboxStatus::Queued,
            "sending" => OutboxStatus::Sending,
            "sent" => OutboxStatus::Sent,
            "delivered" => OutboxStatus::Delivered,
            "read" => OutboxStatus::Read,
            "played" => OutboxStatus::Played,
            "failed" => OutboxStatus::Failed,
            "skipped" => OutboxStatus::Skipped,
            _ => return None,
        })
    }

    /// The statuses an entry may be in for `self` to replace it: a status never moves back,
    /// and `failed` only lands on a message not known to have arrived.
    pub fn replaces(self) -> &'static [OutboxStatus] {
        use OutboxStatus::*;
        match self {
            Queued => &[Sending],
            Sending => &[Queued, Sending],
            Sent => &[Queued, Sending],
            Delivered => &[Queued, Sending, Sent],
            Read => &[Queued, Sending, Sent, Delivered],
            Played => &[Queued, Sending, Sent, Delivered, Read],
            Failed => &[Queued, Sending, Sent],
            Skipped => &[],
        }
    }
}

/// A reply to queue: one WhatsApp message, `part` of `parts` of a reply cut to WhatsApp's size.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutbox {
    pub wa_id: WaId,
    pub in_reply_to: Option<WaMessageId>,
    /// The business number the conversation came in on (from the inbound `metadata`); the
    /// reply is sent from it.
    pub phone_number_id: Option<String>,
    pub body: String,
    /// Reply buttons (at most 3, titles ≤ 20 chars): sent as an interactive message.
    pub buttons: Vec<ReplyButton>,
    /// Sent as this approved template instead of `body` (outside the 24-hour window, only
    /// templates are delivered); `body` keeps a readable copy.
    pub template: Option<Template>,
    /// An image or a list instead of plain text.
    pub media: Option<Media>,
    /// 0-based position among the parts of one reply.
    pub part: u32,
    pub parts: u32,
    pub at: DateTime<Utc>,
    /// Sent instead of this text when WhatsApp answers that the contact's window closed
    /// (131047): the approved template for the message's purpose.
    pub fallback: Option<Template>,
    /// What the service wrote it for when it wrote first (a reminder, a staff notice);
    /// `None` for a reply to the contact's message.
    pub purpose: Option<Purpose>,
    /// The customers a staff notice is about: a refusal of it goes back to their handoff
    /// requests, never to the staff member's own conversation.
    pub about: Vec<WaId>,
}

impl NewOutbox {
    /// One message cut into `bodies`, numbered in order, all sent from `phone_number_id`.
    pub fn parts(
        wa_id: &WaId,
        in_reply_to: Option<&WaMessageId>,
        phone_number_id: Option<&str>,
        bodies: &[String],
        at: DateTime<Utc>,
    ) -> Vec<Self> {
        let count = u32::try_from(bodies.len()).unwrap_or(u32::MAX);
        bodies
            .iter()
            .enumerate()
            .map(|(i, body)| Self {
                phone_number_id: phone_number_id.map(str::to_owned),
                part: u32::try_from(i).unwrap_or(u32::MAX),
                parts: count,
                ..Self::text(wa_id.clone(), in_reply_to.cloned(), body.clone(), at)
            })
            .collect()
    }

    /// A one-part text reply.
    pub fn text(
        wa_id: WaId,
        in_reply_to: Option<WaMessageId>,
        body: impl Into<String>,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            wa_id,
            in_reply_to,
            phone_number_id: None,
            body: body.into(),
            buttons: Vec::new(),
            template: None,
            media: None,
            part: 0,
            parts: 1,
            at,
            fallback: None,
            purpose: None,
            about: Vec::new(),
        }
    }
}

/// An approved WhatsApp message template and the values of its body's `{{1}}`, `{{2}}`…
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub name: String,
    /// The template's language code as approved, e.g. `es` or `en_US`.
    pub language: String,
    pub parameters: Vec<String>,
    /// Meta's category (`utility`, `marketing`): template messages are billed by it.
    pub category: Option<String>,
    /// The payloads of the template's quick-reply buttons, in order: what a press sends back
    /// (the same ids as the buttons of the text sent inside the window).
    pub buttons: Vec<String>,
}

/// What a refused part is sent as instead, once.
#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    /// Its words (and the media's link), when WhatsApp would not take the image or the list.
    Text { body: String },
    /// The approved template, when the contact's window had closed.
    Template(Template),
    /// A carousel's pieces, one message each: the text, the photos, the question.
    Photos,
}

/// The approval state of a template, as Meta's webhooks last said it (`templates`).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateStatus {
    pub name: String,
    /// As approved: `es`, `en_US`…
    pub language: String,
    /// `APPROVED`, `PAUSED`, `REJECTED`, `DISABLED`…
    pub status: String,
    pub category: Option<String>,
    pub reason: Option<String>,
    /// Meta's quality rating of it (`GREEN`, `YELLOW`, `RED`), when it sent one.
    pub quality: Option<String>,
    pub at: DateTime<Utc>,
}

impl TemplateStatus {
    /// Whether a template in this state can be sent (one never heard of is taken as approved).
    /// One rated low is not: Meta pauses it next, and the number's quality pays for it.
    pub fn usable(&self) -> bool {
        !matches!(
            self.status.as_str(),
            "PAUSED" | "REJECTED" | "DISABLED" | "PENDING_DELETION" | "ARCHIVED" | "LOCKED"
        ) && self.quality.as_deref() != Some("RED")
    }
}

/// What the sender learnt about an outbox entry.
#[derive(Debug, Clone, PartialEq)]
pub enum OutboxUpdate {
    /// About to call the Graph API at `at` (counts an attempt). Unless its answer or a status
    /// confirms it by `resend_at`, the part may be sent again then (`next_attempt_at`).
    Sending {
        at: DateTime<Utc>,
        resend_at: DateTime<Utc>,
    },
    /// The Graph API accepted it; `None` in a dry run (no access token).
    Sent { wamid: Option<WaMessageId> },
    /// Not sent; try again at `at`.
    Retry {
        at: DateTime<Utc>,
        error: Option<GraphError>,
    },
    /// Not sent and never will be.
    Failed { error: GraphError },
    /// Not sent, by rule, found at send time (an opt-out since it was queued): `skipped`, with
    /// the reason in `error`.
    Skipped { error: GraphError },
}

/// A reply button: the `id` WhatsApp sends back when it is pressed, and its title.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyButton {
    pub id: String,
    pub title: String,
}

impl ReplyButton {
    pub fn new(id: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
        }
    }
}

/// An `outbox` document.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEntry {
    pub id: OutboxId,
    pub wa_id: WaId,
    pub in_reply_to: Option<WaMessageId>,
    pub phone_number_id: Option<String>,
    pub body: String,
    pub buttons: Vec<ReplyButton>,
    pub template: Option<Template>,
    pub media: Option<Media>,
    pub part: u32,
    pub parts: u32,
    pub status: OutboxStatus,
    /// Not to be sent before then: a retry's backoff, or for a part `sending`, the end of the
    /// grace its status has to confirm it.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The Graph API's id, once sent.
    pub wamid: Option<WaMessageId>,
    pub error: Option<GraphError>,
    pub attempts: u32,
    pub at: DateTime<Utc>,
    /// When the last attempt started (its `sending`).
    pub sending_at: Option<DateTime<Utc>>,
    /// When the last status arrived.
    pub status_at: Option<DateTime<Utc>>,
    /// The template to send instead if the window closed (see [`NewOutbox::fallback`]).
    pub fallback: Option<Template>,
    /// A fallback was used: the part is not changed again (exactly once, whichever of the
    /// synchronous refusal and the late `failed` status came first).
    pub fell_back: bool,
    /// See [`NewOutbox::purpose`].
    pub purpose: Option<Purpose>,
    /// See [`NewOutbox::about`].
    pub about: Vec<WaId>,
    /// How Meta bills it, from its status webhooks (`outbox.pricing`).
    pub pricing: Option<Pricing>,
}

impl OutboxEntry {
    /// `entry` just queued under `id`.
    pub fn queued(id: OutboxId, entry: &NewOutbox) -> Self {
        Self {
            id,
            wa_id: entry.wa_id.clone(),
            in_reply_to: entry.in_reply_to.clone(),
            phone_number_id: entry.phone_number_id.clone(),
            body: entry.body.clone(),
            buttons: entry.buttons.clone(),
            template: entry.template.clone(),
            media: entry.media.clone(),
            part: entry.part,
            parts: entry.parts,
            status: OutboxStatus::Queued,
            next_attempt_at: None,
            wamid: None,
            error: None,
            attempts: 0,
            at: entry.at,
            sending_at: None,
            status_at: None,
            fallback: entry.fallback.clone(),
            fell_back: false,
            purpose: entry.purpose,
            about: entry.about.clone(),
            pricing: None,
        }
    }

    /// This part sent as `fallback` instead.
    pub fn fall_back(&mut self, fallback: &Fallback) {
        match fallback {
            Fallback::Text { body } => {
                self.body.clone_from(body);
                self.media = None;
                self.buttons = Vec::new();
            }
            Fallback::Template(template) => self.template = Some(template.clone()),
            Fallback::Photos => {}
        }
        self.fell_back = true;
        self.status = OutboxStatus::Queued;
        self.attempts = 0;
        self.next_attempt_at = None;
        self.wamid = None;
    }
}

/// The parts of a turn's reply to the inbound message `in_reply_to` (which arrived at
/// `received_at`), under ids that are the same every time ([`OutboxId::for_reply`]).
pub fn reply_parts(parts: &[NewOutbox], received_at: DateTime<Utc>) -> Vec<OutboxEntry> {
    parts
        .iter()
        .map(|part| {
            let id = match &part.in_reply_to {
                Some(wamid) => OutboxId::for_reply(wamid, received_at, part.part),
                None => OutboxId(bson::oid::ObjectId::new().to_hex()),
            };
            OutboxEntry::queued(id, part)
        })
        .collect()
}

/// What `apply_status` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    Applied,
    /// Applied to the entry named by the status's callback data, whose wamid was not recorded
    /// yet (the status came first, or the sender died before recording it).
    Reconciled,
    /// The entry is already at or past this status.
    Stale,
    /// The part its callback data names is not recorded yet (its sender records it once the
    /// Graph API answers, or died first): the status is kept for it.
    Early,
    /// No outbox entry has that wamid (not ours, or sent by another system).
    Unknown,
    /// A status value we do not know; recorded in logs only.
    Unrecognised,
}
