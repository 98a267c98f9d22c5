//! `owners` in memory: [`OwnerStore`].

use async_trait::async_trait;

use super::{MemoryRealEstate, upsert};
use crate::domain::WaId;
use crate::realestate::model::Owner;
use crate::realestate::store::OwnerStore;
use crate::store::StoreResult;

#[async_trait]
impl OwnerStore for MemoryRealEstate {
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()> {
        upsert(&mut self.lock().owners, owners, |o| &o.id);
        Ok(())
    }

    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>> {
        Ok(self.lock().owners.get(id).cloned())
    }

    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>> {
        Ok(self
            .lock()
            .owners
            .values()
            .find(|o| o.wa_id.as_ref() == Some(wa_id))
            .cloned())
    }

    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>> {
        Ok(self
            .lock()
            .owners
            .values()
            .filter(|o| o.wa_id.is_some())
            .cloned()
            .collect())
    }

    async fn owners(&self) -> StoreResult<Vec<Owner>> {
        Ok(self.lock().owners.values().cloned().collect())
    }
}
