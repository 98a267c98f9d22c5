//! The embedded store: everything in process memory, nothing durable. The default when
//! `MONGODB_URI` is unset, so `zaguan serve` starts on a bare machine; also the fast store of
//! unit tests and benchmarks. One mutex: every method is short and never awaits while holding it.

use crate::domain::{Handoff, OutboxId, PendingAction};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::*;
use crate::domain::{StatusUpdate, WaId, WaMessageId};

#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    inbox: HashMap<WaMessageId, InboxEntry>,
    /// Arrival order of inbox ids, for `pending_inbox`.
    inbox_order: Vec<WaMessageId>,
    /// Open (`pending`, `processing`) messages in `received_at` then arrival order, overall and
    /// per conversation: the workers' queries read these instead of the whole inbox.
    open: BTreeMap<OpenKey, WaMessageId>,
    open_by_conversation: HashMap<WaId, BTreeMap<OpenKey, WaMessageId>>,
    /// Arrival number of each inbox message (ties in `received_at` keep arrival order).
    arrivals: HashMap<WaMessageId, u64>,
    next_arrival: u64,
    rejected: Vec<RejectedEntry>,
    llm_calls: Vec<LlmCall>,
    users: HashMap<WaId, User>,
    conversations: HashMap<WaId, Conversation>,
    messages: HashMap<WaId, BTreeMap<i64, NewMessage>>,
    outbox: Vec<OutboxEntry>,
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
            self.open_by_conversation
                .entry(entry.wa_id.clone())
                .or_default()
                .insert(key, entry.wamid.clone());
        } else {
            self.open.remove(&key);
            if let Some(conversation) = self.open_by_conversation.get_mut(&entry.wa_id) {
                conversation.remove(&key);
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
        self.outbox.push(entry);
    }

    fn conversation_mut(&mut self, wa_id: &WaId) -> &mut Conversation {
        self.conversations
            .entry(wa_id.clone())
            .or_insert_with(|| Conversation::new(wa_id.clone()))
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written record (every write is a
        // single insert or field update), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }

    async fn record_contact(&self, contact: &ContactSeen) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = inner
            .users
            .entry(contact.wa_id.clone())
            .or_insert_with(|| User::new(contact.wa_id.clone()));
        if contact.name.is_some() {
            user.name.clone_from(&contact.name);
        }
        if contact.username.is_some() {
            user.username.clone_from(&contact.username);
        }
        let conversation = inner.conversation_mut(&contact.wa_id);
        if contact.phone.is_some() {
            conversation.phone.clone_from(&contact.phone);
        }
        if contact.user_id.is_some() {
            conversation.user_id.clone_from(&contact.user_id);
        }
        conversation.last_inbound_at = conversation.last_inbound_at.max(Some(contact.seen_at));
        conversation.updated_at = Some(contact.seen_at);
        Ok(())
    }

    async fn insert_inbox(&self, messages: &[InboxEntry]) -> StoreResult<InboxInsert> {
        let mut inner = self.lock();
        let mut outcome = InboxInsert::default();
        for entry in messages {
            if inner.inbox.contains_key(&entry.wamid) {
                outcome.duplicates += 1;
                outcome.known.push(entry.wamid.clone());
            } else {
                inner.inbox.insert(entry.wamid.clone(), entry.clone());
                inner.inbox_order.push(entry.wamid.clone());
                let arrival = inner.next_arrival;
                inner.next_arrival += 1;
                inner.arrivals.insert(entry.wamid.clone(), arrival);
                inner.index_open(entry);
                outcome.inserted += 1;
            }
        }
        Ok(outcome)
    }

    async fn inbox_entry(&self, wamid: &WaMessageId) -> StoreResult<Option<InboxEntry>> {
        Ok(self.lock().inbox.get(wamid).cloned())
    }

    async fn pending_inbox(&self, limit: usize) -> StoreResult<Vec<InboxEntry>> {
        let inner = self.lock();
        // Same order as Mongo's `{received_at: 1}` index, equal timestamps in arrival order.
        Ok(inner
            .open
            .values()
            .filter_map(|id| inner.inbox.get(id))
            .filter(|e| e.status == InboxStatus::Pending)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn record_rejected(&self, rejected: &RejectedEntry) -> StoreResult<()> {
        self.lock().rejected.push(rejected.clone());
        Ok(())
    }

    async fn rejected(&self, limit: usize) -> StoreResult<Vec<RejectedEntry>> {
        let inner = self.lock();
        let skip = inner.rejected.len().saturating_sub(limit);
        Ok(inner.rejected[skip..].to_vec())
    }

    async fn insert_llm_calls(&self, calls: &[LlmCall]) -> StoreResult<()> {
        self.lock().llm_calls.extend_from_slice(calls);
        Ok(())
    }

    async fn llm_calls(&self, conversation: &str, limit: usize) -> StoreResult<Vec<LlmCall>> {
        let inner = self.lock();
        let mut calls: Vec<LlmCall> = inner
            .llm_calls
            .iter()
            .rev()
            .filter(|c| c.conversation.as_deref() == Some(conversation))
            .take(limit)
            .cloned()
            .collect();
        calls.reverse();
        Ok(calls)
    }

    async fn forget(&self, wa_id: &WaId) -> StoreResult<ForgetCounts> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let key = wa_id.as_str();
        let mut counts = ForgetCounts {
            conversations: u64::from(inner.conversations.remove(wa_id).is_some()),
            users: u64::from(inner.users.remove(wa_id).is_some()),
            messages: inner.messages.remove(wa_id).map_or(0, |m| m.len() as u64),
            leases: u64::from(inner.leases.remove(wa_id).is_some()),
            ..ForgetCounts::default()
        };
        let inbox: Vec<WaMessageId> = inner
            .inbox
            .values()
            .filter(|e| &e.wa_id == wa_id)
            .map(|e| e.wamid.clone())
            .collect();
        for wamid in &inbox {
            inner.inbox.remove(wamid);
            inner.arrivals.remove(wamid);
        }
        inner.inbox_order.retain(|id| inner.inbox.contains_key(id));
        inner.open.retain(|_, id| !inbox.contains(id));
        inner.open_by_conversation.remove(wa_id);
        counts.inbox = inbox.len() as u64;
        let before = inner.outbox.len();
        inner.outbox.retain(|e| &e.wa_id != wa_id);
        counts.outbox = (before - inner.outbox.len()) as u64;
        inner.reindex_outbox();
        let before = inner.llm_calls.len();
        inner
            .llm_calls
            .retain(|c| c.conversation.as_deref() != Some(key));
        counts.llm_calls = (before - inner.llm_calls.len()) as u64;
        let before = inner.rejected.len();
        inner.rejected.retain(|r| !r.raw.contains(key));
        counts.webhook_rejects = (before - inner.rejected.len()) as u64;
        let before = inner.events.len();
        inner.events.retain(|_, e| &e.wa_id != wa_id);
        counts.events = (before - inner.events.len()) as u64;
        Ok(counts)
    }

    async fn lease_of(&self, wa_id: &WaId) -> StoreResult<Option<LeaseView>> {
        Ok(self.lock().leases.get(wa_id).map(|lease| LeaseView {
            owner: lease.owner.clone(),
            until: lease.until,
            released: lease.released,
        }))
    }

    async fn inbox_outcomes_since(&self, since: DateTime<Utc>) -> StoreResult<InboxOutcomes> {
        let inner = self.lock();
        let mut outcomes = InboxOutcomes::default();
        for entry in inner.inbox.values().filter(|e| e.received_at >= since) {
            match entry.status {
                InboxStatus::Done => outcomes.answered += 1,
                InboxStatus::Failed => outcomes.failed += 1,
                _ => outcomes.open += 1,
            }
        }
        Ok(outcomes)
    }

    async fn insert_events(&self, events: &[Event]) -> StoreResult<()> {
        let mut inner = self.lock();
        for event in events {
            inner
                .events
                .entry(event.id.clone())
                .or_insert_with(|| event.clone());
        }
        Ok(())
    }

    async fn due_events(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Event>> {
        let inner = self.lock();
        let mut pending: Vec<&Event> = inner
            .events
            .values()
            .filter(|e| e.status == EventStatus::Pending)
            .collect();
        pending.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        Ok(crate::store::heads_due(
            pending.into_iter().cloned(),
            now,
            limit,
        ))
    }

    async fn claim_event(
        &self,
        id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(event) = inner.events.get_mut(id) else {
            return Ok(false);
        };
        if event.status != EventStatus::Pending || event.claimed_until.is_some_and(|u| u > now) {
            return Ok(false);
        }
        event.claimed_until = Some(until);
        Ok(true)
    }

    async fn settle_event(&self, id: &str, update: &EventUpdate) -> StoreResult<()> {
        let mut inner = self.lock();
        if let Some(event) = inner.events.get_mut(id) {
            event.apply(update);
        }
        Ok(())
    }

    async fn list_events(&self, query: &EventQuery) -> StoreResult<Vec<Event>> {
        let inner = self.lock();
        let mut events: Vec<Event> = inner
            .events
            .values()
            .filter(|e| query.admits(e))
            .cloned()
            .collect();
        events.sort_by(|a, b| (b.at, &b.id).cmp(&(a.at, &a.id)));
        events.truncate(query.limit);
        Ok(events)
    }

    async fn retry_event(&self, id: &str, now: DateTime<Utc>) -> StoreResult<bool> {
        let mut inner = self.lock();
        match inner.events.get_mut(id) {
            Some(event) if event.status == EventStatus::Failed => {
                event.status = EventStatus::Pending;
                event.next_attempt_at = Some(now);
                event.claimed_until = None;
                event.attempts = 0;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn llm_tokens_since(&self, conversation: &str, since: DateTime<Utc>) -> StoreResult<u64> {
        Ok(self
            .lock()
            .llm_calls
            .iter()
            .filter(|c| c.conversation.as_deref() == Some(conversation) && c.at >= since)
            .map(|c| c.input_tokens + c.output_tokens)
            .sum())
    }

    async fn user(&self, wa_id: &WaId) -> StoreResult<Option<User>> {
        Ok(self.lock().users.get(wa_id).cloned())
    }

    async fn assign_role(&self, wa_id: &WaId, assignment: &RoleAssignment) -> StoreResult<()> {
        let mut inner = self.lock();
        let user = inner
            .users
            .entry(wa_id.clone())
            .or_insert_with(|| User::new(wa_id.clone()));
        user.role = assignment.role;
        user.role_source = Some(assignment.source);
        user.role_set_by = Some(assignment.by.clone());
        user.role_set_at = Some(assignment.at);
        let conversation = inner.conversation_mut(wa_id);
        conversation.role = Some(assignment.role);
        conversation.role_source = Some(assignment.source);
        Ok(())
    }

    async fn conversation(&self, wa_id: &WaId) -> StoreResult<Option<Conversation>> {
        Ok(self.lock().conversations.get(wa_id).cloned())
    }

    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage> {
        let mut inner = self.lock();
        let history = inner.messages.entry(message.wa_id.clone()).or_default();
        let seq = history.keys().next_back().map_or(1, |last| last + 1);
        history.insert(seq, message.clone());
        Ok(StoredMessage { seq, message })
    }

    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>> {
        let inner = self.lock();
        let Some(history) = inner.messages.get(wa_id) else {
            return Ok(Vec::new());
        };
        let mut recent: Vec<StoredMessage> = history
            .iter()
            .rev()
            .take(limit)
            .map(|(seq, message)| StoredMessage {
                seq: *seq,
                message: message.clone(),
            })
            .collect();
        recent.reverse();
        Ok(recent)
    }

    async fn open_inbox(&self, wa_id: &WaId) -> StoreResult<Vec<InboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .open_by_conversation
            .get(wa_id)
            .into_iter()
            .flat_map(|open| open.values())
            .filter_map(|id| inner.inbox.get(id))
            .cloned()
            .collect())
    }

    async fn conversations_with_open_inbox(&self, limit: usize) -> StoreResult<Vec<WaId>> {
        let inner = self.lock();
        Ok(first_distinct(
            inner
                .open
                .values()
                .filter_map(|id| inner.inbox.get(id))
                .map(|e| e.wa_id.clone()),
            limit,
        ))
    }

    async fn set_inbox_status(
        &self,
        wamids: &[WaMessageId],
        status: InboxStatus,
    ) -> StoreResult<()> {
        let mut inner = self.lock();
        for wamid in wamids {
            if let Some(entry) = inner.inbox.get_mut(wamid) {
                entry.status = status;
                if status == InboxStatus::Processing {
                    entry.attempts += 1;
                }
                let entry = entry.clone();
                inner.index_open(&entry);
            }
        }
        Ok(())
    }

    async fn count_attempt(&self, wamids: &[WaMessageId]) -> StoreResult<()> {
        let mut inner = self.lock();
        for wamid in wamids {
            if let Some(entry) = inner.inbox.get_mut(wamid) {
                entry.attempts += 1;
            }
        }
        Ok(())
    }

    async fn claim_conversation(
        &self,
        wa_id: &WaId,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        live: &[String],
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let held = inner.leases.get(wa_id).is_some_and(|lease| {
            !lease.released
                && lease.owner != owner
                && (lease.until > now || live.contains(&lease.owner))
        });
        if held {
            return Ok(false);
        }
        inner.leases.insert(
            wa_id.clone(),
            LeaseRecord {
                owner: owner.to_owned(),
                until,
                released: false,
            },
        );
        inner.conversation_mut(wa_id);
        Ok(true)
    }

    async fn release_conversation(&self, wa_id: &WaId, owner: &str) -> StoreResult<()> {
        if let Some(lease) = self.lock().leases.get_mut(wa_id)
            && lease.owner == owner
        {
            lease.released = true;
        }
        Ok(())
    }

    async fn release_all_leases(&self, owner: &str) -> StoreResult<u64> {
        let mut released = 0;
        for lease in self.lock().leases.values_mut() {
            if lease.owner == owner && !lease.released {
                lease.released = true;
                released += 1;
            }
        }
        Ok(released)
    }

    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        _after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        let mut stored = Vec::with_capacity(messages.len());
        for message in messages {
            stored.push(self.append_message(message).await?);
        }
        Ok(stored)
    }

    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &[String],
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut inner = self.lock();
        let conversation = inner.conversation_mut(wa_id);
        conversation.dialog_state = dialog_state.to_vec();
        conversation.state_entered_at = Some(at);
        conversation.updated_at = Some(at);
        Ok(())
    }

    async fn inbox_backlog(&self) -> StoreResult<InboxBacklog> {
        let inner = self.lock();
        let mut backlog = InboxBacklog::default();
        for entry in inner.inbox.values() {
            if entry.status.is_open() {
                backlog.open += 1;
                backlog.oldest_received_at = Some(
                    backlog
                        .oldest_received_at
                        .map_or(entry.received_at, |at| at.min(entry.received_at)),
                );
            } else if entry.status == InboxStatus::Failed {
                backlog.failed += 1;
            }
        }
        Ok(backlog)
    }

    async fn active_leases(&self, now: DateTime<Utc>, live: &[String]) -> StoreResult<u64> {
        Ok(self
            .lock()
            .leases
            .values()
            .filter(|lease| !lease.released && (lease.until > now || live.contains(&lease.owner)))
            .count() as u64)
    }

    async fn list_conversations(
        &self,
        query: &ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        let matching: Vec<Conversation> = self
            .lock()
            .conversations
            .values()
            .filter(|c| {
                query
                    .agent
                    .as_ref()
                    .is_none_or(|agent| c.dialog_state.contains(agent))
            })
            .cloned()
            .collect();
        Ok(page_of_conversations(matching, query))
    }

    async fn reset_conversation(
        &self,
        wa_id: &WaId,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(conversation) = inner.conversations.get_mut(wa_id) else {
            return Ok(false);
        };
        conversation.dialog_state.clear();
        conversation.pending_action = None;
        conversation.state_entered_at = Some(at);
        conversation.updated_at = Some(at);
        conversation.reset_by = Some(by.to_owned());
        conversation.reset_at = Some(at);
        Ok(true)
    }

    async fn server_time(&self) -> StoreResult<DateTime<Utc>> {
        Ok(Utc::now())
    }

    async fn instance_beat(
        &self,
        id: &str,
        nonce: &str,
        take_over: bool,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let mut inner = self.lock();
        let holds = inner
            .instances
            .get(id)
            .is_some_and(|record| record.nonce == nonce);
        if !take_over && !holds {
            return Ok(None);
        }
        let now = Utc::now();
        inner.instances.insert(
            id.to_owned(),
            InstanceRecord {
                id: id.to_owned(),
                nonce: nonce.to_owned(),
                seen_at: now,
            },
        );
        Ok(Some(now))
    }

    async fn instances(&self) -> StoreResult<Vec<InstanceRecord>> {
        Ok(self.lock().instances.values().cloned().collect())
    }

    async fn instance_left(&self, id: &str, nonce: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        if inner
            .instances
            .get(id)
            .is_some_and(|record| record.nonce == nonce)
        {
            inner.instances.remove(id);
        }
        Ok(())
    }

    /// The outbox is kept: its entries are indexed by position (it goes with the process).
    async fn purge(&self, before: &PurgeBefore) -> StoreResult<PurgeCounts> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let mut counts = PurgeCounts::default();
        if let Some(at) = before.inbox {
            let old: Vec<WaMessageId> = inner
                .inbox
                .values()
                .filter(|e| {
                    matches!(e.status, InboxStatus::Done | InboxStatus::Failed)
                        && e.received_at < at
                })
                .map(|e| e.wamid.clone())
                .collect();
            for wamid in &old {
                inner.inbox.remove(wamid);
                inner.arrivals.remove(wamid);
            }
            inner.inbox_order.retain(|id| inner.inbox.contains_key(id));
            counts.inbox = old.len() as u64;
            let before_len = inner.rejected.len();
            inner.rejected.retain(|r| r.at >= at);
            counts.webhook_rejects = (before_len - inner.rejected.len()) as u64;
        }
        if let Some(at) = before.messages {
            for history in inner.messages.values_mut() {
                let before_len = history.len();
                history.retain(|_, m| m.at >= at);
                counts.messages += (before_len - history.len()) as u64;
            }
        }
        if let Some(at) = before.llm_calls {
            let before_len = inner.llm_calls.len();
            inner.llm_calls.retain(|c| c.at >= at);
            counts.llm_calls = (before_len - inner.llm_calls.len()) as u64;
        }
        if let Some(at) = before.events {
            let before_len = inner.events.len();
            inner
                .events
                .retain(|_, e| e.status == EventStatus::Pending || e.at >= at);
            counts.events = (before_len - inner.events.len()) as u64;
        }
        if let Some(at) = before.leases {
            let before_len = inner.instances.len();
            inner.instances.retain(|_, record| record.seen_at >= at);
            counts.leases = (before_len - inner.instances.len()) as u64;
            let before_len = inner.leases.len();
            let instances = &inner.instances;
            inner.leases.retain(|_, lease| {
                lease.until >= at || (!lease.released && instances.contains_key(&lease.owner))
            });
            counts.leases += (before_len - inner.leases.len()) as u64;
        }
        Ok(counts)
    }

    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(conversation) = inner.conversations.get_mut(wa_id) else {
            return Ok(false);
        };
        if handoff.is_some() {
            conversation.handoff_requested = None;
        }
        conversation.handoff = handoff.cloned();
        Ok(true)
    }

    async fn request_handoff(&self, wa_id: &WaId, request: &HandoffRequest) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).handoff_requested = Some(request.clone());
        Ok(())
    }

    async fn latest_inbox(&self, wa_id: &WaId) -> StoreResult<Option<InboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .inbox_order
            .iter()
            .rev()
            .filter_map(|id| inner.inbox.get(id))
            .find(|entry| &entry.wa_id == wa_id)
            .cloned())
    }

    async fn set_pending_action(
        &self,
        wa_id: &WaId,
        action: Option<&PendingAction>,
    ) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).pending_action = action.cloned();
        Ok(())
    }

    async fn set_conversation_location(
        &self,
        wa_id: &WaId,
        location: crate::domain::GeoPoint,
    ) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).location = Some(location);
        Ok(())
    }

    async fn note_history_written(&self, wa_id: &WaId, at: DateTime<Utc>) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).history_at = Some(at);
        Ok(())
    }

    async fn set_conversation_lang(&self, wa_id: &WaId, lang: &str) -> StoreResult<()> {
        self.lock().conversation_mut(wa_id).lang = Some(lang.to_owned());
        Ok(())
    }

    async fn insert_outbox(&self, entries: &[NewOutbox]) -> StoreResult<Vec<OutboxId>> {
        let mut inner = self.lock();
        Ok(entries
            .iter()
            .map(|entry| {
                let id = OutboxId(bson::oid::ObjectId::new().to_hex());
                inner.push_outbox(OutboxEntry::queued(id.clone(), entry));
                id
            })
            .collect())
    }

    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()> {
        let mut inner = self.lock();
        for part in parts {
            let Some(&index) = inner.outbox_by_id.get(&part.id) else {
                inner.push_outbox(part.clone());
                continue;
            };
            if inner.early.remove(&part.id) {
                // What the status webhook knew stays; the rest is the sender's.
                let early = inner.outbox[index].clone();
                let mut completed = part.clone();
                completed.status = early.status;
                completed.status_at = early.status_at;
                completed.wamid = early.wamid.or(completed.wamid);
                inner.outbox[index] = completed;
                inner.reindex_outbox();
            }
        }
        Ok(())
    }

    async fn outbox_entry(&self, id: &OutboxId) -> StoreResult<Option<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox_by_id
            .get(id)
            .map(|&index| inner.outbox[index].clone()))
    }

    async fn update_outbox(&self, id: &OutboxId, update: &OutboxUpdate) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(&index) = inner.outbox_by_id.get(id) else {
            return Err(anyhow::anyhow!("no outbox entry {}", id.0).into());
        };
        let entry = &mut inner.outbox[index];
        let unsent = matches!(entry.status, OutboxStatus::Queued | OutboxStatus::Sending);
        let applied = unsent || matches!(update, OutboxUpdate::Sent { .. });
        match update {
            OutboxUpdate::Sending { at, resend_at } if unsent => {
                entry.status = OutboxStatus::Sending;
                entry.sending_at = Some(*at);
                entry.next_attempt_at = Some(*resend_at);
                entry.attempts += 1;
            }
            OutboxUpdate::Sent { wamid } => {
                entry.wamid.clone_from(wamid);
                entry.next_attempt_at = None;
                if OutboxStatus::Sent.replaces().contains(&entry.status) {
                    entry.status = OutboxStatus::Sent;
                }
                if let Some(wamid) = wamid {
                    inner.outbox_by_wamid.insert(wamid.clone(), index);
                }
            }
            OutboxUpdate::Retry { at, error } if unsent => {
                entry.status = OutboxStatus::Queued;
                entry.next_attempt_at = Some(*at);
                entry.error.clone_from(error);
            }
            OutboxUpdate::Failed { error } if unsent => {
                entry.status = OutboxStatus::Failed;
                entry.error = Some(error.clone());
            }
            _ => {}
        }
        let unsent = matches!(
            inner.outbox[index].status,
            OutboxStatus::Queued | OutboxStatus::Sending
        );
        if unsent {
            inner.unsent.insert(index);
        } else {
            inner.unsent.remove(&index);
        }
        Ok(applied)
    }

    async fn unsent_outbox(&self, wa_id: &WaId) -> StoreResult<Vec<OutboxEntry>> {
        let inner = self.lock();
        let mut unsent: Vec<OutboxEntry> = inner
            .unsent
            .iter()
            .map(|&i| &inner.outbox[i])
            .filter(|e| &e.wa_id == wa_id)
            .cloned()
            .collect();
        unsent.sort_by_key(|e| (e.at, e.part));
        Ok(unsent)
    }

    async fn conversations_with_unsent_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        let inner = self.lock();
        let mut due: Vec<&OutboxEntry> = inner
            .unsent
            .iter()
            .map(|&i| &inner.outbox[i])
            .filter(|e| e.next_attempt_at.is_none_or(|at| at <= now))
            .collect();
        due.sort_by_key(|e| e.at);
        Ok(first_distinct(due.iter().map(|e| e.wa_id.clone()), limit))
    }

    async fn outbox_by_wamid(&self, wamid: &WaMessageId) -> StoreResult<Option<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox_by_wamid
            .get(wamid)
            .map(|&index| inner.outbox[index].clone()))
    }

    async fn outbox_in_reply_to(&self, wamid: &WaMessageId) -> StoreResult<Vec<OutboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .outbox_by_reply_to
            .get(wamid)
            .into_iter()
            .flatten()
            .map(|&position| inner.outbox[position].clone())
            .collect())
    }

    async fn apply_status(&self, update: &StatusUpdate) -> StoreResult<StatusOutcome> {
        let Some(status) = OutboxStatus::parse(&update.status) else {
            return Ok(StatusOutcome::Unrecognised);
        };
        let mut inner = self.lock();
        let (index, outcome) = match inner.outbox_by_wamid.get(&update.wamid) {
            Some(&index) => (index, StatusOutcome::Applied),
            // Not by its wamid: the part the callback data names, if its wamid is not recorded.
            None => {
                let named = update
                    .callback_data
                    .as_deref()
                    .and_then(OutboxId::from_callback_data)
                    .and_then(|id| inner.outbox_by_id.get(&id).copied())
                    .filter(|&index| {
                        let entry = &inner.outbox[index];
                        entry.wamid.is_none() && status.replaces().contains(&entry.status)
                    });
                let Some(index) = named else {
                    return Ok(early_status(&mut inner, update, status));
                };
                inner.outbox[index].wamid = Some(update.wamid.clone());
                inner.outbox[index].next_attempt_at = None;
                inner.outbox_by_wamid.insert(update.wamid.clone(), index);
                (index, StatusOutcome::Reconciled)
            }
        };
        let entry = &mut inner.outbox[index];
        if !status.replaces().contains(&entry.status) {
            return Ok(StatusOutcome::Stale);
        }
        entry.status = status;
        entry.status_at = update.at;
        if status == OutboxStatus::Failed {
            entry.error = update.errors.first().cloned();
        }
        if !matches!(status, OutboxStatus::Queued | OutboxStatus::Sending) {
            inner.unsent.remove(&index);
        }
        Ok(outcome)
    }
}
