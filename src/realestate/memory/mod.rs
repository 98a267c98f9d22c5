//! The business's data in process memory: the embedded default next to the in-memory
//! conversation store, and the fast store of tests and demos. It behaves exactly like
//! [`MongoRealEstate`](super::MongoRealEstate) — both pass `tests/suite/realestate_store.rs`.
//!
//! One mutex over every collection: each method is short and never awaits while holding it, so
//! claiming a slot or a reminder is a check-and-insert no other caller can interleave with.
//! Records are kept in id order (`BTreeMap`), the order listings are returned in.

mod alerts;
mod appointments;
mod calendars;
mod callback_requests;
mod feed_imports;
mod listing_requests;
mod offers;
mod owners;
mod properties;
mod slots;
mod staff;
mod visits;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use super::model::{
    Alert, Appointment, CallbackRequest, ListingRequest, Offer, Owner, Property, Slot, StaffMember,
    Visit,
};
use crate::domain::WaId;

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
    feed_imports: BTreeMap<String, crate::realestate::store::FeedImportRecord>,
    calendars: BTreeMap<String, crate::realestate::store::CalendarCopy>,
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
