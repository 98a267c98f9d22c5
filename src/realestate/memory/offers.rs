//! `offers` in memory: [`OfferStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRealEstate, newest_first, upsert};
use crate::domain::WaId;
use crate::realestate::model::Offer;
use crate::realestate::store::OfferStore;
use crate::store::StoreResult;

#[async_trait]
impl OfferStore for MemoryRealEstate {
    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()> {
        upsert(&mut self.lock().offers, offers, |o| &o.id);
        Ok(())
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
}
