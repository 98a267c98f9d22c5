//! The operations the stores run through the pool, each in its lane and under its limits.

use super::super::StoreResult;
use bson::Document;
use mongodb::results::UpdateResult;

use crate::store::pool::{classify, is_duplicate_key};
use crate::store::{Lane, MongoPool};

/// How a find sorts, projects and limits its documents.
#[derive(Debug, Clone, Default)]
pub struct Find {
    pub sort: Option<Document>,
    pub projection: Option<Document>,
    pub limit: Option<i64>,
}

impl Find {
    pub fn sorted(sort: Document) -> Self {
        Self {
            sort: Some(sort),
            ..Self::default()
        }
    }

    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(i64::try_from(limit).unwrap_or(i64::MAX));
        self
    }

    pub fn projection(mut self, projection: Document) -> Self {
        self.projection = Some(projection);
        self
    }
}

/// The common calls, each owning what it sends (the call runs in a task of its own).
impl MongoPool {
    pub async fn find_one(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
        options: Find,
    ) -> StoreResult<Option<Document>> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            let collection = db.collection::<Document>(&collection);
            let mut find = collection.find_one(filter);
            if let Some(sort) = options.sort {
                find = find.sort(sort);
            }
            if let Some(projection) = options.projection {
                find = find.projection(projection);
            }
            find.await
        })
        .await
    }

    pub async fn find(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
        options: Find,
    ) -> StoreResult<Vec<Document>> {
        use futures::TryStreamExt as _;
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            let collection = db.collection::<Document>(&collection);
            let mut find = collection.find(filter);
            if let Some(sort) = options.sort {
                find = find.sort(sort);
            }
            if let Some(projection) = options.projection {
                find = find.projection(projection);
            }
            if let Some(limit) = options.limit {
                find = find.limit(limit);
            }
            find.await?.try_collect().await
        })
        .await
    }

    pub async fn count(&self, lane: Lane, collection: &str, filter: Document) -> StoreResult<u64> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            db.collection::<Document>(&collection)
                .count_documents(filter)
                .await
        })
        .await
    }

    pub async fn update_one(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
        update: Document,
    ) -> StoreResult<UpdateResult> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            db.collection::<Document>(&collection)
                .update_one(filter, update)
                .await
        })
        .await
    }

    pub async fn update_many(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
        update: Document,
    ) -> StoreResult<UpdateResult> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            db.collection::<Document>(&collection)
                .update_many(filter, update)
                .await
        })
        .await
    }

    /// An upsert; `true` when it inserted. Two concurrent upserts of one `_id` may both try
    /// to insert and the loser fail with a duplicate key (MongoDB retries some of these itself,
    /// FerretDB does not); retried once, it updates the document the winner created.
    pub async fn upsert_one(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
        update: Document,
    ) -> StoreResult<bool> {
        for attempt in 0..2 {
            let (name, filter, update) = (collection.to_owned(), filter.clone(), update.clone());
            let result = self
                .run_raw(lane, move |db| async move {
                    db.collection::<Document>(&name)
                        .update_one(filter, update)
                        .upsert(true)
                        .await
                })
                .await?;
            match result {
                Err(error) if attempt == 0 && is_duplicate_key(&error) => continue,
                other => {
                    return other
                        .map(|result| result.upserted_id.is_some())
                        .map_err(classify);
                }
            }
        }
        unreachable!("the second attempt returns")
    }

    /// Inserts `document`: `false` when one with its `_id` (or another unique key) exists.
    pub async fn insert_unique(
        &self,
        lane: Lane,
        collection: &str,
        document: Document,
    ) -> StoreResult<bool> {
        let collection = collection.to_owned();
        let result = self
            .run_raw(lane, move |db| async move {
                db.collection::<Document>(&collection)
                    .insert_one(document)
                    .await
            })
            .await?;
        match result {
            Ok(_) => Ok(true),
            Err(error) if is_duplicate_key(&error) => Ok(false),
            Err(error) => Err(classify(error)),
        }
    }

    pub async fn insert_one(
        &self,
        lane: Lane,
        collection: &str,
        document: Document,
    ) -> StoreResult<()> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            db.collection::<Document>(&collection)
                .insert_one(document)
                .await
        })
        .await
        .map(drop)
    }

    /// An ordered insert of several documents, in one call.
    pub async fn insert_many(
        &self,
        lane: Lane,
        collection: &str,
        documents: Vec<Document>,
    ) -> StoreResult<()> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            db.collection::<Document>(&collection)
                .insert_many(documents)
                .await
        })
        .await
        .map(drop)
    }

    pub async fn delete_many(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
    ) -> StoreResult<u64> {
        let collection = collection.to_owned();
        self.run(lane, move |db| async move {
            db.collection::<Document>(&collection)
                .delete_many(filter)
                .await
        })
        .await
        .map(|result| result.deleted_count)
    }
}
