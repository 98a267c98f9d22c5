//! A store assembled from its collections' parts: by default each part is the same store, and
//! one part can be replaced on its own — a test that breaks the outbox implements
//! [`OutboxStore`] only, and every other collection answers as the real store does.

use crate::domain::DialogState;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::{
    AccountHealth, Handoff, LlmCall, OutboxId, PendingAction, Referral, Role, StatusUpdate, WaId,
    WaMessageId,
};
use crate::store::{
    ContactSeen, Conversation, ConversationQuery, ConversationStore, Event, EventQuery, EventStore,
    EventUpdate, Fallback, ForgetCounts, HandoffReason, HandoffRequest, HandoffStep, HistoryStore,
    InboxBacklog, InboxEntry, InboxInsert, InboxOutcomes, InboxStatus, InboxStore, InstanceRecord,
    LeadFilter, LeadStatus, LeadStore, LeaseStore, LeaseView, MaintenanceStore, NewMessage,
    NewOutbox, NoticeFailure, OptOut, OutboxEntry, OutboxStore, OutboxUpdate, Page, PageBatch,
    PagerStore, PortalLead, Pressure, PurgeBefore, PurgeCounts, RejectedEntry, RoleAssignment,
    StatusOutcome, Store, StoreResult, StoredMessage, TemplateStatus, UsageStore, User, UserStore,
};

/// One trait object per collection.
#[derive(Clone)]
pub struct StoreParts {
    pub inbox: Arc<dyn InboxStore>,
    pub users: Arc<dyn UserStore>,
    pub conversations: Arc<dyn ConversationStore>,
    pub history: Arc<dyn HistoryStore>,
    pub outbox: Arc<dyn OutboxStore>,
    pub usage: Arc<dyn UsageStore>,
    pub leases: Arc<dyn LeaseStore>,
    pub events: Arc<dyn EventStore>,
    pub pagers: Arc<dyn PagerStore>,
    pub leads: Arc<dyn LeadStore>,
    pub maintenance: Arc<dyn MaintenanceStore>,
}

impl StoreParts {
    /// Every part answered by `store`.
    pub fn of(store: Arc<dyn Store>) -> Self {
        Self {
            inbox: store.clone(),
            users: store.clone(),
            conversations: store.clone(),
            history: store.clone(),
            outbox: store.clone(),
            usage: store.clone(),
            leases: store.clone(),
            events: store.clone(),
            pagers: store.clone(),
            leads: store.clone(),
            maintenance: store.clone(),
        }
    }
}

#[async_trait]
impl InboxStore for StoreParts {
    async fn insert_inbox(&self, messages: &[InboxEntry]) -> StoreResult<InboxInsert> {
        self.inbox.insert_inbox(messages).await
    }

    async fn inbox_entry(&self, wamid: &WaMessageId) -> StoreResult<Option<InboxEntry>> {
        self.inbox.inbox_entry(wamid).await
    }

    async fn pending_inbox(&self, limit: usize) -> StoreResult<Vec<InboxEntry>> {
        self.inbox.pending_inbox(limit).await
    }

    async fn record_rejected(&self, rejected: &RejectedEntry) -> StoreResult<()> {
        self.inbox.record_rejected(rejected).await
    }

    async fn rejected(&self, limit: usize) -> StoreResult<Vec<RejectedEntry>> {
        self.inbox.rejected(limit).await
    }

    async fn open_inbox(&self, wa_id: &WaId) -> StoreResult<Vec<InboxEntry>> {
        self.inbox.open_inbox(wa_id).await
    }

    async fn conversations_with_open_inbox(&self, limit: usize) -> StoreResult<Vec<WaId>> {
        self.inbox.conversations_with_open_inbox(limit).await
    }

    async fn count_attempt(&self, wamids: &[WaMessageId]) -> StoreResult<()> {
        self.inbox.count_attempt(wamids).await
    }

    async fn set_inbox_status(
        &self,
        wamids: &[WaMessageId],
        status: InboxStatus,
    ) -> StoreResult<()> {
        self.inbox.set_inbox_status(wamids, status).await
    }

    async fn inbox_backlog(&self) -> StoreResult<InboxBacklog> {
        self.inbox.inbox_backlog().await
    }

    async fn latest_inbox(&self, wa_id: &WaId) -> StoreResult<Option<InboxEntry>> {
        self.inbox.latest_inbox(wa_id).await
    }

    async fn inbox_outcomes_since(&self, since: DateTime<Utc>) -> StoreResult<InboxOutcomes> {
        self.inbox.inbox_outcomes_since(since).await
    }
}

#[async_trait]
impl UserStore for StoreParts {
    async fn record_lead(
        &self,
        wa_id: &WaId,
        at: DateTime<Utc>,
        assistant: &str,
    ) -> StoreResult<()> {
        self.users.record_lead(wa_id, at, assistant).await
    }

    async fn note_portal_contact(
        &self,
        wa_id: &WaId,
        name: Option<&str>,
        source: &str,
    ) -> StoreResult<()> {
        self.users.note_portal_contact(wa_id, name, source).await
    }

    async fn leads_since(&self, since: DateTime<Utc>, limit: usize) -> StoreResult<Vec<User>> {
        self.users.leads_since(since, limit).await
    }

    async fn opt_outs_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> StoreResult<u64> {
        self.users.opt_outs_between(from, to).await
    }

    async fn record_contact(&self, contact: &ContactSeen) -> StoreResult<()> {
        self.users.record_contact(contact).await
    }

    async fn user(&self, wa_id: &WaId) -> StoreResult<Option<User>> {
        self.users.user(wa_id).await
    }

    async fn assign_role(&self, wa_id: &WaId, assignment: &RoleAssignment) -> StoreResult<()> {
        self.users.assign_role(wa_id, assignment).await
    }

    async fn set_opt_out(&self, wa_id: &WaId, opt_out: Option<&OptOut>) -> StoreResult<()> {
        self.users.set_opt_out(wa_id, opt_out).await
    }

    async fn set_marketing_preference(
        &self,
        wa_id: &WaId,
        stopped: bool,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.users
            .set_marketing_preference(wa_id, stopped, at)
            .await
    }

    async fn note_referral(
        &self,
        wa_id: &WaId,
        referral: &Referral,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.users.note_referral(wa_id, referral, at).await
    }

    async fn set_user_role(&self, wa_id: &WaId, role: Role) -> StoreResult<()> {
        self.users.set_user_role(wa_id, role).await
    }
}

#[async_trait]
impl ConversationStore for StoreParts {
    async fn conversation(&self, wa_id: &WaId) -> StoreResult<Option<Conversation>> {
        self.conversations.conversation(wa_id).await
    }

    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &DialogState,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.conversations
            .set_dialog_state(wa_id, dialog_state, at)
            .await
    }

    async fn list_conversations(
        &self,
        query: &ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        self.conversations.list_conversations(query).await
    }

    async fn reset_conversation(
        &self,
        wa_id: &WaId,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.conversations.reset_conversation(wa_id, by, at).await
    }

    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool> {
        self.conversations.set_handoff(wa_id, handoff).await
    }

    async fn request_handoff(
        &self,
        wa_id: &WaId,
        reason: &HandoffReason,
        first_notice_at: Option<DateTime<Utc>>,
    ) -> StoreResult<HandoffRequest> {
        self.conversations
            .request_handoff(wa_id, reason, first_notice_at)
            .await
    }

    async fn due_handoffs(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(WaId, HandoffRequest)>> {
        self.conversations.due_handoffs(now, limit).await
    }

    async fn advance_handoff(
        &self,
        wa_id: &WaId,
        requested_at: DateTime<Utc>,
        from_level: u8,
        step: &HandoffStep,
    ) -> StoreResult<bool> {
        self.conversations
            .advance_handoff(wa_id, requested_at, from_level, step)
            .await
    }

    async fn handoff_notice_failed(
        &self,
        wa_id: &WaId,
        failure: &NoticeFailure,
    ) -> StoreResult<bool> {
        self.conversations
            .handoff_notice_failed(wa_id, failure)
            .await
    }

    async fn set_pending_action(
        &self,
        wa_id: &WaId,
        action: Option<&PendingAction>,
    ) -> StoreResult<()> {
        self.conversations.set_pending_action(wa_id, action).await
    }

    async fn set_conversation_location(
        &self,
        wa_id: &WaId,
        location: crate::domain::GeoPoint,
    ) -> StoreResult<()> {
        self.conversations
            .set_conversation_location(wa_id, location)
            .await
    }

    async fn note_history_written(&self, wa_id: &WaId, at: DateTime<Utc>) -> StoreResult<()> {
        self.conversations.note_history_written(wa_id, at).await
    }

    async fn set_conversation_lang(&self, wa_id: &WaId, lang: &str) -> StoreResult<()> {
        self.conversations.set_conversation_lang(wa_id, lang).await
    }
}

#[async_trait]
impl HistoryStore for StoreParts {
    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage> {
        self.history.append_message(message).await
    }

    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>> {
        self.history.recent_messages(wa_id, limit).await
    }

    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.history.append_messages(messages, after).await
    }

    async fn messages_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.history.messages_between(from, to, limit).await
    }
}

#[async_trait]
impl OutboxStore for StoreParts {
    async fn insert_outbox(&self, entries: &[NewOutbox]) -> StoreResult<Vec<OutboxId>> {
        self.outbox.insert_outbox(entries).await
    }

    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()> {
        self.outbox.record_reply(parts).await
    }

    async fn outbox_entry(&self, id: &OutboxId) -> StoreResult<Option<OutboxEntry>> {
        self.outbox.outbox_entry(id).await
    }

    async fn update_outbox(&self, id: &OutboxId, update: &OutboxUpdate) -> StoreResult<bool> {
        self.outbox.update_outbox(id, update).await
    }

    async fn mark_outbox_sent(&self, id: &OutboxId, wamid: &WaMessageId) -> StoreResult<()> {
        self.outbox.mark_outbox_sent(id, wamid).await
    }

    async fn unsent_outbox(&self, wa_id: &WaId) -> StoreResult<Vec<OutboxEntry>> {
        self.outbox.unsent_outbox(wa_id).await
    }

    async fn conversations_with_unsent_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        self.outbox
            .conversations_with_unsent_outbox(now, limit)
            .await
    }

    async fn outbox_by_wamid(&self, wamid: &WaMessageId) -> StoreResult<Option<OutboxEntry>> {
        self.outbox.outbox_by_wamid(wamid).await
    }

    async fn outbox_in_reply_to(&self, wamid: &WaMessageId) -> StoreResult<Vec<OutboxEntry>> {
        self.outbox.outbox_in_reply_to(wamid).await
    }

    async fn fall_back(&self, id: &OutboxId, fallback: &Fallback) -> StoreResult<bool> {
        self.outbox.fall_back(id, fallback).await
    }

    async fn billed_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        self.outbox.billed_between(from, to, limit).await
    }

    async fn undelivered_since(
        &self,
        since: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        self.outbox.undelivered_since(since, limit).await
    }

    async fn record_template_status(&self, status: &TemplateStatus) -> StoreResult<()> {
        self.outbox.record_template_status(status).await
    }

    async fn template_statuses(&self) -> StoreResult<Vec<TemplateStatus>> {
        self.outbox.template_statuses().await
    }

    async fn record_account_health(&self, health: &AccountHealth) -> StoreResult<()> {
        self.outbox.record_account_health(health).await
    }

    async fn account_health(&self) -> StoreResult<Vec<AccountHealth>> {
        self.outbox.account_health().await
    }

    async fn initiated_since(&self, since: DateTime<Utc>, with: &WaId) -> StoreResult<(u64, bool)> {
        self.outbox.initiated_since(since, with).await
    }

    async fn pause_sends(&self, key: &str, until: DateTime<Utc>) -> StoreResult<()> {
        self.outbox.pause_sends(key, until).await
    }

    async fn send_pauses(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(String, DateTime<Utc>)>> {
        self.outbox.send_pauses(now, limit).await
    }

    async fn apply_status(&self, status: &StatusUpdate) -> StoreResult<StatusOutcome> {
        self.outbox.apply_status(status).await
    }
}

#[async_trait]
impl UsageStore for StoreParts {
    async fn insert_llm_calls(&self, calls: &[LlmCall]) -> StoreResult<()> {
        self.usage.insert_llm_calls(calls).await
    }

    async fn llm_calls(&self, conversation: &str, limit: usize) -> StoreResult<Vec<LlmCall>> {
        self.usage.llm_calls(conversation, limit).await
    }

    async fn llm_tokens_since(&self, conversation: &str, since: DateTime<Utc>) -> StoreResult<u64> {
        self.usage.llm_tokens_since(conversation, since).await
    }

    async fn llm_calls_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<LlmCall>> {
        self.usage.llm_calls_between(from, to, limit).await
    }
}

#[async_trait]
impl LeaseStore for StoreParts {
    async fn claim_conversation(
        &self,
        wa_id: &WaId,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        live: &[String],
    ) -> StoreResult<bool> {
        self.leases
            .claim_conversation(wa_id, owner, now, until, live)
            .await
    }

    async fn release_conversation(&self, wa_id: &WaId, owner: &str) -> StoreResult<()> {
        self.leases.release_conversation(wa_id, owner).await
    }

    async fn release_all_leases(&self, owner: &str) -> StoreResult<u64> {
        self.leases.release_all_leases(owner).await
    }

    async fn active_leases(&self, now: DateTime<Utc>, live: &[String]) -> StoreResult<u64> {
        self.leases.active_leases(now, live).await
    }

    async fn server_time(&self) -> StoreResult<DateTime<Utc>> {
        self.leases.server_time().await
    }

    async fn instance_beat(
        &self,
        id: &str,
        nonce: &str,
        take_over: bool,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        self.leases.instance_beat(id, nonce, take_over).await
    }

    async fn instances(&self) -> StoreResult<Vec<InstanceRecord>> {
        self.leases.instances().await
    }

    async fn lease_of(&self, wa_id: &WaId) -> StoreResult<Option<LeaseView>> {
        self.leases.lease_of(wa_id).await
    }

    async fn instance_left(&self, id: &str, nonce: &str) -> StoreResult<()> {
        self.leases.instance_left(id, nonce).await
    }
}

#[async_trait]
impl EventStore for StoreParts {
    async fn insert_events(&self, events: &[Event]) -> StoreResult<()> {
        self.events.insert_events(events).await
    }

    async fn due_events(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Event>> {
        self.events.due_events(now, limit).await
    }

    async fn claim_event(
        &self,
        id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.events.claim_event(id, now, until).await
    }

    async fn settle_event(&self, id: &str, update: &EventUpdate) -> StoreResult<()> {
        self.events.settle_event(id, update).await
    }

    async fn list_events(&self, query: &EventQuery) -> StoreResult<Vec<Event>> {
        self.events.list_events(query).await
    }

    async fn retry_event(&self, id: &str, now: DateTime<Utc>) -> StoreResult<bool> {
        self.events.retry_event(id, now).await
    }
}

#[async_trait]
impl PagerStore for StoreParts {
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()> {
        self.pagers.page(member, page).await
    }

    async fn claim_pages(
        &self,
        member: &WaId,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
    ) -> StoreResult<Option<PageBatch>> {
        self.pagers.claim_pages(member, now, quiet).await
    }

    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()> {
        self.pagers.pages_sent(member, batch).await
    }

    async fn due_pagers(
        &self,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        self.pagers.due_pagers(now, quiet, limit).await
    }
}

#[async_trait]
impl MaintenanceStore for StoreParts {
    async fn ping(&self) -> StoreResult<()> {
        self.maintenance.ping().await
    }

    async fn forget(&self, wa_id: &WaId) -> StoreResult<ForgetCounts> {
        self.maintenance.forget(wa_id).await
    }

    async fn purge(&self, before: &PurgeBefore) -> StoreResult<PurgeCounts> {
        self.maintenance.purge(before).await
    }

    fn pressure(&self) -> Option<Pressure> {
        self.maintenance.pressure()
    }
}

#[async_trait]
impl LeadStore for StoreParts {
    async fn insert_lead(&self, lead: &PortalLead) -> StoreResult<(PortalLead, bool)> {
        self.leads.insert_lead(lead).await
    }

    async fn lead(&self, id: &str) -> StoreResult<Option<PortalLead>> {
        self.leads.lead(id).await
    }

    async fn update_lead(&self, lead: &PortalLead, from: LeadStatus) -> StoreResult<bool> {
        self.leads.update_lead(lead, from).await
    }

    async fn leads(&self, filter: &LeadFilter) -> StoreResult<Vec<PortalLead>> {
        self.leads.leads(filter).await
    }
}
