//! What the service persists (`docs/operators.md`, what each collection holds): one trait per
//! collection ([`InboxStore`], [`ConversationStore`], [`HistoryStore`], [`OutboxStore`]…),
//! [`Store`] their sum, with two implementations laid out the same way, a file per collection:
//! [`MongoStore`] for production and [`MemoryStore`], the embedded default when `MONGODB_URI` is
//! unset. Both pass the same suite (`tests/suite/store.rs`). [`StoreParts`] assembles a store from
//! parts, so a test can replace the one collection it breaks.
//!
//! Every method is a single-document atomic write or a read: there are no multi-document
//! transactions, and callers order their writes so a crash between two of them is safe to replay.

mod clock;
mod events;
mod memory;
mod mongo;
mod parts;
pub mod pool;
mod records;

use crate::domain::DialogState;
use crate::domain::{Handoff, OutboxId, PendingAction, Role};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use clock::StoreClock;
pub use events::{BusinessEvent, Event, EventQuery, EventStatus, EventUpdate, heads_due};
pub use memory::MemoryStore;
pub use mongo::MongoStore;
pub use parts::StoreParts;
pub use pool::{Lane, MongoConfig, MongoPool, Pressure, SLOW_CALL, STRAINED_MEAN};
pub use records::{AD_SOURCE, Card, ORGANIC_SOURCE};
pub use records::{
    Attachment, ContactSeen, Conversation, ConversationQuery, Fallback, ForgetCounts,
    HandoffFilter, HandoffReason, HandoffRequest, HandoffStep, InboxBacklog, InboxEntry,
    InboxInsert, InboxOutcomes, InboxStatus, InstanceRecord, LeadFilter, LeadStatus, LeaseView,
    ListRow, Media, NewMessage, NewOutbox, NoticeFailure, OptOut, OutboxEntry, OutboxStatus,
    OutboxUpdate, Page, PageBatch, PortalLead, PurgeBefore, PurgeCounts, RejectedEntry,
    ReplyButton, RoleAssignment, RoleSource, StatusOutcome, StoredMessage, Template,
    TemplateStatus, User, reply_parts,
};

use crate::domain::LlmCall;
use crate::domain::{AccountHealth, Referral, StatusUpdate, WaId, WaMessageId};

pub(crate) fn first_distinct(keys: impl IntoIterator<Item = WaId>, limit: usize) -> Vec<WaId> {
    let mut seen: Vec<WaId> = Vec::new();
    for key in keys {
        if seen.len() == limit {
            break;
        }
        if !seen.contains(&key) {
            seen.push(key);
        }
    }
    seen
}

/// What a caller can do about a failed store call.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer (down, unreachable, timed out): retry later; the webhook
    /// answers 503 so Meta redelivers.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bug or bad data; logged with its cause chain.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Everything the service persists: the sum of one trait per collection, so a part can be
/// read, implemented or replaced (a test's fault in one collection) on its own.
pub trait Store:
    InboxStore
    + UserStore
    + ConversationStore
    + HistoryStore
    + OutboxStore
    + UsageStore
    + LeaseStore
    + EventStore
    + PagerStore
    + LeadStore
    + MaintenanceStore
{
}

impl<
    T: InboxStore
        + UserStore
        + ConversationStore
        + HistoryStore
        + OutboxStore
        + UsageStore
        + LeaseStore
        + EventStore
        + PagerStore
        + LeadStore
        + MaintenanceStore,
> Store for T
{
}

/// `inbox` (and `rejected`): what customers sent, until a turn answers it.
#[async_trait]
pub trait InboxStore: Send + Sync + 'static {
    /// Inserts inbound messages into `inbox` keyed by wamid; an id already there is left as it
    /// is (a redelivery), so the same message is never processed twice.
    async fn insert_inbox(&self, messages: &[InboxEntry]) -> StoreResult<InboxInsert>;

    async fn inbox_entry(&self, wamid: &WaMessageId) -> StoreResult<Option<InboxEntry>>;

    /// The oldest `pending` inbox entries, in arrival order.
    async fn pending_inbox(&self, limit: usize) -> StoreResult<Vec<InboxEntry>>;

    /// Keeps a part of a webhook that could not be read, for operators.
    async fn record_rejected(&self, rejected: &RejectedEntry) -> StoreResult<()>;

    async fn rejected(&self, limit: usize) -> StoreResult<Vec<RejectedEntry>>;

    /// Every inbox entry of one conversation not yet `done` or `failed`, oldest first. An
    /// entry an older version left `processing` may be missing until the conversation is
    /// claimed ([`LeaseStore::claim_conversation`] makes it pending again).
    async fn open_inbox(&self, wa_id: &WaId) -> StoreResult<Vec<InboxEntry>>;

    /// Conversations with inbox entries not yet done, the one waiting longest first.
    async fn conversations_with_open_inbox(&self, limit: usize) -> StoreResult<Vec<WaId>>;

    /// Counts an attempt on each entry: its turn failed, or is resumed after it was cut short
    /// (a crash, a lost lease). Turns stopped by the store's slowness are not counted: an
    /// overloaded database must not get customers' messages marked `failed`.
    async fn count_attempt(&self, wamids: &[WaMessageId]) -> StoreResult<()>;

    /// Moves inbox entries to `status`; moving to `processing` counts an attempt.
    async fn set_inbox_status(
        &self,
        wamids: &[WaMessageId],
        status: InboxStatus,
    ) -> StoreResult<()>;

    /// How many messages wait, since when, and how many were given up on.
    async fn inbox_backlog(&self) -> StoreResult<InboxBacklog>;

    /// The last message received from `wa_id`, whatever its status.
    async fn latest_inbox(&self, wa_id: &WaId) -> StoreResult<Option<InboxEntry>>;

    /// Inbox messages received since `since`, by outcome (the console's last hour).
    async fn inbox_outcomes_since(&self, since: DateTime<Utc>) -> StoreResult<InboxOutcomes>;
}

/// `users`: who wrote, and the role the business gives them.
#[async_trait]
pub trait UserStore: Send + Sync + 'static {
    /// Records a sender seen on an inbound message: their profile into `users` (role
    /// `prospect` on first sight) and `last_inbound_at` into `conversations`.
    async fn record_contact(&self, contact: &ContactSeen) -> StoreResult<()>;

    /// Records the contact as a lead at `at`, led to `assistant`; the first record stays.
    async fn record_lead(
        &self,
        wa_id: &WaId,
        at: DateTime<Utc>,
        assistant: &str,
    ) -> StoreResult<()>;

    /// A portal's lead about to be written to first: their name where none is known, and the
    /// portal as the contact's first source (`users.lead_source`; the first stays). Opens no
    /// window: they have not written on WhatsApp.
    async fn note_portal_contact(
        &self,
        wa_id: &WaId,
        name: Option<&str>,
        source: &str,
    ) -> StoreResult<()>;

    /// The contacts who became leads at or after `since`, oldest first, at most `limit`.
    async fn leads_since(&self, since: DateTime<Utc>, limit: usize) -> StoreResult<Vec<User>>;

    /// How many contacts opted out (BAJA/STOP) in `[from, to)` and are still out.
    async fn opt_outs_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> StoreResult<u64>;

    async fn user(&self, wa_id: &WaId) -> StoreResult<Option<User>>;

    /// Gives a user a role (`users.role`, with who and when), copied onto the conversation
    /// so the next turn sees it at once.
    async fn assign_role(&self, wa_id: &WaId, assignment: &RoleAssignment) -> StoreResult<()>;

    /// Records that the contact wants no proactive messages (`Some`), or wants them again
    /// (`None`). Every instance reads it from here before writing first.
    async fn set_opt_out(&self, wa_id: &WaId, opt_out: Option<&OptOut>) -> StoreResult<()>;

    /// A marketing choice the contact made inside WhatsApp at `at`: a stop sets
    /// `users.marketing_opted_out_at`, a resume clears it; a choice older than the last one
    /// applied (Meta delivers out of order) changes nothing. Returns whether it applied.
    async fn set_marketing_preference(
        &self,
        wa_id: &WaId,
        stopped: bool,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Keeps the contact's first ad referral (`users.referral`, with `at`); a later one
    /// changes nothing. Returns whether this one was the first.
    async fn note_referral(
        &self,
        wa_id: &WaId,
        referral: &Referral,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Sets a user's role as staff would, without a name: the data no longer moves it.
    async fn set_user_role(&self, wa_id: &WaId, role: Role) -> StoreResult<()> {
        self.assign_role(
            wa_id,
            &RoleAssignment {
                role,
                source: RoleSource::Operator,
                by: "staff".to_owned(),
                at: Utc::now(),
            },
        )
        .await
    }
}

/// `conversations`: where each conversation stands (`dialog_state`, a pending action, a handoff,
/// its language).
#[async_trait]
pub trait ConversationStore: Send + Sync + 'static {
    async fn conversation(&self, wa_id: &WaId) -> StoreResult<Option<Conversation>>;

    /// Persists a new `dialog_state` (`[]` or one agent), entered at `at`.
    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &DialogState,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;

    /// Conversations matching `query`, longest idle first, paged.
    async fn list_conversations(&self, query: &ConversationQuery)
    -> StoreResult<Vec<Conversation>>;

    /// Back to the primary agent: clears `dialog_state` and `pending_action` and records who
    /// reset it and when; the history stays. `false` when there is no such conversation.
    async fn reset_conversation(
        &self,
        wa_id: &WaId,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Gives the conversation to an operator (clearing any request for one), or with `None`
    /// back to the bot. `false` when there is no such conversation.
    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool>;

    /// Flags the conversation for a person: a first request starts one (its first notice due
    /// at `first_notice_at`); a later one appends its reason, and one whose key is there already
    /// (a step replayed after a crash) changes nothing. Returns the request as it stands.
    async fn request_handoff(
        &self,
        wa_id: &WaId,
        reason: &HandoffReason,
        first_notice_at: Option<DateTime<Utc>>,
    ) -> StoreResult<HandoffRequest>;

    /// Conversations whose handoff request has a notice due at `now`, the longest due first.
    async fn due_handoffs(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(WaId, HandoffRequest)>>;

    /// Records an escalation step of the request made at `requested_at`, only if it is still
    /// at `from_level` (of two instances, one records it): whether it did.
    async fn advance_handoff(
        &self,
        wa_id: &WaId,
        requested_at: DateTime<Utc>,
        from_level: u8,
        step: &HandoffStep,
    ) -> StoreResult<bool>;

    /// A staff notice of `wa_id`'s handoff request did not reach its member: the failure is
    /// added to the request and its next notice made due at once (the next member is tried).
    /// `false` when the conversation has no request waiting.
    async fn handoff_notice_failed(
        &self,
        wa_id: &WaId,
        failure: &NoticeFailure,
    ) -> StoreResult<bool>;

    /// Holds (or, with `None`, drops) the action awaiting the user's confirmation.
    async fn set_pending_action(
        &self,
        wa_id: &WaId,
        action: Option<&PendingAction>,
    ) -> StoreResult<()>;

    /// Records the last location the user shared.
    async fn set_conversation_location(
        &self,
        wa_id: &WaId,
        location: crate::domain::GeoPoint,
    ) -> StoreResult<()>;

    /// Records that the history was written by someone other than the conversation's turns
    /// (an operator's reply), so a turn does not trust a window it read before.
    async fn note_history_written(&self, wa_id: &WaId, at: DateTime<Utc>) -> StoreResult<()>;

    /// Records the language the conversation is held in (ISO 639-1).
    async fn set_conversation_lang(&self, wa_id: &WaId, lang: &str) -> StoreResult<()>;
}

/// `messages`: each conversation's history, numbered.
#[async_trait]
pub trait HistoryStore: Send + Sync + 'static {
    /// Appends a message to a conversation's history with the next `seq`.
    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage>;

    /// The last `limit` messages of a conversation, oldest first.
    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>>;

    /// Appends messages to a conversation's history in one write, numbered after `after` (the
    /// last `seq` the caller knows); if another writer took those numbers, after the last one.
    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        after: i64,
    ) -> StoreResult<Vec<StoredMessage>>;

    /// The customers' and assistants' messages (not tool results) of every conversation in
    /// `[from, to)`, oldest first, at most `limit`: what the agency's reports count.
    async fn messages_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>>;
}

/// `outbox`: replies on their way to the Graph API, and their delivery statuses.
#[async_trait]
pub trait OutboxStore: Send + Sync + 'static {
    /// Queues the parts of a reply, in one write; returns their ids in order.
    async fn insert_outbox(&self, entries: &[NewOutbox]) -> StoreResult<Vec<OutboxId>>;

    /// Records a reply's parts as they are (a turn's reply is recorded once sent, with its
    /// wamids), in one write. A part a status webhook got to first (recorded with that status
    /// only) is completed without its status moving back; a part recorded before is left as
    /// it is.
    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()>;

    async fn outbox_entry(&self, id: &OutboxId) -> StoreResult<Option<OutboxEntry>>;

    /// Records what the sender did with an entry. `Sending`, `Retry` and `Failed` only apply
    /// to an entry not sent yet, and return `false` otherwise (a status webhook confirmed it
    /// meanwhile); `Sent` never moves a status back (a webhook status may have come first) and
    /// returns `true`. An unknown id is an error.
    async fn update_outbox(&self, id: &OutboxId, update: &OutboxUpdate) -> StoreResult<bool>;

    /// Records the Graph API's id for a sent reply.
    async fn mark_outbox_sent(&self, id: &OutboxId, wamid: &WaMessageId) -> StoreResult<()> {
        self.update_outbox(
            id,
            &OutboxUpdate::Sent {
                wamid: Some(wamid.clone()),
            },
        )
        .await
        .map(drop)
    }

    /// The entries of a conversation not sent yet (`queued`, `sending`), in sending order.
    async fn unsent_outbox(&self, wa_id: &WaId) -> StoreResult<Vec<OutboxEntry>>;

    /// Conversations with an entry to send now (`queued` and due, or `sending` whose grace
    /// ran out without an answer or a status), oldest first.
    async fn conversations_with_unsent_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<WaId>>;

    async fn outbox_by_wamid(&self, wamid: &WaMessageId) -> StoreResult<Option<OutboxEntry>>;

    /// The replies queued in answer to an inbound message, oldest first.
    async fn outbox_in_reply_to(&self, wamid: &WaMessageId) -> StoreResult<Vec<OutboxEntry>>;

    /// Applies a delivery status to the outbox entry with that Graph id, or else to the entry
    /// its callback data names if that one's wamid is not recorded (then recording it); if
    /// that entry is not recorded at all yet, the status is kept under its id (`Early`).
    /// Statuses only move forward (`sent` → `delivered` → `read`): Meta may deliver them out of
    /// order.
    async fn apply_status(&self, status: &StatusUpdate) -> StoreResult<StatusOutcome>;

    /// Sends the part as `fallback` instead (queued again at once), unless a fallback was used
    /// already or it was delivered: `true` for one caller, ever, so a refusal answered at once
    /// and the late `failed` status of the same part fall back once.
    async fn fall_back(&self, id: &OutboxId, fallback: &Fallback) -> StoreResult<bool>;

    /// Parts queued in `[from, to)` that Meta billed (`outbox.pricing.billable`), oldest
    /// first, at most `limit`: what the messages cost. Only who, why, when and the pricing
    /// are read.
    async fn billed_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>>;

    /// Parts that failed or were skipped at or after `since`, newest first (the console).
    async fn undelivered_since(
        &self,
        since: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>>;

    /// Records a template's approval state, as Meta's webhooks said it (`templates`).
    async fn record_template_status(&self, status: &TemplateStatus) -> StoreResult<()>;

    /// Every template's last known state.
    async fn template_statuses(&self) -> StoreResult<Vec<TemplateStatus>>;

    /// Records an account's or number's standing as Meta's signals left it
    /// (`whatsapp_accounts`, keyed by [`AccountHealth::key`]).
    async fn record_account_health(&self, health: &AccountHealth) -> StoreResult<()>;

    /// Every account's and number's last standing.
    async fn account_health(&self) -> StoreResult<Vec<AccountHealth>>;

    /// The unique contacts sent a template (a conversation the business started) since
    /// `since`, not counting parts that failed or were skipped, and whether `with` is one of
    /// them: what Meta's messaging limit counts.
    async fn initiated_since(&self, since: DateTime<Utc>, with: &WaId) -> StoreResult<(u64, bool)>;

    /// Sends under `key` (`number:{phone_number_id}` after a 130429, `recipient:{wa_id}` after a
    /// 131056) wait until `until`, in every instance (`send_pauses`); a later pause already
    /// kept stays.
    async fn pause_sends(&self, key: &str, until: DateTime<Utc>) -> StoreResult<()>;

    /// The pauses still running at `now`, at most `limit`, latest ending first.
    async fn send_pauses(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(String, DateTime<Utc>)>>;
}

/// `llm_calls`: what each model call cost.
#[async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Usage accounting: one document per LLM call in `llm_calls`.
    async fn insert_llm_calls(&self, calls: &[LlmCall]) -> StoreResult<()>;

    /// The last `limit` LLM calls of a conversation, oldest first.
    async fn llm_calls(&self, conversation: &str, limit: usize) -> StoreResult<Vec<LlmCall>>;

    /// Tokens (input and output) of a conversation's LLM calls since `since`: what its daily
    /// budget is measured against.
    async fn llm_tokens_since(&self, conversation: &str, since: DateTime<Utc>) -> StoreResult<u64>;

    /// Every conversation's LLM calls (and steps taken without a model) in `[from, to)`, at
    /// most `limit`.
    async fn llm_calls_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<LlmCall>>;
}

/// `leases` and `instances`: which process holds which conversation, and which processes are alive.
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Takes the conversation's lease for `owner` (until at least `until`) when it is free:
    /// never taken, released, or its holder neither within its `until` at `now` nor among the
    /// `live` instances. A lease `owner` held before is taken anew (a new generation): the
    /// caller knows when it holds a lease without asking. One unique insert decides: two
    /// processes never both win.
    async fn claim_conversation(
        &self,
        wa_id: &WaId,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        live: &[String],
    ) -> StoreResult<bool>;

    /// Gives the lease back, if `owner` still holds it.
    async fn release_conversation(&self, wa_id: &WaId, owner: &str) -> StoreResult<()>;

    /// Gives back every lease `owner` holds (a process starting under a restarted instance's
    /// id, or draining); returns how many.
    async fn release_all_leases(&self, owner: &str) -> StoreResult<u64>;

    /// Conversations claimed right now: leases not released whose holder is `live` or within
    /// its `until`.
    async fn active_leases(&self, now: DateTime<Utc>, live: &[String]) -> StoreResult<u64>;

    /// The database's clock: instances judge each other's heartbeats by it, so their own
    /// clocks need not agree.
    async fn server_time(&self) -> StoreResult<DateTime<Utc>>;

    /// A heartbeat of instance `id` from the process `nonce`, stamped with the database's
    /// clock, which it returns. With `take_over`, the record becomes this process's whatever
    /// it held; without, the beat lands only if the record is still this process's: `None`
    /// means another process took the id.
    async fn instance_beat(
        &self,
        id: &str,
        nonce: &str,
        take_over: bool,
    ) -> StoreResult<Option<DateTime<Utc>>>;

    /// Every instance's record.
    async fn instances(&self) -> StoreResult<Vec<InstanceRecord>>;

    /// The latest lease of a conversation (who serves it, until when), for operators.
    async fn lease_of(&self, wa_id: &WaId) -> StoreResult<Option<LeaseView>>;

    /// Instance `id` stops (if `nonce` still holds it): the others stop counting it at once.
    async fn instance_left(&self, id: &str, nonce: &str) -> StoreResult<()>;
}

/// `events`: business events waiting for (or done with) delivery.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Writes events; one whose id is already there is left as it is (a replayed step).
    async fn insert_events(&self, events: &[Event]) -> StoreResult<()>;

    /// Pending events due at `now` and not held by another instance: the oldest of each
    /// conversation only (the ones behind it wait for it), oldest conversations first.
    async fn due_events(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Event>>;

    /// Holds a pending event for delivery until `until`: `true` for one caller at a time.
    async fn claim_event(
        &self,
        id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Records how a delivery attempt ended, and lets go of the event.
    async fn settle_event(&self, id: &str, update: &EventUpdate) -> StoreResult<()>;

    /// Events by newest first, as an operator filters them.
    async fn list_events(&self, query: &EventQuery) -> StoreResult<Vec<Event>>;

    /// A failed event back to pending, due now: `false` when there is no failed event `id`.
    async fn retry_event(&self, id: &str, now: DateTime<Utc>) -> StoreResult<bool>;
}

/// `pagers`: staff notices waiting for their member's next message (see [`Page`]).
#[async_trait]
pub trait PagerStore: Send + Sync + 'static {
    /// Adds `page` to `member`'s pager, unless a page with its key is there (a replayed step).
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()>;

    /// Claims `member`'s waiting pages for one message at `now`, unless a message went to them
    /// less than `quiet` ago: the pages, for one caller only. A batch claimed before and not
    /// marked sent (its sender crashed) comes back first, whatever the time.
    async fn claim_pages(
        &self,
        member: &WaId,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
    ) -> StoreResult<Option<PageBatch>>;

    /// The message of `batch` is queued: its pages leave the pager.
    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()>;

    /// Members with pages waiting that may be told at `now` (none told within `quiet`, or a
    /// claimed batch left behind), at most `limit`.
    async fn due_pagers(
        &self,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
        limit: usize,
    ) -> StoreResult<Vec<WaId>>;
}

/// `leads`: the portals' and CRMs' enquiries ([`PortalLead`]), each stored once however often
/// it is pushed, and moved on by one writer at a time.
#[async_trait]
pub trait LeadStore: Send + Sync + 'static {
    /// Stores `lead` under its id unless a lead with that id is there: the lead on record, and
    /// whether it is the one given.
    async fn insert_lead(&self, lead: &PortalLead) -> StoreResult<(PortalLead, bool)>;

    async fn lead(&self, id: &str) -> StoreResult<Option<PortalLead>>;

    /// Replaces the lead with `lead` if it is still in `from`: whether it was (the first
    /// writer wins; the others read the lead again).
    async fn update_lead(&self, lead: &PortalLead, from: LeadStatus) -> StoreResult<bool>;

    /// Leads as `filter` says, newest received first.
    async fn leads(&self, filter: &LeadFilter) -> StoreResult<Vec<PortalLead>>;
}

/// The database as a whole: is it there, how strained, and what it forgets or purges.
#[async_trait]
pub trait MaintenanceStore: Send + Sync + 'static {
    /// Answers when the database does (`/readyz`).
    async fn ping(&self) -> StoreResult<()>;

    /// Deletes everything stored about one contact: conversation, user, history, inbox,
    /// outbox, LLM calls, leases, and rejected webhook bodies that mention the key.
    async fn forget(&self, wa_id: &WaId) -> StoreResult<ForgetCounts>;

    /// Deletes finished records older than the retention allows. Idempotent: every instance
    /// may run it.
    async fn purge(&self, before: &PurgeBefore) -> StoreResult<PurgeCounts>;

    /// How the database has been answering since the last call (the workers' concurrency
    /// follows it); `None` for a store that cannot be strained (the in-memory one).
    fn pressure(&self) -> Option<Pressure> {
        None
    }
}
