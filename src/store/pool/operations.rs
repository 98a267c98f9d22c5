//! The operations the stores run through the pool, each in its lane and under its limits.

use super::super::StoreResult;
use bson::Document;
use mongodb::results::UpdateResult;

use crate::store::pool::{classify, is_duplicate_key};
use crate::store::{Lane, MongoPool};

/// How a find sorts, projects, skips and limits its documents.
#[derive(Debug, Clone, Default)]
pub struct Find {
    pub sort: Option<Document>,
    pub projection: Option<Document>,
    pub skip: Option<u64>,
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

    pub fn skip(mut self, skip: usize) -> Self {
        self.skip = (skip > 0).then(|| u64::try_from(skip).unwrap_or(u64::MAX));
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
        let owned = collection.to_owned();
        self.run(lane, ("find", collection), move |db| async move {
            let collection = db.collection::<Document>(&owned);
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
        let owned = collection.to_owned();
        self.run(lane, ("find", collection), move |db| async move {
            let collection = db.collection::<Document>(&owned);
            let mut find = collection.find(filter);
            if let Some(sort) = options.sort {
                find = find.sort(sort);
            }
            if let Some(projection) = options.projection {
                find = find.projection(projection);
            }
            if let Some(skip) = options.skip {
                find = find.skip(skip);
            }
            if let Some(limit) = options.limit {
                find = find.limit(limit);
            }
            find.await?.try_collect().await
        })
        .await
    }

    /// The documents with `field` equal to any of `values`, as one `$in` find would return
    /// them (sorted and limited as `options` say), read with one equality find per value.
    /// FerretDB hands equality to its database, where an index serves it, but filters `$in`
    /// itself after reading the whole collection; MongoDB serves either from the same index.
    pub async fn find_any_of(
        &self,
        lane: Lane,
        collection: &str,
        filter: Document,
        (field, values): (&str, &[&str]),
        options: Find,
    ) -> StoreResult<Vec<Document>> {
        debug_assert!(
            options.skip.is_none(),
            "a skip cannot be split across the finds"
        );
        let mut found = Vec::new();
        for value in values {
            let mut filter = filter.clone();
            filter.insert(field, *value);
            found.extend(self.find(lane, collection, filter, options.clone()).await?);
        }
        if let Some(sort) = &options.sort {
            found.sort_by(|a, b| in_order(sort, a, b));
        }
        if let Some(limit) = options.limit {
            found.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        Ok(found)
    }

    /// How many documents have `field` equal to any of `values`: one equality count each
    /// (see [`find_any_of`](Self::find_any_of)).
    pub async fn count_any_of(
        &self,
        lane: Lane,
        collection: &str,
        (field, values): (&str, &[&str]),
    ) -> StoreResult<u64> {
        let mut total = 0;
        for value in values {
            let mut filter = Document::new();
            filter.insert(field, *value);
            total += self.count(lane, collection, filter).await?;
        }
        Ok(total)
    }

    pub async fn count(&self, lane: Lane, collection: &str, filter: Document) -> StoreResult<u64> {
        let owned = collection.to_owned();
        self.run(lane, ("aggregate", collection), move |db| async move {
            db.collection::<Document>(&owned)
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
        let owned = collection.to_owned();
        self.run(lane, ("update", collection), move |db| async move {
            db.collection::<Document>(&owned)
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
        let owned = collection.to_owned();
        self.run(lane, ("update", collection), move |db| async move {
            db.collection::<Document>(&owned)
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
                .run_raw(lane, ("update", collection), move |db| async move {
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
        let owned = collection.to_owned();
        let result = self
            .run_raw(lane, ("insert", collection), move |db| async move {
                db.collection::<Document>(&owned).insert_one(document).await
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
        let owned = collection.to_owned();
        self.run(lane, ("insert", collection), move |db| async move {
            db.collection::<Document>(&owned).insert_one(document).await
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
        let owned = collection.to_owned();
        self.run(lane, ("insert", collection), move |db| async move {
            db.collection::<Document>(&owned)
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
        let owned = collection.to_owned();
        self.run(lane, ("delete", collection), move |db| async move {
            db.collection::<Document>(&owned).delete_many(filter).await
        })
        .await
        .map(|result| result.deleted_count)
    }
}

/// `a` against `b` by a MongoDB sort document, for the field types the stores sort on (dates,
/// strings, integers); a missing field sorts first, as in MongoDB.
fn in_order(sort: &Document, a: &Document, b: &Document) -> std::cmp::Ordering {
    use bson::Bson;
    use std::cmp::Ordering;
    for (key, direction) in sort {
        let rank = |value: Option<&Bson>| match value {
            None | Some(Bson::Null) => 0,
            Some(Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)) => 1,
            Some(Bson::String(_)) => 2,
            Some(Bson::ObjectId(_)) => 3,
            Some(Bson::DateTime(_)) => 4,
            Some(_) => 5,
        };
        let (x, y) = (a.get(key), b.get(key));
        let order = match (x, y) {
            (Some(Bson::DateTime(x)), Some(Bson::DateTime(y))) => x.cmp(y),
            (Some(Bson::String(x)), Some(Bson::String(y))) => x.cmp(y),
            (Some(Bson::ObjectId(x)), Some(Bson::ObjectId(y))) => x.bytes().cmp(&y.bytes()),
            (Some(x), Some(y)) => match (number(x), number(y)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => rank(Some(x)).cmp(&rank(Some(y))),
            },
            _ => rank(x).cmp(&rank(y)),
        };
        let order = if number(direction).is_some_and(|d| d < 0.0) {
            order.reverse()
        } else {
            order
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

fn number(value: &bson::Bson) -> Option<f64> {
    match value {
        bson::Bson::Int32(n) => Some(f64::from(*n)),
        bson::Bson::Int64(n) => Some(*n as f64),
        bson::Bson::Double(n) => Some(*n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::in_order;
    use bson::{DateTime, doc, oid::ObjectId};
    use std::cmp::Ordering;

    #[test]
    fn documents_are_ordered_as_a_mongodb_sort_orders_them() {
        let early = DateTime::from_millis(1_000);
        let late = DateTime::from_millis(2_000);
        let by_time = doc! {"at": 1, "_id": 1};
        let a = doc! {"_id": "b", "at": early};
        let b = doc! {"_id": "a", "at": late};
        let c = doc! {"_id": "c", "at": late};
        assert_eq!(in_order(&by_time, &a, &b), Ordering::Less);
        assert_eq!(
            in_order(&by_time, &b, &c),
            Ordering::Less,
            "ties broken by the next key"
        );
        assert_eq!(in_order(&doc! {"at": -1}, &a, &b), Ordering::Greater);
        assert_eq!(
            in_order(&doc! {"part": 1}, &doc! {}, &doc! {"part": 0_i64}),
            Ordering::Less,
            "a missing field first"
        );
        assert_eq!(
            in_order(
                &doc! {"part": 1},
                &doc! {"part": 2_i32},
                &doc! {"part": 10_i64}
            ),
            Ordering::Less,
            "numbers by value, whatever their width"
        );
        let (x, y) = (ObjectId::from_bytes([0; 12]), ObjectId::from_bytes([1; 12]));
        assert_eq!(
            in_order(&doc! {"_id": 1}, &doc! {"_id": x}, &doc! {"_id": y}),
            Ordering::Less
        );
    }
}
