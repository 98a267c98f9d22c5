//! MongoStore's `inbox` (and `rejected`): what customers sent, until a turn answers it.

use crate::domain::{WaId, WaMessageId};
use crate::store::mongo::OPEN_INBOX;
use crate::store::mongo::codec::{Fields, date, inbox_doc, inbox_entry};
use crate::store::pool::{DUPLICATE_KEY, Find, Lane, classify};
use crate::store::{
    InboxBacklog, InboxEntry, InboxInsert, InboxOutcomes, InboxStatus, MongoStore, RejectedEntry,
    StoreResult, first_distinct,
};
use async_trait::async_trait;
use bson::{Document, doc};
use chrono::{DateTime, Utc};

use crate::store::InboxStore;

#[async_trait]
impl InboxStore for MongoStore {
    async fn insert_inbox(&self, messages: &[InboxEntry]) -> StoreResult<InboxInsert> {
        if messages.is_empty() {
            return Ok(InboxInsert::default());
        }
        let docs: Vec<Document> = messages.iter().map(inbox_doc).collect();
        let result = self
            .pool
            .run_raw(Lane::Ingress, ("insert", "inbox"), move |db| async move {
                db.collection::<Document>("inbox")
                    .insert_many(docs)
                    .ordered(false)
                    .await
            })
            .await?;
        match result {
            Ok(done) => Ok(InboxInsert {
                inserted: done.inserted_ids.len(),
                duplicates: 0,
                known: Vec::new(),
            }),
            Err(error) => {
                let mongodb::error::ErrorKind::InsertMany(failure) = &*error.kind else {
                    return Err(classify(error));
                };
                let write_errors = failure.write_errors.as_deref().unwrap_or_default();
                let only_duplicates = failure.write_concern_error.is_none()
                    && write_errors.iter().all(|e| e.code == DUPLICATE_KEY);
                if !only_duplicates {
                    return Err(classify(error));
                }
                Ok(InboxInsert {
                    inserted: messages.len() - write_errors.len(),
                    duplicates: write_errors.len(),
                    known: write_errors
                        .iter()
                        .filter_map(|e| messages.get(e.index))
                        .map(|m| m.wamid.clone())
                        .collect(),
                })
            }
        }
    }

    async fn inbox_entry(&self, wamid: &WaMessageId) -> StoreResult<Option<InboxEntry>> {
        self.pool
            .find_one(
                Lane::Work,
                "inbox",
                doc! {"_id": wamid.as_str()},
                Find::default(),
            )
            .await?
            .as_ref()
            .map(inbox_entry)
            .transpose()
    }

    async fn pending_inbox(&self, limit: usize) -> StoreResult<Vec<InboxEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "inbox",
                doc! {"status": InboxStatus::Pending.as_str()},
                Find::sorted(doc! {"received_at": 1, "_id": 1}).limit(limit),
            )
            .await?;
        docs.iter().map(inbox_entry).collect()
    }

    async fn record_rejected(&self, rejected: &RejectedEntry) -> StoreResult<()> {
        self.pool
            .insert_one(
                Lane::Ingress,
                "webhook_rejects",
                doc! {
                    "what": &rejected.what,
                    "reason": &rejected.reason,
                    "raw": &rejected.raw,
                    "at": date(rejected.at),
                },
            )
            .await
    }

    async fn inbox_outcomes_since(&self, since: DateTime<Utc>) -> StoreResult<InboxOutcomes> {
        let count = |status: Document| {
            let mut filter = doc! {"received_at": {"$gte": date(since)}};
            filter.extend(status);
            self.pool.count(Lane::Work, "inbox", filter)
        };
        let answered = count(doc! {"status": InboxStatus::Done.as_str()}).await?;
        let failed = count(doc! {"status": InboxStatus::Failed.as_str()}).await?;
        let all = count(doc! {}).await?;
        Ok(InboxOutcomes {
            answered,
            failed,
            open: all.saturating_sub(answered + failed),
        })
    }

    async fn rejected(&self, limit: usize) -> StoreResult<Vec<RejectedEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "webhook_rejects",
                doc! {},
                Find::sorted(doc! {"_id": -1}).limit(limit),
            )
            .await?;
        Ok(docs
            .iter()
            .rev()
            .map(|d| {
                let f = Fields(d);
                RejectedEntry {
                    what: f.str("what").unwrap_or_default(),
                    reason: f.str("reason").unwrap_or_default(),
                    raw: f.str("raw").unwrap_or_default(),
                    at: f.date("at").unwrap_or_default(),
                }
            })
            .collect())
    }

    async fn open_inbox(&self, wa_id: &WaId) -> StoreResult<Vec<InboxEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "inbox",
                // Equality only: FerretDB hands `$eq` filters to its database and filters
                // anything else itself, after reading the conversation's whole inbox. No entry
                // is left `processing` here: claiming the conversation reopened any an older
                // version wrote.
                doc! {"wa_id": wa_id.as_str(), "status": InboxStatus::Pending.as_str()},
                Find::sorted(doc! {"received_at": 1, "_id": 1}),
            )
            .await?;
        docs.iter().map(inbox_entry).collect()
    }

    async fn conversations_with_open_inbox(&self, limit: usize) -> StoreResult<Vec<WaId>> {
        // Oldest open entries first; several may belong to one conversation, so read a few
        // times `limit` and keep the first occurrence of each.
        let docs = self
            .pool
            .find_any_of(
                Lane::Work,
                "inbox",
                doc! {},
                ("status", &OPEN_INBOX),
                Find::sorted(doc! {"received_at": 1, "_id": 1})
                    .projection(doc! {"wa_id": 1, "received_at": 1})
                    .limit(limit.saturating_mul(4)),
            )
            .await?;
        let keys = docs
            .iter()
            .map(|doc| Fields(doc).wa_id("wa_id"))
            .collect::<StoreResult<Vec<WaId>>>()?;
        Ok(first_distinct(keys, limit))
    }

    async fn set_inbox_status(
        &self,
        wamids: &[WaMessageId],
        status: InboxStatus,
    ) -> StoreResult<()> {
        let mut update = doc! {"$set": {"status": status.as_str()}};
        if status == InboxStatus::Processing {
            update.insert("$inc", doc! {"attempts": 1_i64});
        }
        self.update_each(wamids, update).await
    }

    async fn count_attempt(&self, wamids: &[WaMessageId]) -> StoreResult<()> {
        self.update_each(wamids, doc! {"$inc": {"attempts": 1_i64}})
            .await
    }

    async fn inbox_backlog(&self) -> StoreResult<InboxBacklog> {
        let open = self
            .pool
            .count_any_of(Lane::Work, "inbox", ("status", &OPEN_INBOX))
            .await?;
        let failed = self
            .pool
            .count(
                Lane::Work,
                "inbox",
                doc! {"status": InboxStatus::Failed.as_str()},
            )
            .await?;
        let oldest = self
            .pool
            .find_any_of(
                Lane::Work,
                "inbox",
                doc! {},
                ("status", &OPEN_INBOX),
                Find::sorted(doc! {"received_at": 1})
                    .projection(doc! {"received_at": 1})
                    .limit(1),
            )
            .await?
            .pop();
        Ok(InboxBacklog {
            open,
            oldest_received_at: oldest.as_ref().and_then(|d| Fields(d).date("received_at")),
            failed,
        })
    }

    async fn latest_inbox(&self, wa_id: &WaId) -> StoreResult<Option<InboxEntry>> {
        let found = self
            .pool
            .find_one(
                Lane::Work,
                "inbox",
                doc! {"wa_id": wa_id.as_str()},
                Find::sorted(doc! {"received_at": -1, "_id": -1}),
            )
            .await?;
        found.as_ref().map(inbox_entry).transpose()
    }
}

impl MongoStore {
    /// `update` on each of `wamids`, one by `_id` at a time: FerretDB serves an `_id` equality
    /// from its index but filters `$in` itself after reading the whole inbox, and a turn that
    /// answers several messages would otherwise read every message ever received.
    async fn update_each(&self, wamids: &[WaMessageId], update: Document) -> StoreResult<()> {
        for wamid in wamids {
            self.pool
                .update_one(
                    Lane::Work,
                    "inbox",
                    doc! {"_id": wamid.as_str()},
                    update.clone(),
                )
                .await?;
        }
        Ok(())
    }
}
