//! The business's data in MongoDB (FerretDB in tests), one collection per record type:
//! `properties`, `owners`, `staff`, `slots`, `appointments`, `visits`, `offers`, plus the two claim
//! collections `slot_claims` and `reminders`.
//!
//! Documents are written and read by hand rather than through serde so that they read well in
//! mongosh: ids are string `_id`s (`P-1001`, `O-07`…), times are BSON dates, enums their
//! snake_case names, a property's position a GeoJSON point under `location`. Reading is
//! forgiving where operators may have edited a listing by hand — free text and lists may be
//! missing — and a document that cannot be read is skipped in listings (with a warning), so one
//! bad edit does not break every search.
//!
//! The only atomic primitive used is the insert of a unique `_id`: FerretDB's conditional updates
//! and findAndModify are not atomic, so a slot or a reminder is claimed by inserting a document
//! keyed by it, and a duplicate key means someone else got there first. Like the conversation
//! store, every call goes through the process's [`MongoPool`] (its gate, its timeouts), so a
//! stalled database answers
//! [`StoreError::Unavailable`](crate::store::StoreError::Unavailable) rather than hanging.

mod alerts;
mod appointments;
mod calendars;
mod callback_requests;
mod feed_imports;
mod listing_requests;
mod offers;
mod owners;
mod properties;
mod slots;
mod staff;
mod visits;

mod codec;

use std::collections::HashSet;

use bson::{Bson, Document, doc};
use futures::{StreamExt as _, TryStreamExt as _};
use mongodb::IndexModel;

use crate::store::pool::Find;
use crate::store::{Lane, MongoPool, StoreResult};

/// Upserts of one batch in flight at once: loading a few thousand slots takes seconds, not
/// minutes, without flooding the connection pool.
const UPSERT_CONCURRENCY: usize = 8;

#[derive(Clone)]
pub struct MongoRealEstate {
    pool: MongoPool,
}

impl MongoRealEstate {
    /// Uses `pool` as it is: the client connects lazily, so this never waits for the server.
    pub fn new(pool: MongoPool) -> Self {
        Self { pool }
    }

    /// Creates the indexes the queries rely on. Idempotent; run at start-up.
    pub async fn ensure_indexes(&self) -> StoreResult<()> {
        let indexes: [(&str, Document); 20] = [
            ("slots", doc! {"property_id": 1, "starts_at": 1}),
            ("appointments", doc! {"wa_id": 1, "starts_at": 1}),
            ("appointments", doc! {"property_id": 1, "starts_at": 1}),
            ("appointments", doc! {"status": 1, "starts_at": 1}),
            ("visits", doc! {"wa_id": 1}),
            ("visits", doc! {"property_id": 1}),
            ("offers", doc! {"wa_id": 1}),
            ("offers", doc! {"property_id": 1}),
            // The follow-up loop's queues, looked at every few seconds, and the counter-offer
            // amount awaited from a contact, looked for on each of their messages.
            ("appointments", doc! {"notice": 1}),
            ("offers", doc! {"answer_notice": 1}),
            ("offers", doc! {"awaiting_counter_from": 1}),
            ("properties", doc! {"owner_id": 1}),
            ("owners", doc! {"wa_id": 1}),
            ("staff", doc! {"wa_id": 1}),
            ("callback_requests", doc! {"wa_id": 1}),
            ("listing_requests", doc! {"property_id": 1}),
            ("alerts", doc! {"wa_id": 1}),
            ("alerts", doc! {"cancelled_at": 1}),
            ("properties", doc! {"listed_at": 1}),
            ("properties", doc! {"price_dropped_at": 1}),
        ];
        for (collection, keys) in indexes {
            let model = IndexModel::builder().keys(keys).build();
            let owned = collection.to_owned();
            self.pool
                .run(Lane::Work, ("createIndexes", collection), move |db| async move {
                    db.collection::<Document>(&owned)
                        .create_index(model)
                        .await
                })
                .await?;
        }
        Ok(())
    }

    /// Inserts or replaces each document by `_id`; of two with one `_id` in a batch, the later
    /// wins, as in memory.
    async fn upsert_all(&self, collection: &str, documents: Vec<Document>) -> StoreResult<()> {
        let mut seen = HashSet::new();
        let latest: Vec<Document> = documents
            .into_iter()
            .rev()
            .filter(|d| seen.insert(d.get("_id").cloned().unwrap_or(Bson::Null).to_string()))
            .collect();
        futures::stream::iter(latest)
            .map(|document| replace_by_id(&self.pool, collection, document))
            .buffer_unordered(UPSERT_CONCURRENCY)
            .try_collect()
            .await
    }

    async fn find_one<T>(
        &self,
        collection: &str,
        id: &str,
        read: fn(&Document) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        self.pool
            .find_one(Lane::Work, collection, doc! {"_id": id}, Find::default())
            .await?
            .as_ref()
            .map(read)
            .transpose()
    }

    /// The documents of `collection` matching `filter` in `sort` order, read with `read`;
    /// documents it cannot read are skipped with a warning.
    async fn find_all<T>(
        &self,
        collection: &str,
        filter: Document,
        sort: Document,
        read: fn(&Document) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        self.find_some(collection, filter, Find::sorted(sort), read)
            .await
    }

    /// [`find_all`](Self::find_all) as `find` says (a limit).
    async fn find_some<T>(
        &self,
        collection: &str,
        filter: Document,
        find: Find,
        read: fn(&Document) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let documents = self.pool.find(Lane::Work, collection, filter, find).await?;
        Ok(documents
            .iter()
            .filter_map(|document| match read(document) {
                Ok(record) => Some(record),
                Err(error) => {
                    tracing::warn!(
                        collection,
                        id = %document.get("_id").cloned().unwrap_or(Bson::Null),
                        error = %error,
                        "skipping a document that cannot be read",
                    );
                    None
                }
            })
            .collect())
    }

    /// Inserts `claim`: `false` when a document with its `_id` already exists.
    async fn insert_claim(&self, collection: &str, claim: Document) -> StoreResult<bool> {
        self.pool.insert_unique(Lane::Work, collection, claim).await
    }
}

/// Replaces the document with `document`'s `_id`, inserting it when there is none. Two
/// concurrent upserts of one `_id` may both try to insert and the loser fail with a duplicate
/// key (MongoDB retries some of these itself, FerretDB does not); once retried, it replaces the
/// document the winner created.
async fn replace_by_id(pool: &MongoPool, collection: &str, document: Document) -> StoreResult<()> {
    let filter = doc! {"_id": document.get("_id").cloned().unwrap_or(Bson::Null)};
    for attempt in 0..2 {
        let (name, filter, document) = (collection.to_owned(), filter.clone(), document.clone());
        let result = pool
            .run_raw(Lane::Work, ("update", collection), move |db| async move {
                db.collection::<Document>(&name)
                    .replace_one(filter, document)
                    .upsert(true)
                    .await
            })
            .await?;
        match result {
            Err(error) if attempt == 0 && crate::store::pool::is_duplicate_key(&error) => continue,
            other => return other.map(drop).map_err(crate::store::pool::classify),
        }
    }
    unreachable!("the second attempt returns")
}
