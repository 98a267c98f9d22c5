//! `offers` in memory: [`OfferStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRealEstate, newest_first, upsert};
use crate::domain::WaId;
use crate::realestate::model::{Offer, OfferAnswer, OfferStatus};
use crate::realestate::store::{OfferStore, Settled};
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

    async fn offer(&self, id: &str) -> StoreResult<Option<Offer>> {
        Ok(self.lock().offers.get(id).cloned())
    }

    async fn answer_offer(
        &self,
        id: &str,
        from: OfferStatus,
        status: OfferStatus,
        answer: &OfferAnswer,
    ) -> StoreResult<Option<Settled<Offer>>> {
        let mut inner = self.lock();
        let Some(offer) = inner.offers.get_mut(id) else {
            return Ok(None);
        };
        if offer.status != from {
            return Ok(Some(Settled::Already(offer.clone())));
        }
        offer.status = status;
        offer.answer = answer.clone();
        Ok(Some(Settled::Now(offer.clone())))
    }

    async fn offer_notices_due(&self, limit: usize) -> StoreResult<Vec<Offer>> {
        let mut due: Vec<Offer> = self
            .lock()
            .offers
            .values()
            .filter(|o| o.answer.notice.is_some())
            .cloned()
            .collect();
        due.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        due.truncate(limit);
        Ok(due)
    }

    async fn offer_notice(&self, id: &str, notice: &str, set: bool) -> StoreResult<()> {
        if let Some(offer) = self.lock().offers.get_mut(id) {
            if set {
                offer.answer.notice = Some(notice.to_owned());
            } else if offer.answer.notice.as_deref() == Some(notice) {
                offer.answer.notice = None;
            }
        }
        Ok(())
    }

    async fn await_counter(&self, id: &str, wa_id: Option<&WaId>) -> StoreResult<()> {
        if let Some(offer) = self.lock().offers.get_mut(id) {
            offer.answer.awaiting_counter_from = wa_id.map(|w| w.as_str().to_owned());
        }
        Ok(())
    }

    async fn counter_awaited_from(&self, wa_id: &WaId) -> StoreResult<Option<Offer>> {
        let offers = self
            .lock()
            .offers
            .values()
            .filter(|o| {
                o.status == OfferStatus::Submitted
                    && o.answer.awaiting_counter_from.as_deref() == Some(wa_id.as_str())
            })
            .cloned()
            .collect();
        Ok(newest_first(offers, |o| o.created_at, |o| &o.id)
            .into_iter()
            .next())
    }
}
