//! The records the store keeps, one type per collection document (ARCHITECTURE.md §5).

use crate::domain::DialogState;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::{
    Content, GeoPoint, GraphError, Handoff, InboundMessage, MessageRole, OutboxId, PendingAction,
    Role, ToolCall, WaId, WaMessageId,
};

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

/// A part of an accepted webhook that could not be typed (`webhook_rejects`).
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedEntry {
    /// `message` or `status`.
    pub what: String,
    pub reason: String,
    pub raw: String,
    pub at: DateTime<Utc>,
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
}

impl User {
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

/// `conversations.handoff_requested`: the customer asked for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffRequest {
    pub at: DateTime<Utc>,
    /// In the assistant's words, for the operator.
    pub reason: String,
}

impl Conversation {
    /// When anything last happened: the user wrote or the conversation moved.
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

/// What the cleanup job may delete: records older than each date (`None`: keep them all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeBefore {
    /// Inbox messages `done` or `failed` that arrived before, and rejected updates.
    pub inbox: Option<DateTime<Utc>>,
    /// Outbox parts past sending (`sent` … `read`, `failed`) queued before.
    pub outbox: Option<DateTime<Utc>>,
    /// History messages written before.
    pub messages: Option<DateTime<Utc>>,
    pub llm_calls: Option<DateTime<Utc>>,
    /// Lease records expired before.
    pub leases: Option<DateTime<Utc>>,
    /// Business events delivered or failed that happened before.
    pub events: Option<DateTime<Utc>>,
}

/// A conversation's latest lease, as operators see it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LeaseView {
    /// The instance (`ZAGUAN_INSTANCE_ID`) or tool holding it.
    pub owner: String,
    pub until: DateTime<Utc>,
    pub released: bool,
}

/// Inbox messages of a period by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct InboxOutcomes {
    pub answered: u64,
    pub failed: u64,
    /// Still pending or being answered.
    pub open: u64,
}

/// Documents deleted by one purge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeCounts {
    pub inbox: u64,
    pub outbox: u64,
    pub messages: u64,
    pub llm_calls: u64,
    pub leases: u64,
    /// Rejected webhook updates, kept as long as the inbox.
    pub webhook_rejects: u64,
    pub events: u64,
}

/// Documents deleted by forgetting one user (`zaguan users forget`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ForgetCounts {
    pub conversations: u64,
    pub users: u64,
    pub messages: u64,
    pub inbox: u64,
    pub outbox: u64,
    pub llm_calls: u64,
    pub leases: u64,
    /// Rejected webhook bodies that mention the number.
    pub webhook_rejects: u64,
    /// Business events of the conversation (delivered or not).
    pub events: u64,
}

impl ForgetCounts {
    pub fn total(&self) -> u64 {
        self.conversations
            + self.users
            + self.messages
            + self.inbox
            + self.outbox
            + self.llm_calls
            + self.leases
            + self.webhook_rejects
            + self.events
    }
}

/// Which conversations an operator lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationQuery {
    /// Only conversations whose `dialog_state` holds this agent.
    pub agent: Option<String>,
    /// Only conversations with no activity since then.
    pub idle_since: Option<DateTime<Utc>>,
    /// Only conversations in this handoff state.
    pub handoff: Option<HandoffFilter>,
    pub skip: usize,
    pub limit: usize,
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

/// A message to append to a conversation's history.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub wa_id: WaId,
    pub role: MessageRole,
    pub content: String,
    pub agent: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    /// For a human message: the inbox messages it carries (several when merged). Lets a
    /// resumed turn see that they are already in the history.
    pub wamids: Vec<WaMessageId>,
    /// For a tool message: what the tool shows the customer with the turn's reply (photos, a
    /// list to tap), sent after its text.
    pub attachments: Vec<Attachment>,
    pub at: DateTime<Utc>,
}

/// Something a tool shows the customer besides the assistant's words, in Spanish; the reply
/// puts it into the conversation's language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Attachment {
    /// A photo by its https link, with a caption.
    Image { link: String, caption: String },
    /// Options to tap: `text` above them, one row each.
    List { text: String, rows: Vec<ListRow> },
}

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
}

/// A row of a list message: WhatsApp sends its `id` back when it is tapped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRow {
    pub id: String,
    pub title: String,
    pub description: String,
}

/// A `messages` document.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Per-conversation, strictly increasing.
    pub seq: i64,
    pub message: NewMessage,
}

/// A process's record in `instances`: its heartbeat, and the nonce of the process that holds
/// the instance id now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    pub id: String,
    pub nonce: String,
    /// The database's clock at the last heartbeat.
    pub seen_at: DateTime<Utc>,
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
}

impl OutboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Queued => "queued",
            OutboxStatus::Sending => "sending",
            OutboxStatus::Sent => "sent",
            OutboxStatus::Delivered => "delivered",
            OutboxStatus::Read => "read",
            OutboxStatus::Played => "played",
            OutboxStatus::Failed => "failed",
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
        }
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
