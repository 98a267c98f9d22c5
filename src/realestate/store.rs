//! Where the business's data lives: one trait, two implementations like the conversation store
//! (MongoDB collections `properties`, `owners`, `staff`, `slots`, `slot_claims`, `appointments`,
//! `visits`, `offers`, `reminders`; and in memory). Every write is a single-document atomic
//! operation; the two that must never happen twice — booking a slot and sending a reminder —
//! are claims by unique `_id` insert, which MongoDB and FerretDB both make atomic.

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use unicode_normalization::UnicodeNormalization as _;
use unicode_normalization::char::is_combining_mark;

use super::model::{
    Alert, Appointment, CallbackRequest, ListingRequest, ListingStatus, Offer, Operation, Owner,
    Property, Slot, StaffMember, Visit,
};
use crate::domain::WaId;
use crate::store::StoreResult;

/// A coarse filter the store applies; finer filters, sorting and paging are the caller's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PropertyFilter {
    /// Case- and accent-insensitive match on the city.
    pub city: Option<String>,
    pub operation: Option<Operation>,
    /// Only `available` listings.
    pub available_only: bool,
    pub owner_id: Option<String>,
}

impl PropertyFilter {
    /// Whether a listing passes the filter. Both stores decide with it: MongoDB after a query
    /// on the exact-match fields, for the city.
    pub fn admits(&self, property: &Property) -> bool {
        self.city
            .as_ref()
            .is_none_or(|city| city_key(city) == city_key(&property.city))
            && self.operation.is_none_or(|op| op == property.operation)
            && (!self.available_only || property.status == ListingStatus::Available)
            && self
                .owner_id
                .as_ref()
                .is_none_or(|owner| *owner == property.owner_id)
    }
}

/// A city as compared: trimmed, lowercase, without accents ("Málaga" = "malaga").
fn city_key(city: &str) -> String {
    city.trim()
        .chars()
        .flat_map(char::to_lowercase)
        .nfd()
        .filter(|c| !is_combining_mark(*c))
        .collect()
}

#[async_trait]
pub trait RealEstateStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()>;
    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()>;
    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()>;
    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()>;
    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()>;
    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()>;

    /// Properties matching `filter`, by id.
    async fn properties(&self, filter: &PropertyFilter) -> StoreResult<Vec<Property>>;
    async fn property(&self, id: &str) -> StoreResult<Option<Property>>;
    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>>;
    /// The owner whose WhatsApp this is.
    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>>;
    /// The owners with a WhatsApp number, by id (who is recognised as an owner).
    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>>;
    /// The agency's staff, by id.
    async fn staff(&self) -> StoreResult<Vec<StaffMember>>;

    /// A property's slots starting in `[from, to)`, by start time — claimed or not.
    async fn slots(
        &self,
        property_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Slot>>;
    async fn slot(&self, id: &str) -> StoreResult<Option<Slot>>;
    /// Which of `slot_ids` are taken.
    async fn claimed_slots(&self, slot_ids: &[String]) -> StoreResult<HashSet<String>>;
    /// Takes `slot_id` for `appointment_id`: `false` when it is already taken. Atomic: of two
    /// customers racing for a slot, exactly one gets it.
    async fn claim_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<bool>;
    /// Frees a slot, only if `appointment_id` holds it.
    async fn release_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<()>;

    /// Inserts or replaces an appointment by id.
    async fn save_appointment(&self, appointment: &Appointment) -> StoreResult<()>;
    async fn appointment(&self, id: &str) -> StoreResult<Option<Appointment>>;
    /// A customer's appointments, by start time.
    async fn appointments_of(&self, wa_id: &WaId) -> StoreResult<Vec<Appointment>>;
    /// A property's appointments, by start (for the agency's staff).
    async fn appointments_for(&self, property_id: &str) -> StoreResult<Vec<Appointment>>;
    /// Booked appointments starting in `[from, to)`, by start time (for reminders).
    async fn booked_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>>;
    /// Claims the reminder of an appointment: `true` for exactly one caller, ever.
    async fn claim_reminder(&self, appointment_id: &str, at: DateTime<Utc>) -> StoreResult<bool>;

    /// A customer's visits, newest first.
    async fn visits_of(&self, wa_id: &WaId) -> StoreResult<Vec<Visit>>;
    async fn visits_to(&self, property_id: &str) -> StoreResult<Vec<Visit>>;

    /// A customer's offers, newest first.
    async fn offers_of(&self, wa_id: &WaId) -> StoreResult<Vec<Offer>>;
    async fn offers_for(&self, property_id: &str) -> StoreResult<Vec<Offer>>;

    /// Inserts a callback request; `false` when one with its id is there already (the same
    /// request written again by a step replayed after a crash), which is left as it is.
    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool>;
    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()>;
    /// Newest first.
    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>>;
    /// Newest first.
    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>>;

    /// Appointments and offers created at or after `since`, oldest first (exports).
    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>>;
    async fn offers_created_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Offer>>;

    /// Inserts or replaces a saved search by id (cancelling one is saving it cancelled).
    async fn save_alert(&self, alert: &Alert) -> StoreResult<()>;
    /// A customer's saved searches, cancelled ones too, newest first.
    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>>;
    /// Every saved search not cancelled, by id.
    async fn active_alerts(&self) -> StoreResult<Vec<Alert>>;
    /// Listings listed or made cheaper at or after `since`, by id.
    async fn properties_news_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Property>>;
    /// Claims the notice of `property_id` to `wa_id`: `true` for exactly one caller, ever, so a
    /// customer hears of a listing once however many saved searches match and instances run.
    async fn claim_alert_notice(
        &self,
        wa_id: &WaId,
        property_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::city_key;

    #[test]
    fn a_city_is_compared_without_case_accents_or_surrounding_spaces() {
        assert_eq!(city_key("Málaga"), "malaga");
        assert_eq!(city_key(" MÁLAGA "), city_key("malaga"));
        assert_eq!(
            city_key("L'Hospitalet de Llobregat"),
            "l'hospitalet de llobregat"
        );
        assert_eq!(city_key("A Coruña"), "a coruna");
        assert_ne!(city_key("Sevilla"), city_key("Valencia"));
    }
}
