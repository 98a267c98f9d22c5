//! MongoStore's `leases` and `instances`: which process holds which conversation, and which
//! processes are alive.

use crate::domain::WaId;
use crate::store::mongo::codec::{Fields, date};
use crate::store::pool::{Find, Lane};
use crate::store::{InboxStatus, InstanceRecord, LeaseView, MongoStore, StoreResult};
use async_trait::async_trait;
use bson::{Document, doc};
use chrono::{DateTime, Utc};

use crate::store::LeaseStore;

#[async_trait]
impl LeaseStore for MongoStore {
    async fn lease_of(&self, wa_id: &WaId) -> StoreResult<Option<LeaseView>> {
        let latest = self
            .pool
            .find_one(
                Lane::Work,
                "leases",
                doc! {"wa_id": wa_id.as_str()},
                Find::sorted(doc! {"generation": -1}),
            )
            .await?;
        Ok(latest.map(|d| {
            let f = Fields(&d);
            LeaseView {
                owner: f.str("owner").unwrap_or_default(),
                until: f.date("until").unwrap_or_default(),
                released: d.get_bool("released").unwrap_or(false),
            }
        }))
    }

    async fn claim_conversation(
        &self,
        wa_id: &WaId,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        live: &[String],
    ) -> StoreResult<bool> {
        // Each holder of a conversation gets a generation document `{wa_id}#{n}` in `leases`.
        // Taking it (free, released, or its holder gone) is inserting generation n + 1: the
        // unique `_id` makes exactly one claimant win, on MongoDB and on servers whose
        // conditional updates are not atomic (FerretDB reads, then writes).
        let current = self
            .pool
            .find_one(
                Lane::Work,
                "leases",
                doc! {"wa_id": wa_id.as_str()},
                Find::sorted(doc! {"generation": -1}),
            )
            .await?;
        let generation = match &current {
            Some(lease) => {
                let f = Fields(lease);
                let holder = f.str("owner").unwrap_or_default();
                let released = lease.get_bool("released").unwrap_or(false);
                let within = f.date("until").is_some_and(|until| until > now);
                let held = !released && (within || live.contains(&holder)) && holder != owner;
                if held {
                    return Ok(false);
                }
                f.int("generation").unwrap_or(0) + 1
            }
            None => 1,
        };
        let claim = doc! {
            "_id": format!("{}#{generation}", wa_id.as_str()),
            "wa_id": wa_id.as_str(),
            "generation": generation,
            "owner": owner,
            "claimed_at": date(now),
            "until": date(until),
            "released": false,
        };
        if !self.pool.insert_unique(Lane::Work, "leases", claim).await? {
            return Ok(false);
        }
        if current
            .as_ref()
            .is_some_and(|lease| !lease.get_bool("released").unwrap_or(false))
        {
            // Taken over from a holder that is gone: its generations are history. (Released
            // ones are deleted by the cleanup job.)
            self.pool
                .delete_many(
                    Lane::Work,
                    "leases",
                    doc! {"wa_id": wa_id.as_str(), "generation": {"$lt": generation}},
                )
                .await?;
        }
        // An older version marked the messages it was answering `processing`; a holder reads
        // only `pending` ones (by equality, which FerretDB hands to its database), so the
        // next holder of a conversation held before makes them pending again. A conversation
        // never held has none: its first claim costs no write more.
        if current.is_some() {
            self.pool
                .update_many(
                    Lane::Work,
                    "inbox",
                    doc! {"wa_id": wa_id.as_str(), "status": InboxStatus::Processing.as_str()},
                    doc! {"$set": {"status": InboxStatus::Pending.as_str()}},
                )
                .await?;
        }
        self.mirror_lease(wa_id, Some((owner, until))).await?;
        Ok(true)
    }

    async fn release_conversation(&self, wa_id: &WaId, owner: &str) -> StoreResult<()> {
        self.pool
            .update_many(
                Lane::Work,
                "leases",
                doc! {"wa_id": wa_id.as_str(), "owner": owner, "released": false},
                doc! {"$set": {"released": true}},
            )
            .await?;
        self.mirror_lease(wa_id, None).await
    }

    async fn release_all_leases(&self, owner: &str) -> StoreResult<u64> {
        let released = self
            .pool
            .update_many(
                Lane::Work,
                "leases",
                doc! {"owner": owner, "released": false},
                doc! {"$set": {"released": true}},
            )
            .await?;
        self.pool
            .update_many(
                Lane::Work,
                "conversations",
                doc! {"lease_owner": owner},
                doc! {"$unset": {"lease_owner": "", "lease_until": ""}},
            )
            .await?;
        Ok(released.modified_count)
    }

    async fn active_leases(&self, now: DateTime<Utc>, live: &[String]) -> StoreResult<u64> {
        self.pool
            .count(
                Lane::Work,
                "leases",
                doc! {
                    "released": false,
                    "$or": [{"owner": {"$in": live}}, {"until": {"$gt": date(now)}}],
                },
            )
            .await
    }

    async fn server_time(&self) -> StoreResult<DateTime<Utc>> {
        let hello = self
            .pool
            .run(Lane::Control, ("hello", "-"), |db| async move {
                db.run_command(doc! {"hello": 1}).await
            })
            .await?;
        hello
            .get_datetime("localTime")
            .map(|at| at.to_chrono())
            .map_err(|_| anyhow::anyhow!("the server's hello has no localTime").into())
    }

    async fn instance_beat(
        &self,
        id: &str,
        nonce: &str,
        take_over: bool,
    ) -> StoreResult<Option<DateTime<Utc>>> {
        let filter = if take_over {
            doc! {"_id": id}
        } else {
            doc! {"_id": id, "nonce": nonce}
        };
        let update = doc! {"$set": {"nonce": nonce}, "$currentDate": {"seen_at": true}};
        let beat = self
            .pool
            .run(
                Lane::Control,
                ("findAndModify", "instances"),
                move |db| async move {
                    db.collection::<Document>("instances")
                        .find_one_and_update(filter, update)
                        .upsert(take_over)
                        .return_document(mongodb::options::ReturnDocument::After)
                        .await
                },
            )
            .await?;
        Ok(beat.and_then(|doc| Fields(&doc).date("seen_at")))
    }

    async fn instances(&self) -> StoreResult<Vec<InstanceRecord>> {
        let docs = self
            .pool
            .find(Lane::Control, "instances", doc! {}, Find::default())
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| {
                let f = Fields(doc);
                Some(InstanceRecord {
                    id: f.str("_id")?,
                    nonce: f.str("nonce").unwrap_or_default(),
                    seen_at: f.date("seen_at")?,
                })
            })
            .collect())
    }

    async fn instance_left(&self, id: &str, nonce: &str) -> StoreResult<()> {
        self.pool
            .delete_many(Lane::Control, "instances", doc! {"_id": id, "nonce": nonce})
            .await
            .map(drop)
    }
}
