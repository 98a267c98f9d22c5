//! `staff` in memory: [`StaffStore`].

use async_trait::async_trait;

use super::{MemoryRealEstate, upsert};
use crate::realestate::model::StaffMember;
use crate::realestate::store::StaffStore;
use crate::store::StoreResult;

#[async_trait]
impl StaffStore for MemoryRealEstate {
    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()> {
        upsert(&mut self.lock().staff, staff, |s| &s.id);
        Ok(())
    }

    async fn staff(&self) -> StoreResult<Vec<StaffMember>> {
        Ok(self.lock().staff.values().cloned().collect())
    }
}
