//! The business's data in process memory: the embedded default next to the in-memory
//! conversation store, and the fast store of tests and demos. It behaves exactly like
//! [`MongoRealEstate`](super::MongoRealEstate) — both pass `tests/suite/realestate_store.rs`.
//!
//! One mutex over every collection: each method is short and never awaits while holding it, so
//! claiming a slot or a reminder is a check-and-insert no other caller can interleave with.
//! Records are kept in id order (`BTreeMap`), the order listings are returned in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::model::{
    Alert, Appointment, AppointmentStatus, CallbackRequest, ListingRequest, Offer, Owner, Property,
    Slot, StaffMember, Visit,
};
use super::store::{PropertyFilter, RealEstateStore};
use crate::domain::WaId;
use crate::store::StoreResult;

/// The real-estate store in memory; nothing survives a restart.
#[derive(Default)]
pub struct MemoryRealEstate {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    owners: BTreeMap<String, Owner>,
    staff: BTreeMap<String, StaffMember>,
    properties: BTreeMap<String, Property>,
    slots: BTreeMap<String, Slot>,
    /// Slot id → the appointment holding it.
    slot_claims: HashMap<String, String>,
    appointments: BTreeMap<String, Appointment>,
    /// Appointments whose reminder has been claimed.
    reminders: HashSet<String>,
    visits: BTreeMap<String, Visit>,
    callback_requests: BTreeMap<String, CallbackRequest>,
    listing_requests: BTreeMap<String, ListingRequest>,
    offers: BTreeMap<String, Offer>,
    alerts: BTreeMap<String, Alert>,
    /// `(wa_id, property_id)` of the saved-search notices claimed.
    alert_notices: HashSet<(WaId, String)>,
}

impl MemoryRealEstate {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every write is a single map insert or removal, so a panic while holding the lock cannot
        // leave a half-written record: a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Inserts or replaces each record under its id; a later record of the batch wins.
fn upsert<T: Clone>(map: &mut BTreeMap<String, T>, records: &[T], id: impl Fn(&T) -> &str) {
    for record in records {
        map.insert(id(record).to_owned(), record.clone());
    }
}

/// `records` newest first by `at`, ties by id.
fn newest_first<T>(
    mut records: Vec<T>,
    at: impl Fn(&T) -> DateTime<Utc>,
    id: impl Fn(&T) -> &str,
) -> Vec<T> {
    records.sort_by(|a, b| at(b).cmp(&at(a)).then_with(|| id(a).cmp(id(b))));
    records
}

/// `records` by start time, ties by id.
fn by_start<T>(
    mut records: Vec<T>,
    starts_at: impl Fn(&T) -> DateTime<Utc>,
    id: impl Fn(&T) -> &str,
) -> Vec<T> {
    records.sort_by(|a, b| {
        starts_at(a)
            .cmp(&starts_at(b))
            .then_with(|| id(a).cmp(id(b)))
    });
    records
}

#[async_trait]
impl RealEstateStore for MemoryRealEstate {
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()> {
        upsert(&mut self.lock().owners, owners, |o| &o.id);
        Ok(())
    }

    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()> {
        upsert(&mut self.lock().staff, staff, |s| &s.id);
        Ok(())
    }

    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()> {
        upsert(&mut self.lock().properties, properties, |p| &p.id);
        Ok(())
    }

    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()> {
        upsert(&mut self.lock().slots, slots, |s| &s.id);
        Ok(())
    }

    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()> {
        upsert(&mut self.lock().visits, visits, |v| &v.id);
        Ok(())
    }

    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()> {
        upsert(&mut self.lock().offers, offers, |o| &o.id);
        Ok(())
    }

    async fn properties(&self, filter: &PropertyFilter) -> StoreResult<Vec<Property>> {
        Ok(self
            .lock()
            .properties
            .values()
            .filter(|p| filter.admits(p))
            .cloned()
            .collect())
    }

    async fn property(&self, id: &str) -> StoreResult<Option<Property>> {
        Ok(self.lock().properties.get(id).cloned())
    }

    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>> {
        Ok(self.lock().owners.get(id).cloned())
    }

    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>> {
        Ok(self
            .lock()
            .owners
            .values()
            .find(|o| o.wa_id.as_ref() == Some(wa_id))
            .cloned())
    }

    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>> {
        Ok(self
            .lock()
            .owners
            .values()
            .filter(|o| o.wa_id.is_some())
            .cloned()
            .collect())
    }

    async fn staff(&self) -> StoreResult<Vec<StaffMember>> {
        Ok(self.lock().staff.values().cloned().collect())
    }

    async fn slots(
        &self,
        property_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Slot>> {
        let slots = self
            .lock()
            .slots
            .values()
            .filter(|s| s.property_id == property_id && from <= s.starts_at && s.starts_at < to)
            .cloned()
            .collect();
        Ok(by_start(slots, |s| s.starts_at, |s| &s.id))
    }

    async fn slot(&self, id: &str) -> StoreResult<Option<Slot>> {
        Ok(self.lock().slots.get(id).cloned())
    }

    async fn claimed_slots(&self, slot_ids: &[String]) -> StoreResult<HashSet<String>> {
        let inner = self.lock();
        Ok(slot_ids
            .iter()
            .filter(|id| inner.slot_claims.contains_key(*id))
            .cloned()
            .collect())
    }

    async fn claim_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<bool> {
        let mut inner = self.lock();
        let holder = inner
            .slot_claims
            .entry(slot_id.to_owned())
            .or_insert_with(|| appointment_id.to_owned());
        // Claiming again for the appointment that holds it is a retry, not a conflict.
        Ok(holder == appointment_id)
    }

    async fn release_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        if inner
            .slot_claims
            .get(slot_id)
            .is_some_and(|a| a == appointment_id)
        {
            inner.slot_claims.remove(slot_id);
        }
        Ok(())
    }

    async fn save_appointment(&self, appointment: &Appointment) -> StoreResult<()> {
        self.lock()
            .appointments
            .insert(appointment.id.clone(), appointment.clone());
        Ok(())
    }

    async fn appointment(&self, id: &str) -> StoreResult<Option<Appointment>> {
        Ok(self.lock().appointments.get(id).cloned())
    }

    async fn appointments_of(&self, wa_id: &WaId) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn appointments_for(&self, property_id: &str) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.property_id == property_id)
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn booked_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        let appointments = self
            .lock()
            .appointments
            .values()
            .filter(|a| {
                a.status == AppointmentStatus::Booked && from <= a.starts_at && a.starts_at < to
            })
            .cloned()
            .collect();
        Ok(by_start(appointments, |a| a.starts_at, |a| &a.id))
    }

    async fn claim_reminder(&self, appointment_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let mut inner = self.lock();
        if !inner.reminders.insert(appointment_id.to_owned()) {
            return Ok(false);
        }
        if let Some(appointment) = inner.appointments.get_mut(appointment_id) {
            appointment.reminder_sent_at = Some(at);
        }
        Ok(true)
    }

    async fn visits_of(&self, wa_id: &WaId) -> StoreResult<Vec<Visit>> {
        let visits = self
            .lock()
            .visits
            .values()
            .filter(|v| v.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(visits, |v| v.visited_at, |v| &v.id))
    }

    async fn visits_to(&self, property_id: &str) -> StoreResult<Vec<Visit>> {
        let visits = self
            .lock()
            .visits
            .values()
            .filter(|v| v.property_id == property_id)
            .cloned()
            .collect();
        Ok(newest_first(visits, |v| v.visited_at, |v| &v.id))
    }

    async fn offers_of(&self, wa_id: &WaId) -> StoreResult<Vec<Offer>> {
        let offers = self
            .lock()
            .offers
            .values()
            .filter(|o| o.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(offers, |o| o.created_at, |o| &o.id))
    }

    async fn offers_for(&self, property_id: &str) -> StoreResult<Vec<Offer>> {
        let offers = self
            .lock()
            .offers
            .values()
            .filter(|o| o.property_id == property_id)
            .cloned()
            .collect();
        Ok(newest_first(offers, |o| o.created_at, |o| &o.id))
    }

    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool> {
        let mut inner = self.lock();
        match inner.callback_requests.entry(request.id.clone()) {
            std::collections::btree_map::Entry::Occupied(_) => Ok(false),
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(request.clone());
                Ok(true)
            }
        }
    }

    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()> {
        self.lock()
            .listing_requests
            .insert(request.id.clone(), request.clone());
        Ok(())
    }

    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>> {
        let requests = self
            .lock()
            .listing_requests
            .values()
            .filter(|r| r.property_id == property_id)
            .cloned()
            .collect();
        Ok(newest_first(requests, |r| r.created_at, |r| &r.id))
    }

    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>> {
        let requests = self
            .lock()
            .callback_requests
            .values()
            .filter(|r| r.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(requests, |r| r.created_at, |r| &r.id))
    }

    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        let mut found: Vec<Appointment> = self
            .lock()
            .appointments
            .values()
            .filter(|a| a.created_at >= since)
            .cloned()
            .collect();
        found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(found)
    }

    async fn offers_created_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Offer>> {
        let mut found: Vec<Offer> = self
            .lock()
            .offers
            .values()
            .filter(|o| o.created_at >= since)
            .cloned()
            .collect();
        found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(found)
    }

    async fn save_alert(&self, alert: &Alert) -> StoreResult<()> {
        self.lock().alerts.insert(alert.id.clone(), alert.clone());
        Ok(())
    }

    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>> {
        let alerts = self
            .lock()
            .alerts
            .values()
            .filter(|a| a.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(alerts, |a| a.created_at, |a| &a.id))
    }

    async fn active_alerts(&self) -> StoreResult<Vec<Alert>> {
        Ok(self
            .lock()
            .alerts
            .values()
            .filter(|a| a.cancelled_at.is_none())
            .cloned()
            .collect())
    }

    async fn properties_news_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Property>> {
        Ok(self
            .lock()
            .properties
            .values()
            .filter(|p| p.listed_at >= since || p.price_dropped_at.is_some_and(|at| at >= since))
            .cloned()
            .collect())
    }

    async fn claim_alert_notice(
        &self,
        wa_id: &WaId,
        property_id: &str,
        _at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(self
            .lock()
            .alert_notices
            .insert((wa_id.clone(), property_id.to_owned())))
    }
}
