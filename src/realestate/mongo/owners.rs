//! `owners` in MongoDB: [`OwnerStore`].

use async_trait::async_trait;
use bson::doc;

use super::MongoRealEstate;
use super::codec::{owner, owner_doc};
use crate::domain::WaId;
use crate::realestate::model::Owner;
use crate::realestate::store::OwnerStore;
use crate::store::StoreResult;

#[async_trait]
impl OwnerStore for MongoRealEstate {
    async fn upsert_owners(&self, owners: &[Owner]) -> StoreResult<()> {
        self.upsert_all("owners", owners.iter().map(owner_doc).collect())
            .await
    }

    async fn owner(&self, id: &str) -> StoreResult<Option<Owner>> {
        self.find_one("owners", id, owner).await
    }

    async fn owner_by_wa_id(&self, wa_id: &WaId) -> StoreResult<Option<Owner>> {
        let owners = self
            .find_all(
                "owners",
                doc! {"wa_id": wa_id.as_str()},
                doc! {"_id": 1},
                owner,
            )
            .await?;
        Ok(owners.into_iter().next())
    }

    async fn owners_on_whatsapp(&self) -> StoreResult<Vec<Owner>> {
        let owners = self
            .find_all(
                "owners",
                doc! {"wa_id": {"$ne": null}},
                doc! {"_id": 1},
                owner,
            )
            .await?;
        Ok(owners.into_iter().filter(|o| o.wa_id.is_some()).collect())
    }

    async fn owners(&self) -> StoreResult<Vec<Owner>> {
        self.find_all("owners", doc! {}, doc! {"_id": 1}, owner)
            .await
    }
}
