//! `listing_requests` in MongoDB: [`ListingRequestStore`].

use async_trait::async_trait;
use bson::doc;

use super::MongoRealEstate;
use super::codec::{listing_request, listing_request_doc, newest_first};
use crate::realestate::model::ListingRequest;
use crate::realestate::store::ListingRequestStore;
use crate::store::StoreResult;

#[async_trait]
impl ListingRequestStore for MongoRealEstate {
    async fn save_listing_request(&self, request: &ListingRequest) -> StoreResult<()> {
        self.upsert_all("listing_requests", vec![listing_request_doc(request)?])
            .await
    }

    async fn listing_requests_for(&self, property_id: &str) -> StoreResult<Vec<ListingRequest>> {
        self.find_all(
            "listing_requests",
            doc! {"property_id": property_id},
            newest_first("created_at"),
            listing_request,
        )
        .await
    }
}
