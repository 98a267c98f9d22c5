//! `offers` in MongoDB: [`OfferStore`].

use async_trait::async_trait;
use bson::{Bson, doc};
use chrono::{DateTime, Utc};

use super::MongoRealEstate;
use super::codec::{date, newest_first, offer, offer_answer_doc, offer_doc, opt_str};
use crate::domain::WaId;
use crate::realestate::model::{Offer, OfferAnswer, OfferStatus};
use crate::realestate::store::{OfferStore, Settled};
use crate::store::pool::Find;
use crate::store::{Lane, StoreResult};

#[async_trait]
impl OfferStore for MongoRealEstate {
    async fn upsert_offers(&self, offers: &[Offer]) -> StoreResult<()> {
        let documents = offers.iter().map(offer_doc).collect::<StoreResult<_>>()?;
        self.upsert_all("offers", documents).await
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

    async fn offers_created_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Offer>> {
        self.find_all(
            "offers",
            doc! {"created_at": {"$gte": date(since)}},
            doc! {"created_at": 1, "_id": 1},
            offer,
        )
        .await
    }

    async fn offer(&self, id: &str) -> StoreResult<Option<Offer>> {
        self.find_one("offers", id, offer).await
    }

    async fn answer_offer(
        &self,
        id: &str,
        from: OfferStatus,
        status: OfferStatus,
        answer: &OfferAnswer,
    ) -> StoreResult<Option<Settled<Offer>>> {
        let mut set = offer_answer_doc(answer)?;
        set.insert("status", status.as_str());
        // Only from `from`: the first answer wins, and the others read it.
        let changed = self
            .pool
            .update_one(
                Lane::Work,
                "offers",
                doc! {"_id": id, "status": from.as_str()},
                doc! {"$set": set},
            )
            .await?
            .modified_count
            == 1;
        let found = self.offer(id).await?;
        Ok(found.map(|o| {
            if changed {
                Settled::Now(o)
            } else {
                Settled::Already(o)
            }
        }))
    }

    async fn offer_notices_due(&self, limit: usize) -> StoreResult<Vec<Offer>> {
        self.find_some(
            "offers",
            doc! {"answer_notice": {"$type": "string"}},
            Find::sorted(doc! {"created_at": 1, "_id": 1}).limit(limit),
            offer,
        )
        .await
    }

    async fn offer_notice(&self, id: &str, notice: &str, set: bool) -> StoreResult<()> {
        let (filter, value) = if set {
            (doc! {"_id": id}, Bson::String(notice.to_owned()))
        } else {
            (doc! {"_id": id, "answer_notice": notice}, Bson::Null)
        };
        self.pool
            .update_one(
                Lane::Work,
                "offers",
                filter,
                doc! {"$set": {"answer_notice": value}},
            )
            .await?;
        Ok(())
    }

    async fn await_counter(&self, id: &str, wa_id: Option<&WaId>) -> StoreResult<()> {
        self.pool
            .update_one(
                Lane::Work,
                "offers",
                doc! {"_id": id},
                doc! {"$set": {"awaiting_counter_from": opt_str(wa_id.map(WaId::as_str))}},
            )
            .await?;
        Ok(())
    }

    async fn counter_awaited_from(&self, wa_id: &WaId) -> StoreResult<Option<Offer>> {
        Ok(self
            .find_some(
                "offers",
                doc! {
                    "status": OfferStatus::Submitted.as_str(),
                    "awaiting_counter_from": wa_id.as_str(),
                },
                Find::sorted(newest_first("created_at")).limit(1),
                offer,
            )
            .await?
            .into_iter()
            .next())
    }
}
