//! `calendars` in memory: [`CalendarStore`].

use async_trait::async_trait;

use super::MemoryRealEstate;
use crate::realestate::store::{CalendarCopy, CalendarStore};
use crate::store::StoreResult;

#[async_trait]
impl CalendarStore for MemoryRealEstate {
    async fn save_calendar(&self, copy: &CalendarCopy) -> StoreResult<()> {
        self.lock()
            .calendars
            .insert(copy.staff_id.clone(), copy.clone());
        Ok(())
    }

    async fn calendar(&self, staff_id: &str) -> StoreResult<Option<CalendarCopy>> {
        Ok(self.lock().calendars.get(staff_id).cloned())
    }

    async fn calendars(&self) -> StoreResult<Vec<CalendarCopy>> {
        Ok(self.lock().calendars.values().cloned().collect())
    }
}
