//! `staff` in MongoDB: [`StaffStore`].

use async_trait::async_trait;
use bson::doc;

use super::MongoRealEstate;
use super::codec::{staff_doc, staff_member};
use crate::realestate::model::StaffMember;
use crate::realestate::store::StaffStore;
use crate::store::StoreResult;

#[async_trait]
impl StaffStore for MongoRealEstate {
    async fn upsert_staff(&self, staff: &[StaffMember]) -> StoreResult<()> {
        self.upsert_all("staff", staff.iter().map(staff_doc).collect())
            .await
    }

    async fn staff(&self) -> StoreResult<Vec<StaffMember>> {
        self.find_all("staff", doc! {}, doc! {"_id": 1}, staff_member)
            .await
    }
}
