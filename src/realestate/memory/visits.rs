//! `visits` in memory: [`VisitStore`].

use async_trait::async_trait;

use super::{MemoryRealEstate, newest_first, upsert};
use crate::domain::WaId;
use crate::realestate::model::Visit;
use crate::realestate::store::VisitStore;
use crate::store::StoreResult;

#[async_trait]
impl VisitStore for MemoryRealEstate {
    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()> {
        upsert(&mut self.lock().visits, visits, |v| &v.id);
        Ok(())
    }

    async fn visits_of(&self, wa_id: &WaId) -> StoreResult<Vec<Visit>> {
        let visits = self
            .lock()
            .visits
            .values()
            .filter(|v| v.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(visits, |v| v.visited_at, |v| &v.id))
    }

    async fn visits_to(&self, property_id: &str) -> StoreResult<Vec<Visit>> {
        let visits = self
            .lock()
            .visits
            .values()
            .filter(|v| v.property_id == property_id)
            .cloned()
            .collect();
        Ok(newest_first(visits, |v| v.visited_at, |v| &v.id))
    }
}
