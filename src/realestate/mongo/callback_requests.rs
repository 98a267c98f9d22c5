//! `callback_requests` in MongoDB: [`CallbackRequestStore`].

use async_trait::async_trait;
use bson::doc;

use super::MongoRealEstate;
use super::codec::{callback_request, callback_request_doc, newest_first};
use crate::domain::WaId;
use crate::realestate::model::CallbackRequest;
use crate::realestate::store::CallbackRequestStore;
use crate::store::StoreResult;

#[async_trait]
impl CallbackRequestStore for MongoRealEstate {
    async fn insert_callback_request(&self, request: &CallbackRequest) -> StoreResult<bool> {
        self.insert_claim("callback_requests", callback_request_doc(request))
            .await
    }

    async fn callback_requests_of(&self, wa_id: &WaId) -> StoreResult<Vec<CallbackRequest>> {
        self.find_all(
            "callback_requests",
            doc! {"wa_id": wa_id.as_str()},
            newest_first("created_at"),
            callback_request,
        )
        .await
    }
}
