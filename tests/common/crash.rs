//! A process that dies at one write: the conversation store and the agency's data share one
//! count of writes, and from the `at`-th on every write fails, as if the process had died
//! right before it (nothing after it is stored). What a test then runs on the real stores
//! underneath is what a restarted process finds.

#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use zaguan::domain::{
    DialogState, Handoff, OutboxId, PendingAction, StatusUpdate, WaId, WaMessageId,
};
use zaguan::realestate::{
    Alert, Appointment, AppointmentStatus, CallbackRequest, ListingRequest, Offer, OfferAnswer,
    OfferStatus, Owner, Property, PropertyFilter, RealEstateStore, Settled, Slot, StaffMember,
    Visit,
};
use zaguan::realestate::{
    AlertStore, AppointmentStore, CallbackRequestStore, ListingRequestStore, OfferStore,
    OwnerStore, PropertyStore, SlotStore, StaffStore, VisitStore,
};
use zaguan::store::{
    Conversation, ConversationQuery, ConversationStore, Event, EventQuery, EventStore, EventUpdate,
    Fallback, HandoffReason, HandoffRequest, HandoffStep, HistoryStore, NewMessage, NewOutbox,
    OutboxEntry, OutboxStore, OutboxUpdate, Page, PageBatch, PagerStore, StatusOutcome, Store,
    StoreError, StoreParts, StoreResult, StoredMessage, TemplateStatus,
};

/// Where the process dies: the `at`-th write (1-based; 0: never), and every one after it.
#[derive(Default)]
pub struct Crash {
    writes: AtomicUsize,
    at: AtomicUsize,
    dead: AtomicBool,
}

impl Crash {
    pub fn at(at: usize) -> Arc<Self> {
        let crash = Self::default();
        crash.at.store(at, Ordering::SeqCst);
        Arc::new(crash)
    }

    /// Whether the process died.
    pub fn happened(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Writes attempted so far (the failed ones too).
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    fn write(&self) -> StoreResult<()> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("the process died".into()));
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.at.load(Ordering::SeqCst) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(StoreError::Unavailable("the process died".into()));
        }
        Ok(())
    }
}

/// `inner`'s conversations, history, outbox, events and pagers, dying with `crash`.
pub struct CrashStore {
    inner: Arc<dyn Store>,
    crash: Arc<Crash>,
}

/// `inner` as a process dying at `crash` sees it.
pub fn store(inner: Arc<dyn Store>, crash: Arc<Crash>) -> Arc<dyn Store> {
    let wrapped = Arc::new(CrashStore {
        inner: inner.clone(),
        crash,
    });
    let mut parts = StoreParts::of(inner);
    parts.conversations = wrapped.clone();
    parts.history = wrapped.clone();
    parts.outbox = wrapped.clone();
    parts.events = wrapped.clone();
    parts.pagers = wrapped;
    Arc::new(parts)
}

/// The agency's data, dying with `crash`.
pub struct CrashRealEstate {
    inner: Arc<dyn RealEstateStore>,
    crash: Arc<Crash>,
}

/// `inner` as a process dying at `crash` sees it.
pub fn realestate(inner: Arc<dyn RealEstateStore>, crash: Arc<Crash>) -> Arc<dyn RealEstateStore> {
    Arc::new(CrashRealEstate { inner, crash })
}

#[async_trait]
impl ConversationStore for CrashStore {
    async fn conversation(&self, wa_id: &WaId) -> StoreResult<Option<Conversation>> {
        self.inner.conversation(wa_id).await
    }

    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &DialogState,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.set_dialog_state(wa_id, dialog_state, at).await
    }

    async fn list_conversations(
        &self,
        query: &ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        self.inner.list_conversations(query).await
    }

    async fn reset_conversation(
        &self,
        wa_id: &WaId,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.reset_conversation(wa_id, by, at).await
    }

    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.set_handoff(wa_id, handoff).await
    }

    async fn request_handoff(
        &self,
        wa_id: &WaId,
        reason: &HandoffReason,
        first_notice_at: Option<DateTime<Utc>>,
    ) -> StoreResult<HandoffRequest> {
        self.crash.write()?;
        self.inner
            .request_handoff(wa_id, reason, first_notice_at)
            .await
    }

    async fn due_handoffs(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(WaId, HandoffRequest)>> {
        self.inner.due_handoffs(now, limit).await
    }

    async fn advance_handoff(
        &self,
        wa_id: &WaId,
        requested_at: DateTime<Utc>,
        from_level: u8,
        step: &HandoffStep,
    ) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner
            .advance_handoff(wa_id, requested_at, from_level, step)
            .await
    }

    async fn handoff_notice_failed(
        &self,
        wa_id: &WaId,
        failure: &zaguan::store::NoticeFailure,
    ) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.handoff_notice_failed(wa_id, failure).await
    }

    async fn set_pending_action(
        &self,
        wa_id: &WaId,
        action: Option<&PendingAction>,
    ) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.set_pending_action(wa_id, action).await
    }

    async fn set_conversation_location(
        &self,
        wa_id: &WaId,
        location: zaguan::domain::GeoPoint,
    ) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.set_conversation_location(wa_id, location).await
    }

    async fn note_history_written(&self, wa_id: &WaId, at: DateTime<Utc>) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.note_history_written(wa_id, at).await
    }

    async fn set_conversation_lang(&self, wa_id: &WaId, lang: &str) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.set_conversation_lang(wa_id, lang).await
    }
}

#[async_trait]
impl HistoryStore for CrashStore {
    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage> {
        self.crash.write()?;
        self.inner.append_message(message).await
    }

    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>> {
        self.inner.recent_messages(wa_id, limit).await
    }

    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.crash.write()?;
        self.inner.append_messages(messages, after).await
    }

    async fn messages_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.inner.messages_between(from, to, limit).await
    }
}

#[async_trait]
impl OutboxStore for CrashStore {
    async fn insert_outbox(&self, entries: &[NewOutbox]) -> StoreResult<Vec<OutboxId>> {
        self.crash.write()?;
        self.inner.insert_outbox(entries).await
    }

    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.record_reply(parts).await
    }

    async fn outbox_entry(&self, id: &OutboxId) -> StoreResult<Option<OutboxEntry>> {
        self.inner.outbox_entry(id).await
    }

    async fn update_outbox(&self, id: &OutboxId, update: &OutboxUpdate) -> StoreResult<bool> {
        self.inner.update_outbox(id, update).await
    }

    async fn unsent_outbox(&self, wa_id: &WaId) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.unsent_outbox(wa_id).await
    }

    async fn conversations_with_unsent_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        self.inner
            .conversations_with_unsent_outbox(now, limit)
            .await
    }

    async fn outbox_by_wamid(&self, wamid: &WaMessageId) -> StoreResult<Option<OutboxEntry>> {
        self.inner.outbox_by_wamid(wamid).await
    }

    async fn outbox_in_reply_to(&self, wamid: &WaMessageId) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.outbox_in_reply_to(wamid).await
    }

    async fn apply_status(&self, status: &StatusUpdate) -> StoreResult<StatusOutcome> {
        self.inner.apply_status(status).await
    }

    async fn fall_back(&self, id: &OutboxId, fallback: &Fallback) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.fall_back(id, fallback).await
    }

    async fn undelivered_since(
        &self,
        since: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.undelivered_since(since, limit).await
    }

    async fn record_template_status(&self, status: &TemplateStatus) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.record_template_status(status).await
    }

    async fn template_statuses(&self) -> StoreResult<Vec<TemplateStatus>> {
        self.inner.template_statuses().await
    }

    async fn record_account_health(
        &self,
        health: &zaguan::domain::AccountHealth,
    ) -> StoreResult<()> {
        self.inner.record_account_health(health).await
    }

    async fn account_health(&self) -> StoreResult<Vec<zaguan::domain::AccountHealth>> {
        self.inner.account_health().await
    }

    async fn initiated_since(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        with: &WaId,
    ) -> StoreResult<(u64, bool)> {
        self.inner.initiated_since(since, with).await
    }

    async fn pause_sends(
        &self,
        key: &str,
        until: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<()> {
        self.inner.pause_sends(key, until).await
    }

    async fn send_pauses(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(String, chrono::DateTime<chrono::Utc>)>> {
        self.inner.send_pauses(now, limit).await
    }

    async fn billed_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<zaguan::store::OutboxEntry>> {
        self.inner.billed_between(from, to, limit).await
    }
}

#[async_trait]
impl EventStore for CrashStore {
    async fn insert_events(&self, events: &[Event]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.insert_events(events).await
    }

    async fn due_events(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Event>> {
        self.inner.due_events(now, limit).await
    }

    async fn claim_event(
        &self,
        id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.inner.claim_event(id, now, until).await
    }

    async fn settle_event(&self, id: &str, update: &EventUpdate) -> StoreResult<()> {
        self.inner.settle_event(id, update).await
    }

    async fn list_events(&self, query: &EventQuery) -> StoreResult<Vec<Event>> {
        self.inner.list_events(query).await
    }

    async fn retry_event(&self, id: &str, now: DateTime<Utc>) -> StoreResult<bool> {
        self.inner.retry_event(id, now).await
    }
}

#[async_trait]
impl PagerStore for CrashStore {
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.page(member, page).await
    }

    async fn claim_pages(
        &self,
        member: &WaId,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
    ) -> StoreResult<Option<PageBatch>> {
        self.crash.write()?;
        self.inner.claim_pages(member, now, quiet).await
    }

    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.pages_sent(member, batch).await
    }

    async fn due_pagers(
        &self,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        self.inner.due_pagers(now, quiet, limit).await
    }
}

#[async_trait]
impl PropertyStore for CrashRealEstate {
    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.upsert_properties(properties).await
    }

    async fn properties(&self, filter: &PropertyFilter) -> StoreResult<Vec<Property>> {
        self.inner.properties(filter).await
    }

    async fn property(&self, id: &str) -> StoreResult<Option<Property>> {
        self.inner.property(id).await
    }

    async fn properties_news_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Property>> {
        self.inner.properties_news_since(since).await
    }
}

#[async_trait]
impl OwnerStore for CrashRealEstate {
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.upsert_owners(owners).await
    }

    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>> {
        self.inner.owner(id).await
    }

    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>> {
        self.inner.owner_by_wa_id(wa_id).await
    }

    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>> {
        self.inner.owners_on_whatsapp().await
    }

    async fn owners(&self) -> StoreResult<Vec<Owner>> {
        self.inner.owners().await
    }
}

#[async_trait]
impl StaffStore for CrashRealEstate {
    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.upsert_staff(staff).await
    }

    async fn staff(&self) -> StoreResult<Vec<StaffMember>> {
        self.inner.staff().await
    }
}

#[async_trait]
impl SlotStore for CrashRealEstate {
    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.upsert_slots(slots).await
    }

    async fn slots(
        &self,
        property_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Slot>> {
        self.inner.slots(property_id, from, to).await
    }

    async fn slot(&self, id: &str) -> StoreResult<Option<Slot>> {
        self.inner.slot(id).await
    }

    async fn claimed_slots(&self, slot_ids: &[String]) -> StoreResult<HashSet<String>> {
        self.inner.claimed_slots(slot_ids).await
    }

    async fn claim_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.claim_slot(slot_id, appointment_id).await
    }

    async fn release_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.release_slot(slot_id, appointment_id).await
    }
}

#[async_trait]
impl AppointmentStore for CrashRealEstate {
    async fn save_appointment(&self, appointment: &Appointment) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.save_appointment(appointment).await
    }

    async fn appointment(&self, id: &str) -> StoreResult<Option<Appointment>> {
        self.inner.appointment(id).await
    }

    async fn appointments_of(&self, wa_id: &WaId) -> StoreResult<Vec<Appointment>> {
        self.inner.appointments_of(wa_id).await
    }

    async fn appointments_for(&self, property_id: &str) -> StoreResult<Vec<Appointment>> {
        self.inner.appointments_for(property_id).await
    }

    async fn booked_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.inner.booked_between(from, to).await
    }

    async fn claim_reminder(&self, appointment_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.claim_reminder(appointment_id, at).await
    }

    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.inner.appointments_created_since(since).await
    }

    async fn appointments_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.inner.appointments_between(from, to).await
    }

    async fn settle_appointment(
        &self,
        id: &str,
        status: AppointmentStatus,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Settled<Appointment>>> {
        self.crash.write()?;
        self.inner.settle_appointment(id, status, by, at).await
    }

    async fn notices_due(&self, limit: usize) -> StoreResult<Vec<Appointment>> {
        self.inner.notices_due(limit).await
    }

    async fn clear_notice(&self, id: &str, notice: &str) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.clear_notice(id, notice).await
    }

    async fn outcomes_unasked(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Appointment>> {
        self.inner.outcomes_unasked(before, limit).await
    }

    async fn claim_outcome_question(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.claim_outcome_question(id, at).await
    }
}

#[async_trait]
impl VisitStore for CrashRealEstate {
    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.upsert_visits(visits).await
    }

    async fn visits_of(&self, wa_id: &WaId) -> StoreResult<Vec<Visit>> {
        self.inner.visits_of(wa_id).await
    }

    async fn visits_to(&self, property_id: &str) -> StoreResult<Vec<Visit>> {
        self.inner.visits_to(property_id).await
    }
}

#[async_trait]
impl OfferStore for CrashRealEstate {
    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.upsert_offers(offers).await
    }

    async fn offers_of(&self, wa_id: &WaId) -> StoreResult<Vec<Offer>> {
        self.inner.offers_of(wa_id).await
    }

    async fn offers_for(&self, property_id: &str) -> StoreResult<Vec<Offer>> {
        self.inner.offers_for(property_id).await
    }

    async fn offers_created_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Offer>> {
        self.inner.offers_created_since(since).await
    }

    async fn offer(&self, id: &str) -> StoreResult<Option<Offer>> {
        self.inner.offer(id).await
    }

    async fn answer_offer(
        &self,
        id: &str,
        from: OfferStatus,
        status: OfferStatus,
        answer: &OfferAnswer,
    ) -> StoreResult<Option<Settled<Offer>>> {
        self.crash.write()?;
        self.inner.answer_offer(id, from, status, answer).await
    }

    async fn offer_notices_due(&self, limit: usize) -> StoreResult<Vec<Offer>> {
        self.inner.offer_notices_due(limit).await
    }

    async fn offer_notice(&self, id: &str, notice: &str, set: bool) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.offer_notice(id, notice, set).await
    }

    async fn await_counter(&self, id: &str, wa_id: Option<&WaId>) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.await_counter(id, wa_id).await
    }

    async fn counter_awaited_from(&self, wa_id: &WaId) -> StoreResult<Option<Offer>> {
        self.inner.counter_awaited_from(wa_id).await
    }
}

#[async_trait]
impl CallbackRequestStore for CrashRealEstate {
    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.insert_callback_request(request).await
    }

    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>> {
        self.inner.callback_requests_of(wa_id).await
    }
}

#[async_trait]
impl ListingRequestStore for CrashRealEstate {
    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.save_listing_request(request).await
    }

    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>> {
        self.inner.listing_requests_for(property_id).await
    }
}

#[async_trait]
impl AlertStore for CrashRealEstate {
    async fn save_alert(&self, alert: &Alert) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.save_alert(alert).await
    }

    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>> {
        self.inner.alerts_of(wa_id).await
    }

    async fn active_alerts(&self) -> StoreResult<Vec<Alert>> {
        self.inner.active_alerts().await
    }

    async fn claim_alert_notice(
        &self,
        wa_id: &WaId,
        property_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.claim_alert_notice(wa_id, property_id, at).await
    }
}

#[async_trait]
impl zaguan::realestate::FeedImportStore for CrashRealEstate {
    async fn claim_feed_import(
        &self,
        round: &str,
        instance: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.crash.write()?;
        self.inner.claim_feed_import(round, instance, at).await
    }

    async fn finish_feed_import(
        &self,
        record: &zaguan::realestate::FeedImportRecord,
    ) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.finish_feed_import(record).await
    }

    async fn feed_imports(
        &self,
        limit: usize,
    ) -> StoreResult<Vec<zaguan::realestate::FeedImportRecord>> {
        self.inner.feed_imports(limit).await
    }
}

#[async_trait]
impl zaguan::realestate::CalendarStore for CrashRealEstate {
    async fn save_calendar(&self, copy: &zaguan::realestate::CalendarCopy) -> StoreResult<()> {
        self.crash.write()?;
        self.inner.save_calendar(copy).await
    }

    async fn calendar(
        &self,
        staff_id: &str,
    ) -> StoreResult<Option<zaguan::realestate::CalendarCopy>> {
        self.inner.calendar(staff_id).await
    }

    async fn calendars(&self) -> StoreResult<Vec<zaguan::realestate::CalendarCopy>> {
        self.inner.calendars().await
    }
}
