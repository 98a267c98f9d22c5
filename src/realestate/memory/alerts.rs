//! `alerts` and `alert_notices` in memory: [`AlertStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRealEstate, newest_first};
use crate::domain::WaId;
use crate::realestate::model::Alert;
use crate::realestate::store::AlertStore;
use crate::store::StoreResult;

#[async_trait]
impl AlertStore for MemoryRealEstate {
    async fn save_alert(&self, alert: &Alert) -> StoreResult<()> {
        self.lock().alerts.insert(alert.id.clone(), alert.clone());
        Ok(())
    }

    async fn alerts_of(&self, wa_id: &WaId) -> StoreResult<Vec<Alert>> {
        let alerts = self
            .lock()
            .alerts
            .values()
            .filter(|a| a.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(alerts, |a| a.created_at, |a| &a.id))
    }

    async fn active_alerts(&self) -> StoreResult<Vec<Alert>> {
        Ok(self
            .lock()
            .alerts
            .values()
            .filter(|a| a.cancelled_at.is_none())
            .cloned()
            .collect())
    }

    async fn claim_alert_notice(
        &self,
        wa_id: &WaId,
        property_id: &str,
        _at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(self
            .lock()
            .alert_notices
            .insert((wa_id.clone(), property_id.to_owned())))
    }
}
