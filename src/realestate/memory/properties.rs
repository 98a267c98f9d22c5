//! `properties` in memory: [`PropertyStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRealEstate, upsert};
use crate::realestate::model::Property;
use crate::realestate::store::{PropertyFilter, PropertyStore};
use crate::store::StoreResult;

#[async_trait]
impl PropertyStore for MemoryRealEstate {
    async fn upsert_properties(&self, properties: &[Property]) -> StoreResult<()> {
        upsert(&mut self.lock().properties, properties, |p| &p.id);
        Ok(())
    }

    async fn properties(&self, filter: &PropertyFilter) -> StoreResult<Vec<Property>> {
        Ok(self
            .lock()
            .properties
            .values()
            .filter(|p| filter.admits(p))
            .cloned()
            .collect())
    }

    async fn property(&self, id: &str) -> StoreResult<Option<Property>> {
        Ok(self.lock().properties.get(id).cloned())
    }

    async fn properties_news_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<Property>> {
        Ok(self
            .lock()
            .properties
            .values()
            .filter(|p| p.listed_at >= since || p.price_dropped_at.is_some_and(|at| at >= since))
            .cloned()
            .collect())
    }
}
