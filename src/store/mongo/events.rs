//! MongoStore's `events`: business events waiting for (or done with) delivery.

use crate::store::mongo::codec::{Fields, date, event, event_doc};
use crate::store::pool::{Find, Lane};
use crate::store::{Event, EventQuery, EventUpdate, MongoStore, StoreResult, heads_due};
use async_trait::async_trait;
use bson::{Bson, doc};
use chrono::{DateTime, Utc};

use crate::store::EventStore;

#[async_trait]
impl EventStore for MongoStore {
    async fn insert_events(&self, events: &[Event]) -> StoreResult<()> {
        for event in events {
            // Already there: a replayed step; the first copy stands.
            self.pool
                .insert_unique(Lane::Work, "events", event_doc(event)?)
                .await?;
        }
        Ok(())
    }

    async fn due_events(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Event>> {
        // The oldest pending ones, enough to find `limit` conversations' heads in most cases;
        // a backlog larger than that is worked through in later rounds.
        let documents = self
            .pool
            .find(
                Lane::Work,
                "events",
                doc! {"status": "pending"},
                Find::sorted(doc! {"at": 1, "_id": 1}).limit(limit.saturating_mul(20).min(2_000)),
            )
            .await?;
        let pending = documents.iter().filter_map(|d| match event(d) {
            Ok(event) => Some(event),
            Err(error) => {
                tracing::warn!(id = %d.get("_id").cloned().unwrap_or(Bson::Null), "skipping an unreadable event: {error}");
                None
            }
        });
        Ok(heads_due(pending, now, limit))
    }

    async fn claim_event(
        &self,
        id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        // A claim is a unique insert per attempt (`{id}#{attempts}`), which every
        // MongoDB-compatible server makes atomic (a conditional update is not atomic on all of
        // them); an expired claim (its holder died) is deleted first, then raced for again.
        let pending = |attempts: Option<i64>| {
            let mut filter = doc! {"_id": id, "status": "pending"};
            if let Some(attempts) = attempts {
                filter.insert("attempts", attempts);
            }
            filter
        };
        let Some(event) = self
            .pool
            .find_one(Lane::Work, "events", pending(None), Find::default())
            .await?
        else {
            return Ok(false);
        };
        let attempts = Fields(&event).int("attempts").unwrap_or(0);
        let claim_id = format!("{id}#{attempts}");
        let claim = || doc! {"_id": &claim_id, "event_id": id, "until": date(until)};
        let mut won = self
            .pool
            .insert_unique(Lane::Work, "event_claims", claim())
            .await?;
        if !won {
            let expired = self
                .pool
                .delete_many(
                    Lane::Work,
                    "event_claims",
                    doc! {"_id": &claim_id, "until": {"$lte": date(now)}},
                )
                .await?;
            if expired > 0 {
                won = self
                    .pool
                    .insert_unique(Lane::Work, "event_claims", claim())
                    .await?;
            }
        }
        if !won {
            return Ok(false);
        }
        // Read again: another instance may have settled this attempt since it was read.
        let still = self
            .pool
            .find_one(
                Lane::Work,
                "events",
                pending(Some(attempts)),
                Find::default(),
            )
            .await?
            .is_some();
        if !still {
            self.pool
                .delete_many(Lane::Work, "event_claims", doc! {"_id": &claim_id})
                .await?;
            return Ok(false);
        }
        self.pool
            .update_one(
                Lane::Work,
                "events",
                doc! {"_id": id},
                doc! {"$set": {"claimed_until": date(until)}},
            )
            .await?;
        Ok(true)
    }

    async fn settle_event(&self, id: &str, update: &EventUpdate) -> StoreResult<()> {
        let set = match update {
            EventUpdate::Delivered { at } => doc! {
                "status": "delivered", "delivered_at": date(*at), "error": null,
            },
            EventUpdate::Retry { at, error } => doc! {
                "next_attempt_at": date(*at), "error": error,
            },
            EventUpdate::Failed { error } => doc! {"status": "failed", "error": error},
        };
        self.pool
            .update_one(
                Lane::Work,
                "events",
                doc! {"_id": id},
                doc! {"$set": set, "$unset": {"claimed_until": ""}, "$inc": {"attempts": 1}},
            )
            .await?;
        // The attempt is over: the next one is claimed under its own id.
        self.pool
            .delete_many(Lane::Work, "event_claims", doc! {"event_id": id})
            .await?;
        Ok(())
    }

    async fn list_events(&self, query: &EventQuery) -> StoreResult<Vec<Event>> {
        let mut filter = doc! {};
        if let Some(status) = query.status {
            filter.insert("status", status.as_str());
        }
        if let Some(since) = query.since {
            filter.insert("at", doc! {"$gte": date(since)});
        }
        if let Some(wa_id) = &query.wa_id {
            filter.insert("wa_id", wa_id.as_str());
        }
        if let Some(kind) = &query.kind {
            filter.insert("type", kind.as_str());
        }
        let documents = self
            .pool
            .find(
                Lane::Work,
                "events",
                filter,
                Find::sorted(if query.oldest_first {
                    doc! {"at": 1, "_id": 1}
                } else {
                    doc! {"at": -1, "_id": -1}
                })
                .limit(query.limit),
            )
            .await?;
        documents.iter().map(event).collect()
    }

    async fn retry_event(&self, id: &str, now: DateTime<Utc>) -> StoreResult<bool> {
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "events",
                doc! {"_id": id, "status": "failed"},
                doc! {
                    "$set": {"status": "pending", "next_attempt_at": date(now), "attempts": 0_i64},
                    "$unset": {"claimed_until": ""},
                },
            )
            .await?;
        Ok(result.modified_count == 1)
    }
}
