//! `offers` in MongoDB: [`OfferStore`].

use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use super::MongoRealEstate;
use super::codec::{date, newest_first, offer, offer_doc};
use crate::domain::WaId;
use crate::realestate::model::Offer;
use crate::realestate::store::OfferStore;
use crate::store::StoreResult;

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
}
