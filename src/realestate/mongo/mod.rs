//! The business's data in MongoDB (FerretDB in tests), one collection per record type:
//! `properties`, `owners`, `staff`, `slots`, `appointments`, `visits`, `offers`, plus the two claim
//! collections `slot_claims` and `reminders`.
//!
//! Documents are written and read by hand rather than through serde so that they read well in
//! mongosh: ids are string `_id`s (`P-1001`, `O-07`…), times are BSON dates, enums their
//! snake_case names, a property's position a GeoJSON point under `location`. Reading is
//! forgiving where operators may have edited a listing by hand — free text and lists may be
//! missing — and a document that cannot be read is skipped in listings (with a warning), so one
//! bad edit does not break every search.
//!
//! The only atomic primitive used is the insert of a unique `_id`: FerretDB's conditional updates
//! and findAndModify are not atomic, so a slot or a reminder is claimed by inserting a document
//! keyed by it, and a duplicate key means someone else got there first. Like the conversation
//! store, every call goes through the process's [`MongoPool`] (its gate, its timeouts), so a
//! stalled database answers [`StoreError::Unavailable`] rather than hanging.

mod codec;

use crate::realestate::mongo::codec::{
    alert, alert_doc, appointment, appointment_doc, by_start, callback_request,
    callback_request_doc, date, listing_request, listing_request_doc, newest_first, offer,
    offer_doc, owner, owner_doc, property, property_doc, slot, slot_doc, staff_doc, staff_member,
    visit, visit_doc,
};
use std::collections::HashSet;

use async_trait::async_trait;
use bson::{Bson, Document, doc};
use chrono::{DateTime, Utc};
use futures::{StreamExt as _, TryStreamExt as _};
use mongodb::IndexModel;

use crate::realestate::model::{
    Alert, Appointment, AppointmentStatus, CallbackRequest, ListingRequest, ListingStatus, Offer,
    Owner, Property, Slot, StaffMember, Visit,
};

use crate::domain::WaId;
use crate::realestate::store::{PropertyFilter, RealEstateStore};
use crate::store::pool::Find;
use crate::store::{Lane, MongoPool, StoreResult};

/// Upserts of one batch in flight at once: loading a few thousand slots takes seconds, not
/// minutes, without flooding the connection pool.
const UPSERT_CONCURRENCY: usize = 8;

#[derive(Clone)]
pub struct MongoRealEstate {
    pool: MongoPool,
}

impl MongoRealEstate {
    /// Uses `pool` as it is: the client connects lazily, so this never waits for the server.
    pub fn new(pool: MongoPool) -> Self {
        Self { pool }
    }

    /// Creates the indexes the queries rely on. Idempotent; run at start-up.
    pub async fn ensure_indexes(&self) -> StoreResult<()> {
        let indexes: [(&str, Document); 17] = [
            ("slots", doc! {"property_id": 1, "starts_at": 1}),
            ("appointments", doc! {"wa_id": 1, "starts_at": 1}),
            ("appointments", doc! {"property_id": 1, "starts_at": 1}),
            ("appointments", doc! {"status": 1, "starts_at": 1}),
            ("visits", doc! {"wa_id": 1}),
            ("visits", doc! {"property_id": 1}),
            ("offers", doc! {"wa_id": 1}),
            ("offers", doc! {"property_id": 1}),
            ("properties", doc! {"owner_id": 1}),
            ("owners", doc! {"wa_id": 1}),
            ("staff", doc! {"wa_id": 1}),
            ("callback_requests", doc! {"wa_id": 1}),
            ("listing_requests", doc! {"property_id": 1}),
            ("alerts", doc! {"wa_id": 1}),
            ("alerts", doc! {"cancelled_at": 1}),
            ("properties", doc! {"listed_at": 1}),
            ("properties", doc! {"price_dropped_at": 1}),
        ];
        for (collection, keys) in indexes {
            let model = IndexModel::builder().keys(keys).build();
            let collection = collection.to_owned();
            self.pool
                .run(Lane::Work, move |db| async move {
                    db.collection::<Document>(&collection)
                        .create_index(model)
                        .await
                })
                .await?;
        }
        Ok(())
    }

    /// Inserts or replaces each document by `_id`; of two with one `_id` in a batch, the later
    /// wins, as in memory.
    async fn upsert_all(&self, collection: &str, documents: Vec<Document>) -> StoreResult<()> {
        let mut seen = HashSet::new();
        let latest: Vec<Document> = documents
            .into_iter()
            .rev()
            .filter(|d| seen.insert(d.get("_id").cloned().unwrap_or(Bson::Null).to_string()))
            .collect();
        futures::stream::iter(latest)
            .map(|document| replace_by_id(&self.pool, collection, document))
            .buffer_unordered(UPSERT_CONCURRENCY)
            .try_collect()
            .await
    }

    async fn find_one<T>(
        &self,
        collection: &str,
        id: &str,
        read: fn(&Document) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        self.pool
            .find_one(Lane::Work, collection, doc! {"_id": id}, Find::default())
            .await?
            .as_ref()
            .map(read)
            .transpose()
    }

    /// The documents of `collection` matching `filter` in `sort` order, read with `read`;
    /// documents it cannot read are skipped with a warning.
    async fn find_all<T>(
        &self,
        collection: &str,
        filter: Document,
        sort: Document,
        read: fn(&Document) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let documents = self
            .pool
            .find(Lane::Work, collection, filter, Find::sorted(sort))
            .await?;
        Ok(documents
            .iter()
            .filter_map(|document| match read(document) {
                Ok(record) => Some(record),
                Err(error) => {
                    tracing::warn!(
                        collection,
                        id = %document.get("_id").cloned().unwrap_or(Bson::Null),
                        error = %error,
                        "skipping a document that cannot be read",
                    );
                    None
                }
            })
            .collect())
    }

    /// Inserts `claim`: `false` when a document with its `_id` already exists.
    async fn insert_claim(&self, collection: &str, claim: Document) -> StoreResult<bool> {
        self.pool.insert_unique(Lane::Work, collection, claim).await
    }
}

/// Replaces the document with `document`'s `_id`, inserting it when there is none. Two
/// concurrent upserts of one `_id` may both try to insert and the loser fail with a duplicate
/// key (MongoDB retries some of these itself, FerretDB does not); once retried, it replaces the
/// document the winner created.
async fn replace_by_id(pool: &MongoPool, collection: &str, document: Document) -> StoreResult<()> {
    let filter = doc! {"_id": document.get("_id").cloned().unwrap_or(Bson::Null)};
    for attempt in 0..2 {
        let (name, filter, document) = (collection.to_owned(), filter.clone(), document.clone());
        let result = pool
            .run_raw(Lane::Work, move |db| async move {
                db.collection::<Document>(&name)
                    .replace_one(filter, document)
                    .upsert(true)
                    .await
            })
            .await?;
        match result {
            Err(error) if attempt == 0 && crate::store::pool::is_duplicate_key(&error) => continue,
            other => return other.map(drop).map_err(crate::store::pool::classify),
        }
    }
    unreachable!("the second attempt returns")
}

#[async_trait]
impl RealEstateStore for MongoRealEstate {
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()> {
        self.upsert_all("owners", owners.iter().map(owner_doc).collect())
            .await
    }

    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()> {
        self.upsert_all("staff", staff.iter().map(staff_doc).collect())
            .await
    }

    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()> {
        let documents = properties
            .iter()
            .map(property_doc)
            .collect::<StoreResult<_>>()?;
        self.upsert_all("properties", documents).await
    }

    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()> {
        self.upsert_all("slots", slots.iter().map(slot_doc).collect())
            .await
    }

    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()> {
        self.upsert_all("visits", visits.iter().map(visit_doc).collect())
            .await
    }

    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()> {
        let documents = offers.iter().map(offer_doc).collect::<StoreResult<_>>()?;
        self.upsert_all("offers", documents).await
    }

    async fn properties(&self, filter: &PropertyFilter) -> StoreResult<Vec<Property>> {
        // The exact-match fields go to the database; the city, which must match without case or
        // accents, is compared here (a few hundred listings at most).
        let mut query = doc! {};
        if let Some(operation) = filter.operation {
            query.insert("operation", operation.as_str());
        }
        if filter.available_only {
            query.insert("status", ListingStatus::Available.as_str());
        }
        if let Some(owner_id) = &filter.owner_id {
            query.insert("owner_id", owner_id);
        }
        let properties = self
            .find_all("properties", query, doc! {"_id": 1}, property)
            .await?;
        Ok(properties
            .into_iter()
            .filter(|p| filter.admits(p))
            .collect())
    }

    async fn property(&self, id: &str) -> StoreResult<Option<Property>> {
        self.find_one("properties", id, property).await
    }

    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>> {
        self.find_one("owners", id, owner).await
    }

    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>> {
        let owners = self
            .find_all(
                "owners",
                doc! {"wa_id": wa_id.as_str()},
                doc! {"_id": 1},
                owner,
            )
            .await?;
        Ok(owners.into_iter().next())
    }

    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>> {
        let owners = self
            .find_all(
                "owners",
                doc! {"wa_id": {"$ne": null}},
                doc! {"_id": 1},
                owner,
            )
            .await?;
        Ok(owners.into_iter().filter(|o| o.wa_id.is_some()).collect())
    }

    async fn staff(&self) -> StoreResult<Vec<StaffMember>> {
        self.find_all("staff", doc! {}, doc! {"_id": 1}, staff_member)
            .await
    }

    async fn slots(
        &self,
        property_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Slot>> {
        self.find_all(
            "slots",
            doc! {"property_id": property_id, "starts_at": {"$gte": date(from), "$lt": date(to)}},
            by_start(),
            slot,
        )
        .await
    }

    async fn slot(&self, id: &str) -> StoreResult<Option<Slot>> {
        self.find_one("slots", id, slot).await
    }

    async fn claimed_slots(&self, slot_ids: &[String]) -> StoreResult<HashSet<String>> {
        if slot_ids.is_empty() {
            return Ok(HashSet::new());
        }
        let claims = self
            .pool
            .find(
                Lane::Work,
                "slot_claims",
                doc! {"_id": {"$in": slot_ids}},
                Find::default().projection(doc! {"_id": 1}),
            )
            .await?;
        Ok(claims
            .iter()
            .filter_map(|claim| claim.get_str("_id").ok().map(str::to_owned))
            .collect())
    }

    async fn claim_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<bool> {
        let claim = doc! {"_id": slot_id, "appointment_id": appointment_id, "at": date(Utc::now())};
        if self.insert_claim("slot_claims", claim).await? {
            return Ok(true);
        }
        // Taken — possibly by this very appointment, when an earlier attempt landed but its
        // answer was lost: a retry must not turn the customer's own booking into a conflict.
        // The holder of a claim never changes (it is only ever deleted), so reading it is safe.
        let holder = self
            .pool
            .find_one(
                Lane::Work,
                "slot_claims",
                doc! {"_id": slot_id},
                Find::default(),
            )
            .await?;
        Ok(holder.is_some_and(|claim| {
            claim
                .get_str("appointment_id")
                .is_ok_and(|a| a == appointment_id)
        }))
    }

    async fn release_slot(&self, slot_id: &str, appointment_id: &str) -> StoreResult<()> {
        self.pool
            .delete_many(
                Lane::Work,
                "slot_claims",
                doc! {"_id": slot_id, "appointment_id": appointment_id},
            )
            .await
            .map(drop)
    }

    async fn save_appointment(&self, appointment: &Appointment) -> StoreResult<()> {
        replace_by_id(&self.pool, "appointments", appointment_doc(appointment)).await
    }

    async fn appointment(&self, id: &str) -> StoreResult<Option<Appointment>> {
        self.find_one("appointments", id, appointment).await
    }

    async fn appointments_of(&self, wa_id: &WaId) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"wa_id": wa_id.as_str()},
            by_start(),
            appointment,
        )
        .await
    }

    async fn appointments_for(&self, property_id: &str) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"property_id": property_id},
            by_start(),
            appointment,
        )
        .await
    }

    async fn booked_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {
                "status": AppointmentStatus::Booked.as_str(),
                "starts_at": {"$gte": date(from), "$lt": date(to)},
            },
            by_start(),
            appointment,
        )
        .await
    }

    async fn claim_reminder(&self, appointment_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let claim = doc! {"_id": appointment_id, "at": date(at)};
        if !self.insert_claim("reminders", claim).await? {
            return Ok(false);
        }
        // For operators reading the appointment; `reminders` is what decides. The claim is
        // taken either way, so a failure here must not make the caller think it is not theirs.
        let noted = self
            .pool
            .update_one(
                Lane::Work,
                "appointments",
                doc! {"_id": appointment_id},
                doc! {"$set": {"reminder_sent_at": date(at)}},
            )
            .await;
        if let Err(error) = noted {
            tracing::warn!(appointment_id, error = %error, "reminder_sent_at not recorded");
        }
        Ok(true)
    }

    async fn visits_of(&self, wa_id: &WaId) -> StoreResult<Vec<Visit>> {
        self.find_all(
            "visits",
            doc! {"wa_id": wa_id.as_str()},
            newest_first("visited_at"),
            visit,
        )
        .await
    }

    async fn visits_to(&self, property_id: &str) -> StoreResult<Vec<Visit>> {
        self.find_all(
            "visits",
            doc! {"property_id": property_id},
            newest_first("visited_at"),
            visit,
        )
        .await
    }

    async fn offers_of(&self, wa_id: &WaId) -> StoreResult<Vec<Offer>> {
        self.find_all(
            "offers",
            doc! {"wa_id": wa_id.as_str()},
            newest_first("created_at"),
            offer,
        )
        .await
    }

    async fn offers_for(&self, property_id: &str) -> StoreResult<Vec<Offer>> {
        self.find_all(
            "offers",
            doc! {"property_id": property_id},
            newest_first("created_at"),
            offer,
        )
        .await
    }

    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool> {
        self.insert_claim("callback_requests", callback_request_doc(request))
            .await
    }

    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()> {
        self.upsert_all("listing_requests", vec![listing_request_doc(request)?])
            .await
    }

    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>> {
        self.find_all(
            "listing_requests",
            doc! {"property_id": property_id},
            newest_first("created_at"),
            listing_request,
        )
        .await
    }

    async fn appointments_created_since(
        &self,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<Appointment>> {
        self.find_all(
            "appointments",
            doc! {"created_at": {"$gte": date(since)}},
            doc! {"created_at": 1, "_id": 1},
            appointment,
        )
        .await
    }

    async fn offers_created_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Offer>> {
        self.find_all(
            "offers",
            doc! {"created_at": {"$gte": date(since)}},
            doc! {"created_at": 1, "_id": 1},
            offer,
        )
        .await
    }

    async fn save_alert(&self, alert: &Alert) -> StoreResult<()> {
        self.upsert_all("alerts", vec![alert_doc(alert)?]).await
    }

    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>> {
        self.find_all(
            "alerts",
            doc! {"wa_id": wa_id.as_str()},
            newest_first("created_at"),
            alert,
        )
        .await
    }

    async fn active_alerts(&self) -> StoreResult<Vec<Alert>> {
        self.find_all(
            "alerts",
            doc! {"cancelled_at": null},
            doc! {"_id": 1},
            alert,
        )
        .await
    }

    async fn properties_news_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Property>> {
        self.find_all(
            "properties",
            doc! {"$or": [
                {"listed_at": {"$gte": date(since)}},
                {"price_dropped_at": {"$gte": date(since)}},
            ]},
            doc! {"_id": 1},
            property,
        )
        .await
    }

    async fn claim_alert_notice(
        &self,
        wa_id: &WaId,
        property_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let claim = doc! {
            "_id": format!("{}:{property_id}", wa_id.as_str()),
            "wa_id": wa_id.as_str(),
            "property_id": property_id,
            "at": date(at),
        };
        self.insert_claim("alert_notices", claim).await
    }

    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>> {
        self.find_all(
            "callback_requests",
            doc! {"wa_id": wa_id.as_str()},
            newest_first("created_at"),
            callback_request,
        )
        .await
    }
}
