//! `slots` and `slot_claims` in MongoDB: [`SlotStore`].

use std::collections::HashSet;

use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use super::MongoRealEstate;
use super::codec::{by_start, date, slot, slot_doc};
use crate::realestate::model::Slot;
use crate::realestate::store::SlotStore;
use crate::store::pool::Find;
use crate::store::{Lane, StoreResult};

#[async_trait]
impl SlotStore for MongoRealEstate {
    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()> {
        self.upsert_all("slots", slots.iter().map(slot_doc).collect())
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
}
