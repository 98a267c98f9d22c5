//! The embedded store: everything in process memory, nothing durable. The default when
//! `MONGODB_URI` is unset, so `zaguan serve` starts on a bare machine; also the fast store of
//! unit tests and benchmarks. One mutex: every method is short and never awaits while holding it.

mod conversations;
mod events;
mod history;
mod inbox;
mod leads;
mod leases;
mod maintenance;
mod outbox;
mod pagers;
mod usage;
mod users;

use crate::domain::OutboxId;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::domain::{StatusUpdate, WaId, WaMessageId};
use crate::store::{
    Conversation, Event, InboxEntry, InstanceRecord, LlmCall, NewOutbox, OutboxEntry, OutboxStatus,
    RejectedEntry, StatusOutcome, StoredMessage, TemplateStatus, User,
};

#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// The "database's" clock (`server_time`): the system's, or a test's manual one.
    clock: Option<std::sync::Arc<dyn crate::domain::Clock>>,
}

#[derive(Default)]
struct Inner {
    /// Records are boxed here and below: a table has room for up to twice its entries, and
    /// holds both tables while it grows, so large records inline doubled the store's size.
    inbox: HashMap<WaMessageId, Box<InboxEntry>>,
    /// Arrival order of inbox ids, for `pending_inbox`.
    inbox_order: Vec<WaMessageId>,
    /// Open (`pending`, `processing`) messages in `received_at` then arrival order, overall and
    /// per conversation: the workers' queries read these instead of the whole inbox.
    open: BTreeMap<OpenKey, WaMessageId>,
    /// Per conversation, a vector in key order: most have one open message, and a B-tree's
    /// first leaf took about 500 bytes for it.
    open_by_conversation: HashMap<WaId, Vec<(OpenKey, WaMessageId)>>,
    /// Arrival number of each inbox message (ties in `received_at` keep arrival order).
    arrivals: HashMap<WaMessageId, u64>,
    next_arrival: u64,
    rejected: Vec<RejectedEntry>,
    llm_calls: Vec<LlmCall>,
    users: HashMap<WaId, Box<User>>,
    conversations: HashMap<WaId, Box<Conversation>>,
    /// Each conversation's history in `seq` order (appended at the end, so a plain vector: a
    /// B-tree's first leaf alone took 2 KiB for the few messages most conversations have).
    messages: HashMap<WaId, Vec<StoredMessage>>,
    #[allow(
        clippy::vec_box,
        reason = "an entry is 632 bytes, and the vector's spare room would hold them inline"
    )]
    outbox: Vec<Box<OutboxEntry>>,
    outbox_by_id: HashMap<OutboxId, usize>,
    /// Business events by id.
    events: BTreeMap<String, Event>,
    /// Positions of the entries not sent yet (`queued`, `sending`), in insertion order.
    unsent: std::collections::BTreeSet<usize>,
    outbox_by_wamid: HashMap<WaMessageId, usize>,
    /// Outbox positions by the inbound message they answer.
    outbox_by_reply_to: HashMap<WaMessageId, Vec<usize>>,
    /// Parts a status webhook recorded before their sender did.
    early: std::collections::HashSet<OutboxId>,
    /// The current lease generation of each conversation.
    leases: HashMap<WaId, LeaseRecord>,
    /// Each instance's record.
    instances: HashMap<String, InstanceRecord>,
    /// Templates' approval states by (name, language).
    templates: BTreeMap<(String, String), TemplateStatus>,
    /// `whatsapp_accounts`, by key.
    accounts: BTreeMap<String, crate::domain::AccountHealth>,
    /// `send_pauses`: until when sends under each key wait.
    send_pauses: BTreeMap<String, chrono::DateTime<chrono::Utc>>,
    /// Staff notices waiting, by staff member.
    pagers: HashMap<WaId, pagers::Pager>,
    /// Portal leads by id.
    leads: HashMap<String, crate::store::PortalLead>,
}

/// The latest generation of a conversation's lease.
struct LeaseRecord {
    owner: String,
    until: DateTime<Utc>,
    released: bool,
}

/// Where an open inbox message sorts: as Mongo's `{received_at: 1, _id: 1}` would, with the
/// arrival number in place of the id.
type OpenKey = (DateTime<Utc>, u64);

impl Inner {
    /// Rebuilds the outbox's position indexes after entries were removed.
    fn reindex_outbox(&mut self) {
        self.outbox_by_id.clear();
        self.unsent.clear();
        self.outbox_by_wamid.clear();
        self.outbox_by_reply_to.clear();
        for (position, entry) in self.outbox.iter().enumerate() {
            self.outbox_by_id.insert(entry.id.clone(), position);
            if matches!(entry.status, OutboxStatus::Queued | OutboxStatus::Sending) {
                self.unsent.insert(position);
            }
            if let Some(wamid) = &entry.wamid {
                self.outbox_by_wamid.insert(wamid.clone(), position);
            }
            if let Some(reply_to) = &entry.in_reply_to {
                self.outbox_by_reply_to
                    .entry(reply_to.clone())
                    .or_default()
                    .push(position);
            }
        }
    }

    /// Files `entry` under the open index when its status is open, removes it otherwise.
    fn index_open(&mut self, entry: &InboxEntry) {
        let Some(&arrival) = self.arrivals.get(&entry.wamid) else {
            return;
        };
        let key = (entry.received_at, arrival);
        if entry.status.is_open() {
            self.open.insert(key, entry.wamid.clone());
            let open = self
                .open_by_conversation
                .entry(entry.wa_id.clone())
                .or_default();
            match open.binary_search_by(|(k, _)| k.cmp(&key)) {
                Ok(i) => open[i].1 = entry.wamid.clone(),
                Err(i) => open.insert(i, (key, entry.wamid.clone())),
            }
        } else {
            self.open.remove(&key);
            if let Some(conversation) = self.open_by_conversation.get_mut(&entry.wa_id) {
                if let Ok(i) = conversation.binary_search_by(|(k, _)| k.cmp(&key)) {
                    conversation.remove(i);
                }
                if conversation.is_empty() {
                    self.open_by_conversation.remove(&entry.wa_id);
                }
            }
        }
    }

    /// Appends `entry` to the outbox and its indexes.
    fn push_outbox(&mut self, entry: OutboxEntry) {
        let position = self.outbox.len();
        if let Some(reply_to) = &entry.in_reply_to {
            self.outbox_by_reply_to
                .entry(reply_to.clone())
                .or_default()
                .push(position);
        }
        self.outbox_by_id.insert(entry.id.clone(), position);
        if matches!(entry.status, OutboxStatus::Queued | OutboxStatus::Sending) {
            self.unsent.insert(position);
        }
        // A part recorded already sent (the turn's own send) is found by its wamid too.
        if let Some(wamid) = &entry.wamid {
            self.outbox_by_wamid.insert(wamid.clone(), position);
        }
        self.outbox.push(Box::new(entry));
    }

    fn conversation_mut(&mut self, wa_id: &WaId) -> &mut Conversation {
        self.conversations
            .entry(wa_id.clone())
            .or_insert_with(|| Box::new(Conversation::new(wa_id.clone())))
    }
}

/// A status for a part of ours not recorded yet: kept under its id (see `Store::apply_status`).
fn early_status(inner: &mut Inner, update: &StatusUpdate, status: OutboxStatus) -> StatusOutcome {
    let (Some(id), Some(wa_id)) = (
        update
            .callback_data
            .as_deref()
            .and_then(OutboxId::from_callback_data),
        update
            .recipient_id
            .as_deref()
            .and_then(|r| WaId::parse(r).ok()),
    ) else {
        return StatusOutcome::Unknown;
    };
    if inner.outbox_by_id.contains_key(&id) {
        // Recorded, with another wamid or past this status: not this message's.
        return StatusOutcome::Unknown;
    }
    let mut entry = OutboxEntry::queued(
        id.clone(),
        &NewOutbox::text(wa_id, None, String::new(), update.at.unwrap_or_default()),
    );
    entry.status = status;
    entry.status_at = update.at;
    entry.wamid = Some(update.wamid.clone());
    entry.error = update.errors.first().cloned();
    entry.pricing = update.pricing.clone();
    let index = inner.outbox.len();
    inner.push_outbox(entry);
    inner.outbox_by_wamid.insert(update.wamid.clone(), index);
    inner.early.insert(id);
    StatusOutcome::Early
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store whose `server_time` is `clock`'s (`zaguan test`'s manual clock).
    pub fn with_clock(clock: std::sync::Arc<dyn crate::domain::Clock>) -> Self {
        Self {
            clock: Some(clock),
            ..Self::default()
        }
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock
            .as_ref()
            .map_or_else(Utc::now, |clock| clock.now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written record (every write is a
        // single insert or field update), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
