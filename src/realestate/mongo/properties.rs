//! `properties` in MongoDB: [`PropertyStore`].

use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use super::MongoRealEstate;
use super::codec::{date, property, property_doc};
use crate::realestate::model::{ListingStatus, Property};
use crate::realestate::store::{PropertyFilter, PropertyStore};
use crate::store::StoreResult;

#[async_trait]
impl PropertyStore for MongoRealEstate {
    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()> {
        let documents = properties
            .iter()
            .map(property_doc)
            .collect::<StoreResult<_>>()?;
        self.upsert_all("properties", documents).await
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
}
