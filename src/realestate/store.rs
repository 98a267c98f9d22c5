//! Where the business's data lives: one trait per collection, two implementations laid out like
//! the conversation store's, a file per collection
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
    Alert, Appointment, AppointmentStatus, CallbackRequest, ListingRequest, ListingStatus, Offer,
    OfferAnswer, OfferStatus, Operation, Owner, Property, Slot, StaffMember, Visit,
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

/// The business's data: the sum of one trait per collection, so a caller names the part it
/// uses and a test can stand in for one collection.
pub trait RealEstateStore:
    PropertyStore
    + OwnerStore
    + StaffStore
    + SlotStore
    + AppointmentStore
    + VisitStore
    + OfferStore
    + CallbackRequestStore
    + ListingRequestStore
    + AlertStore
    + FeedImportStore
    + CalendarStore
{
}

impl<
    T: PropertyStore
        + OwnerStore
        + StaffStore
        + SlotStore
        + AppointmentStore
        + VisitStore
        + OfferStore
        + CallbackRequestStore
        + ListingRequestStore
        + AlertStore
        + FeedImportStore
        + CalendarStore,
> RealEstateStore for T
{
}

/// `properties`: the listings, and the news of them that saved searches wait for.
#[async_trait]
pub trait PropertyStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()>;

    /// Properties matching `filter`, by id.
    async fn properties(&self, filter: &PropertyFilter) -> StoreResult<Vec<Property>>;

    async fn property(&self, id: &str) -> StoreResult<Option<Property>>;

    /// Listings listed or made cheaper at or after `since`, by id.
    async fn properties_news_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Property>>;
}

/// `owners`: who owns the listings, and who of them writes on WhatsApp.
#[async_trait]
pub trait OwnerStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()>;

    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>>;

    /// The owner whose WhatsApp this is.
    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>>;

    /// The owners with a WhatsApp number, by id (who is recognised as an owner).
    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>>;

    /// Every owner, by id (`zaguan owners list`).
    async fn owners(&self) -> StoreResult<Vec<Owner>>;
}

/// `staff`: the agency's people, told of handoffs.
#[async_trait]
pub trait StaffStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()>;

    /// The agency's staff, by id.
    async fn staff(&self) -> StoreResult<Vec<StaffMember>>;
}

/// `slots` and `slot_claims`: when a property can be visited, and which times are taken.
#[async_trait]
pub trait SlotStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()>;

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
}

/// `calendars`: the last good copy of each agent's own calendar (`staff.calendar_url`), as
/// busy times, and since when it cannot be fetched: slots are computed from it on every
/// instance, and it outlives a calendar server's outage and a restart.
#[async_trait]
pub trait CalendarStore: Send + Sync + 'static {
    /// Replaces the copy of `copy.staff_id`.
    async fn save_calendar(&self, copy: &CalendarCopy) -> StoreResult<()>;

    async fn calendar(&self, staff_id: &str) -> StoreResult<Option<CalendarCopy>>;

    /// Every copy, by staff id (the console's view of them).
    async fn calendars(&self) -> StoreResult<Vec<CalendarCopy>>;
}

/// An agent's calendar as last read.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CalendarCopy {
    pub staff_id: String,
    /// The address it was read from: a copy of another address is not theirs any more.
    pub url: String,
    /// Busy times from a day before the read to [`crate::realestate::calendar::AHEAD`] after.
    pub busy: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// When the busy times were read (`None`: never).
    pub read_at: Option<DateTime<Utc>>,
    /// Since when reading fails, and why (the busy times are the last good ones).
    pub failing_since: Option<DateTime<Utc>>,
    pub error: Option<String>,
}

/// `feed_imports`: the listings feed's scheduled imports, one record per round: the instance
/// that took it and how it ended (operators read the last ones in the console).
#[async_trait]
pub trait FeedImportStore: Send + Sync + 'static {
    /// Takes import `round` for `instance`: `true` for exactly one caller across instances.
    async fn claim_feed_import(
        &self,
        round: &str,
        instance: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Records how round `record.round` ended.
    async fn finish_feed_import(&self, record: &FeedImportRecord) -> StoreResult<()>;

    /// The latest rounds, newest first.
    async fn feed_imports(&self, limit: usize) -> StoreResult<Vec<FeedImportRecord>>;
}

/// One round of the listings feed's import.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FeedImportRecord {
    pub round: String,
    pub instance: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The report's one line («200 in the feed: 3 added, …»), when it imported.
    pub summary: Option<String>,
    /// Why it changed nothing, when it did not import.
    pub error: Option<String>,
}

/// `appointments` and `reminders`: the visits booked, and the reminders claimed for them.
#[async_trait]
pub trait AppointmentStore: Send + Sync + 'static {
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

    /// Appointments created at or after `since`, oldest first (exports).
    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>>;

    /// Appointments starting in `[from, to)` whatever their status, by start (the console's
    /// and the command line's lists).
    async fn appointments_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>>;

    /// Records what became of a booked visit (`done`, `no_show`, `cancelled`): for exactly
    /// one caller, whoever records first; the others get it as recorded. `None`: no such
    /// appointment.
    async fn settle_appointment(
        &self,
        id: &str,
        status: AppointmentStatus,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<Settled<Appointment>>>;

    /// Appointments with a notice waiting for their agent (`follow_up.notice`), oldest
    /// start first, at most `limit`.
    async fn notices_due(&self, limit: usize) -> StoreResult<Vec<Appointment>>;

    /// Clears the agent's notice once it is queued, unless a newer one took its place.
    async fn clear_notice(&self, id: &str, notice: &str) -> StoreResult<()>;

    /// Booked appointments that started before `before` and whose agent has not been asked
    /// how they went, oldest first, at most `limit`.
    async fn outcomes_unasked(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<Appointment>>;

    /// Claims the question to the agent about how it went: `true` for one caller, ever.
    async fn claim_outcome_question(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool>;
}

/// What a conditional change found: made now by this caller, or made before by another (the
/// record as it stands).
#[derive(Debug, Clone, PartialEq)]
pub enum Settled<T> {
    Now(T),
    Already(T),
}

impl<T> Settled<T> {
    pub fn record(&self) -> &T {
        match self {
            Settled::Now(t) | Settled::Already(t) => t,
        }
    }

    pub fn into_record(self) -> T {
        match self {
            Settled::Now(t) | Settled::Already(t) => t,
        }
    }

    pub fn is_now(&self) -> bool {
        matches!(self, Settled::Now(_))
    }
}

/// `visits`: the visits that took place.
#[async_trait]
pub trait VisitStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()>;

    /// A customer's visits, newest first.
    async fn visits_of(&self, wa_id: &WaId) -> StoreResult<Vec<Visit>>;

    async fn visits_to(&self, property_id: &str) -> StoreResult<Vec<Visit>>;
}

/// `offers`: what customers offered for a property.
#[async_trait]
pub trait OfferStore: Send + Sync + 'static {
    /// Inserts or replaces by id: loading the same data twice changes nothing.
    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()>;

    /// A customer's offers, newest first.
    async fn offers_of(&self, wa_id: &WaId) -> StoreResult<Vec<Offer>>;

    async fn offers_for(&self, property_id: &str) -> StoreResult<Vec<Offer>>;

    /// Offers created at or after `since`, oldest first (exports).
    async fn offers_created_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Offer>>;

    async fn offer(&self, id: &str) -> StoreResult<Option<Offer>>;

    /// Moves an offer from `from` to `status` with `answer`, for exactly one caller: an
    /// owner's answer to a submitted offer, a customer's to a counter-offer. `None`: no such
    /// offer.
    async fn answer_offer(
        &self,
        id: &str,
        from: OfferStatus,
        status: OfferStatus,
        answer: &OfferAnswer,
    ) -> StoreResult<Option<Settled<Offer>>>;

    /// Offers with a notice not queued yet (`answer.notice`), oldest first, at most `limit`.
    async fn offer_notices_due(&self, limit: usize) -> StoreResult<Vec<Offer>>;

    /// Sets the notice waiting on an offer, or clears `notice` once queued unless a newer
    /// one took its place (`set` false).
    async fn offer_notice(&self, id: &str, notice: &str, set: bool) -> StoreResult<()>;

    /// Marks the offer as waiting for `wa_id`'s counter-offer amount in their next message
    /// (`None`: no longer).
    async fn await_counter(&self, id: &str, wa_id: Option<&WaId>) -> StoreResult<()>;

    /// The open offer whose counter-offer amount `wa_id` was asked for, if any.
    async fn counter_awaited_from(&self, wa_id: &WaId) -> StoreResult<Option<Offer>>;
}

/// `callback_requests`: customers who asked to be called.
#[async_trait]
pub trait CallbackRequestStore: Send + Sync + 'static {
    /// Inserts a callback request; `false` when one with its id is there already (the same
    /// request written again by a step replayed after a crash), which is left as it is.
    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool>;

    /// Newest first.
    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>>;
}

/// `listing_requests`: owners' requests to change a listing.
#[async_trait]
pub trait ListingRequestStore: Send + Sync + 'static {
    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()>;

    /// Newest first.
    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>>;
}

/// `alerts` and `alert_notices`: saved searches, and the notices claimed for them.
#[async_trait]
pub trait AlertStore: Send + Sync + 'static {
    /// Inserts or replaces a saved search by id (cancelling one is saving it cancelled).
    async fn save_alert(&self, alert: &Alert) -> StoreResult<()>;

    /// A customer's saved searches, cancelled ones too, newest first.
    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>>;

    /// Every saved search not cancelled, by id.
    async fn active_alerts(&self) -> StoreResult<Vec<Alert>>;

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
