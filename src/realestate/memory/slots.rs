//! `slots` and `slot_claims` in memory: [`SlotStore`].

use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRealEstate, by_start, upsert};
use crate::realestate::model::Slot;
use crate::realestate::store::SlotStore;
use crate::store::StoreResult;

#[async_trait]
impl SlotStore for MemoryRealEstate {
    async fn upsert_slots(&self, slots: &[Slot]) -> StoreResult<()> {
        upsert(&mut self.lock().slots, slots, |s| &s.id);
        Ok(())
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
}
