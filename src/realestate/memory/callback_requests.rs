//! `callback_requests` in memory: [`CallbackRequestStore`].

use async_trait::async_trait;

use super::{MemoryRealEstate, newest_first};
use crate::domain::WaId;
use crate::realestate::model::CallbackRequest;
use crate::realestate::store::CallbackRequestStore;
use crate::store::StoreResult;

#[async_trait]
impl CallbackRequestStore for MemoryRealEstate {
    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool> {
        let mut inner = self.lock();
        match inner.callback_requests.entry(request.id.clone()) {
            std::collections::btree_map::Entry::Occupied(_) => Ok(false),
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(request.clone());
                Ok(true)
            }
        }
    }

    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>> {
        let requests = self
            .lock()
            .callback_requests
            .values()
            .filter(|r| r.wa_id == *wa_id)
            .cloned()
            .collect();
        Ok(newest_first(requests, |r| r.created_at, |r| &r.id))
    }
}
