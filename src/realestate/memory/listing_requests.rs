//! `listing_requests` in memory: [`ListingRequestStore`].

use async_trait::async_trait;

use super::{MemoryRealEstate, newest_first};
use crate::realestate::model::ListingRequest;
use crate::realestate::store::ListingRequestStore;
use crate::store::StoreResult;

#[async_trait]
impl ListingRequestStore for MemoryRealEstate {
    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()> {
        self.lock()
            .listing_requests
            .insert(request.id.clone(), request.clone());
        Ok(())
    }

    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>> {
        let requests = self
            .lock()
            .listing_requests
            .values()
            .filter(|r| r.property_id == property_id)
            .cloned()
            .collect();
        Ok(newest_first(requests, |r| r.created_at, |r| &r.id))
    }
}
