//! The MongoDB store (the `mongodb` crate). Production runs MongoDB 6/7; tests run FerretDB over
//! the same wire protocol. Only single-document operations are used, so a replica set or a
//! sharded cluster scales it without transactions.
//!
//! Every call goes through the [`MongoPool`]'s gate: the client connects lazily (the service
//! starts, and `/readyz` says 503, while MongoDB is down), no more calls reach the driver than
//! it has connections, and a stalled database answers [`StoreError::Unavailable`], not a hang.

mod codec;
mod conversations;
mod events;
mod history;
mod inbox;
mod leads;
mod leases;
mod maintenance;
mod outbox;
mod pagers;
mod usage;
mod users;

use crate::store::mongo::codec::{date, outbox_doc, outbox_id};
use crate::store::{InboxStatus, OutboxEntry, StoreError, StoreResult};

use bson::{Document, doc};
use chrono::{DateTime, Utc};
use mongodb::IndexModel;
use mongodb::options::IndexOptions;

use crate::domain::WaId;
use crate::store::MongoConfig;
use crate::store::pool::{Adjust, Lane, MongoPool};

/// Inbox statuses of entries not yet answered.
const OPEN_INBOX: [&str; 2] = ["pending", "processing"];

/// Retries of an insert that lost a race for a unique key.
const MAX_INSERT_RACES: usize = 5;

#[derive(Clone)]
pub struct MongoStore {
    pool: MongoPool,
}

impl MongoStore {
    /// Parses the URI and builds the client; does not wait for the server.
    pub async fn connect(config: &MongoConfig) -> anyhow::Result<Self> {
        Ok(Self::over(MongoPool::connect(config, None).await?))
    }

    /// [`connect`](Self::connect), letting `adjust` change the client options first (tests
    /// count the commands a turn sends with a command event handler).
    pub async fn connect_with(
        config: &MongoConfig,
        adjust: impl Fn(&mut mongodb::options::ClientOptions) + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let adjust: Adjust = std::sync::Arc::new(adjust);
        Ok(Self::over(MongoPool::connect(config, Some(adjust)).await?))
    }

    /// The store over a pool the process shares (with the agency's data).
    pub fn over(pool: MongoPool) -> Self {
        Self { pool }
    }

    /// The connections this store uses.
    pub fn pool(&self) -> &MongoPool {
        &self.pool
    }

    /// Creates the indexes the queries rely on, and adds what this version asks for to the
    /// documents an older one wrote. Idempotent; run at start-up.
    pub async fn ensure_indexes(&self) -> StoreResult<()> {
        let unique = IndexOptions::builder().unique(true).build();
        let indexes: [(&str, Document, Option<IndexOptions>); 26] = [
            ("messages", doc! {"wa_id": 1, "seq": 1}, Some(unique)),
            // A staff member's waiting notices, and their pager's latest claim.
            ("pages", doc! {"member": 1, "at": 1}, None),
            ("pager_claims", doc! {"member": 1, "generation": -1}, None),
            // The cleanup job's deletes by age.
            ("messages", doc! {"at": 1}, None),
            ("llm_calls", doc! {"at": 1}, None),
            ("users", doc! {"lead_at": 1}, None),
            ("users", doc! {"opted_out_at": 1}, None),
            ("leases", doc! {"until": 1}, None),
            ("webhook_rejects", doc! {"at": 1}, None),
            ("inbox", doc! {"status": 1, "received_at": 1}, None),
            ("inbox", doc! {"wa_id": 1, "received_at": 1}, None),
            ("outbox", doc! {"wamid": 1}, None),
            ("outbox", doc! {"wa_id": 1, "at": 1}, None),
            ("outbox", doc! {"in_reply_to": 1}, None),
            ("outbox", doc! {"status": 1, "at": 1}, None),
            ("leases", doc! {"wa_id": 1, "generation": -1}, None),
            ("llm_calls", doc! {"wa_id": 1, "at": -1}, None),
            ("events", doc! {"status": 1, "at": 1}, None),
            ("events", doc! {"wa_id": 1, "at": 1}, None),
            ("event_claims", doc! {"event_id": 1}, None),
            // Portal leads: the console's list, a contact's lead, the first contacts due.
            ("leads", doc! {"received_at": -1}, None),
            ("leads", doc! {"wa_id": 1, "received_at": -1}, None),
            // Conversations listed by their last activity (operators, the health monitor).
            ("conversations", doc! {"updated_at": 1, "_id": 1}, None),
            // Those waiting for a person, and those a person has (see `conversations::MARKS`).
            (
                "conversations",
                doc! {conversations::HANDOFF_WAITING: 1},
                None,
            ),
            (
                "conversations",
                doc! {conversations::HANDOFF_TAKEN: 1},
                None,
            ),
            // The handoff escalation's due notices.
            (
                "conversations",
                doc! {"handoff_requested.next_notice_at": 1},
                None,
            ),
        ];
        for (collection, keys, options) in indexes {
            let model = IndexModel::builder().keys(keys).options(options).build();
            let owned = collection.to_owned();
            self.pool
                .run(Lane::Work, ("createIndexes", collection), move |db| async move {
                    db.collection::<Document>(&owned)
                        .create_index(model)
                        .await
                })
                .await?;
        }
        // Handoffs written before their marks existed.
        for (mark, beside) in conversations::MARKS {
            self.pool
                .update_many(
                    Lane::Work,
                    "conversations",
                    doc! {beside: {"$exists": true}, mark: {"$exists": false}},
                    doc! {"$set": {mark: true}},
                )
                .await?;
        }
        Ok(())
    }

    /// Inbox messages left `processing` by a version that still wrote it, back to `pending`
    /// (a cut turn is now recognised from the history): the poll finds them again. Idempotent;
    /// run at start-up.
    pub async fn reopen_processing(&self) -> StoreResult<u64> {
        self.pool
            .update_many(
                Lane::Work,
                "inbox",
                doc! {"status": InboxStatus::Processing.as_str()},
                doc! {"$set": {"status": InboxStatus::Pending.as_str()}},
            )
            .await
            .map(|result| result.modified_count)
    }

    /// The database, for operator tools and tests that read documents as mongosh would.
    pub fn database(&self) -> mongodb::Database {
        self.pool.database()
    }

    /// Drops the whole database. For tests, which each use a database of their own.
    pub async fn drop_database(&self) -> StoreResult<()> {
        self.pool
            .run(Lane::Work, ("dropDatabase", "-"), |db| async move {
                db.drop().await
            })
            .await
    }

    /// An upsert into `conversations` that leaves the conversation with a `dialog_state`
    /// array (`[]` when new). Not by `$setOnInsert`: FerretDB 1.24 drops an empty array there,
    /// and its upserts are not atomic, so a field added by a second write can be lost to a
    /// concurrent one. `$push` of no element creates the empty array when it is missing and
    /// changes nothing otherwise, in the same write, on MongoDB and FerretDB alike. A
    /// `dialog_state` made something else than an array by hand would refuse it: then the
    /// upsert goes through without it (the reader takes a non-array as `[]`).
    async fn upsert_conversation(
        &self,
        lane: Lane,
        filter: Document,
        update: Document,
    ) -> StoreResult<()> {
        let sets_it = update
            .get_document("$set")
            .is_ok_and(|set| set.contains_key("dialog_state"));
        let mut ensured = update.clone();
        if !sets_it {
            ensured.insert("$push", doc! {"dialog_state": {"$each": []}});
        }
        match self
            .pool
            .upsert_one(lane, "conversations", filter.clone(), ensured)
            .await
        {
            Err(StoreError::Unexpected(error)) if format!("{error:#}").contains("dialog_state") => {
                tracing::warn!(
                    "conversations.dialog_state is not an array (edited by hand?): written \
                     without it; `zaguan conversations reset` sets it right: {error:#}"
                );
                self.pool
                    .upsert_one(lane, "conversations", filter, update)
                    .await
                    .map(drop)
            }
            other => other.map(drop),
        }
    }

    /// Completes the record a status webhook made of `part` before its sender recorded it:
    /// everything but the status, which the webhook knows better.
    async fn complete_early(&self, part: &OutboxEntry) -> StoreResult<()> {
        let mut fields = outbox_doc(part);
        for key in ["_id", "status", "status_at", "wamid"] {
            fields.remove(key);
        }
        let completed = self
            .pool
            .update_one(
                Lane::Work,
                "outbox",
                doc! {"_id": outbox_id(&part.id), "early": true},
                doc! {"$set": fields, "$unset": {"early": ""}},
            )
            .await?;
        if completed.matched_count == 0 {
            tracing::debug!(part = %part.id.0, "reply part recorded before; left as it is");
        }
        Ok(())
    }

    /// `lease_owner` / `lease_until` on the conversation, for operators reading it in mongosh.
    /// Informational: who holds the lease is decided in `leases`.
    async fn mirror_lease(
        &self,
        wa_id: &WaId,
        lease: Option<(&str, DateTime<Utc>)>,
    ) -> StoreResult<()> {
        let update = match lease {
            Some((owner, until)) => doc! {
                "$set": {"lease_owner": owner, "lease_until": date(until)},
            },
            None => doc! {"$unset": {"lease_owner": "", "lease_until": ""}},
        };
        self.upsert_conversation(Lane::Work, doc! {"_id": wa_id.as_str()}, update)
            .await
    }
}
