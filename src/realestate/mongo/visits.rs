//! `visits` in MongoDB: [`VisitStore`].

use async_trait::async_trait;
use bson::doc;

use super::MongoRealEstate;
use super::codec::{newest_first, visit, visit_doc};
use crate::domain::WaId;
use crate::realestate::model::Visit;
use crate::realestate::store::VisitStore;
use crate::store::StoreResult;

#[async_trait]
impl VisitStore for MongoRealEstate {
    async fn upsert_visits(&self, visits: &[Visit]) -> StoreResult<()> {
        self.upsert_all("visits", visits.iter().map(visit_doc).collect())
            .await
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
}
