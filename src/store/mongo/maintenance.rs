//! MongoStore's the database as a whole: is it there, how strained, and what it forgets or purges.

use crate::domain::WaId;
use crate::store::mongo::codec::date;
use crate::store::pool::Lane;
use crate::store::{
    ForgetCounts, InboxStatus, LeaseStore, MongoStore, OutboxStatus, Pressure, PurgeBefore,
    PurgeCounts, StoreResult,
};
use async_trait::async_trait;
use bson::{Document, doc};

use crate::store::MaintenanceStore;

#[async_trait]
impl MaintenanceStore for MongoStore {
    fn pressure(&self) -> Option<Pressure> {
        Some(self.pool.pressure())
    }

    async fn ping(&self) -> StoreResult<()> {
        self.pool
            .run(Lane::Control, ("ping", "-"), |db| async move {
                db.run_command(doc! {"ping": 1}).await
            })
            .await
            .map(drop)
    }

    async fn forget(&self, wa_id: &WaId) -> StoreResult<ForgetCounts> {
        let key = wa_id.as_str();
        let delete = |collection: &'static str, filter: Document| {
            self.pool.delete_many(Lane::Work, collection, filter)
        };
        // The inbox first: no worker starts a turn for a conversation with nothing open.
        let inbox = delete("inbox", doc! {"wa_id": key}).await?;
        let mentions: String = key
            .chars()
            .flat_map(|c| {
                let escape = !c.is_ascii_alphanumeric();
                escape.then_some('\\').into_iter().chain([c])
            })
            .collect();
        // Event ids name the conversation by its digest, not its number.
        let digest = crate::store::events::conversation_digest(wa_id);
        Ok(ForgetCounts {
            inbox,
            messages: delete("messages", doc! {"wa_id": key}).await?,
            // Staff notices waiting about them are outbound messages too.
            outbox: delete("outbox", doc! {"wa_id": key}).await?
                + delete("pages", doc! {"customer": key}).await?,
            llm_calls: delete("llm_calls", doc! {"wa_id": key}).await?,
            leases: delete("leases", doc! {"wa_id": key}).await?,
            webhook_rejects: delete("webhook_rejects", doc! {"raw": {"$regex": &mentions}}).await?,
            events: delete("events", doc! {"wa_id": key}).await?
                + delete("event_claims", doc! {"event_id": {"$regex": &mentions}}).await?
                + delete("event_claims", doc! {"event_id": {"$regex": &digest}}).await?,
            leads: delete("leads", doc! {"wa_id": key}).await?,
            users: delete("users", doc! {"_id": key}).await?,
            conversations: delete("conversations", doc! {"_id": key}).await?,
        })
    }

    async fn purge(&self, before: &PurgeBefore) -> StoreResult<PurgeCounts> {
        let delete = |collection: &'static str, filter: Document| {
            self.pool.delete_many(Lane::Work, collection, filter)
        };
        let mut counts = PurgeCounts::default();
        if let Some(at) = before.inbox {
            counts.inbox = delete(
                "inbox",
                doc! {"status": {"$in": [InboxStatus::Done.as_str(), InboxStatus::Failed.as_str()]},
                "received_at": {"$lt": date(at)}},
            )
            .await?;
            counts.webhook_rejects =
                delete("webhook_rejects", doc! {"at": {"$lt": date(at)}}).await?;
        }
        if let Some(at) = before.outbox {
            let finished: Vec<&str> = [
                OutboxStatus::Sent,
                OutboxStatus::Delivered,
                OutboxStatus::Read,
                OutboxStatus::Played,
                OutboxStatus::Failed,
            ]
            .iter()
            .map(|s| s.as_str())
            .collect();
            counts.outbox = delete(
                "outbox",
                doc! {"status": {"$in": finished}, "at": {"$lt": date(at)}},
            )
            .await?;
        }
        if let Some(at) = before.messages {
            counts.messages = delete("messages", doc! {"at": {"$lt": date(at)}}).await?;
        }
        if let Some(at) = before.llm_calls {
            counts.llm_calls = delete("llm_calls", doc! {"at": {"$lt": date(at)}}).await?;
        }
        if let Some(at) = before.events {
            counts.events = delete(
                "events",
                doc! {"status": {"$in": ["delivered", "failed"]}, "at": {"$lt": date(at)}},
            )
            .await?;
            // Claims whose holder died mid-attempt: long expired by then.
            delete("event_claims", doc! {"until": {"$lt": date(at)}}).await?;
        }
        if let Some(at) = before.leases {
            // Released long ago; or held by an instance silent that long (gone for good).
            counts.leases = delete("instances", doc! {"seen_at": {"$lt": date(at)}}).await?;
            let live: Vec<String> = self.instances().await?.into_iter().map(|i| i.id).collect();
            counts.leases += delete(
                "leases",
                doc! {
                    "until": {"$lt": date(at)},
                    "$or": [{"released": true}, {"owner": {"$nin": live}}],
                },
            )
            .await?;
        }
        Ok(counts)
    }
}
