//! `alerts` and `alert_notices` in MongoDB: [`AlertStore`].

use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use super::MongoRealEstate;
use super::codec::{alert, alert_doc, date, newest_first};
use crate::domain::WaId;
use crate::realestate::model::Alert;
use crate::realestate::store::AlertStore;
use crate::store::StoreResult;

#[async_trait]
impl AlertStore for MongoRealEstate {
    async fn save_alert(&self, alert: &Alert) -> StoreResult<()> {
        self.upsert_all("alerts", vec![alert_doc(alert)?]).await
    }

    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>> {
        self.find_all(
            "alerts",
            doc! {"wa_id": wa_id.as_str()},
            newest_first("created_at"),
            alert,
        )
        .await
    }

    async fn active_alerts(&self) -> StoreResult<Vec<Alert>> {
        self.find_all(
            "alerts",
            doc! {"cancelled_at": null},
            doc! {"_id": 1},
            alert,
        )
        .await
    }

    async fn claim_alert_notice(
        &self,
        wa_id: &WaId,
        property_id: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let claim = doc! {
            "_id": format!("{}:{property_id}", wa_id.as_str()),
            "wa_id": wa_id.as_str(),
            "property_id": property_id,
            "at": date(at),
        };
        self.insert_claim("alert_notices", claim).await
    }
}
