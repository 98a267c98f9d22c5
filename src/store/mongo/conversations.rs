//! MongoStore's `conversations`: where each conversation stands (`dialog_state`, a pending action,
//! a handoff, its language).

use crate::domain::DialogState;
use crate::domain::WaId;
use crate::domain::{Handoff, PendingAction};
use crate::store::pool::{Find, Lane};
use crate::store::*;
use anyhow::Context as _;
use async_trait::async_trait;
use bson::{Bson, doc};
use chrono::{DateTime, Utc};

use super::*;
use crate::store::ConversationStore;

#[async_trait]
impl ConversationStore for MongoStore {
    async fn conversation(&self, wa_id: &WaId) -> StoreResult<Option<Conversation>> {
        self.pool
            .find_one(
                Lane::Work,
                "conversations",
                doc! {"_id": wa_id.as_str()},
                Find::default(),
            )
            .await?
            .as_ref()
            .map(conversation)
            .transpose()
    }

    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &DialogState,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {"$set": {
                "dialog_state": dialog_state.to_list(),
                "state_entered_at": date(at),
                "updated_at": date(at),
            }},
        )
        .await
    }

    async fn list_conversations(
        &self,
        query: &ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        let mut filter = match &query.agent {
            Some(agent) => doc! {"dialog_state": agent},
            None => doc! {},
        };
        match query.handoff {
            Some(HandoffFilter::Requested) => {
                filter.insert("handoff_requested", doc! {"$exists": true});
            }
            Some(HandoffFilter::ActiveAt(now)) => {
                filter.insert("handoff.until", doc! {"$gt": date(now)});
            }
            None => {}
        }
        let docs = self
            .pool
            .find(Lane::Work, "conversations", filter, Find::default())
            .await?;
        let conversations = docs
            .iter()
            .filter_map(|doc| {
                conversation(doc)
                    .map_err(|error| tracing::warn!("conversation skipped: {error}"))
                    .ok()
            })
            .collect();
        Ok(page_of_conversations(conversations, query))
    }

    async fn reset_conversation(
        &self,
        wa_id: &WaId,
        by: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "conversations",
                doc! {"_id": wa_id.as_str()},
                doc! {
                    "$set": {
                        "dialog_state": Bson::Array(Vec::new()),
                        "state_entered_at": date(at),
                        "updated_at": date(at),
                        "reset_by": by,
                        "reset_at": date(at),
                    },
                    "$unset": {"pending_action": ""},
                },
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool> {
        let update = match handoff {
            Some(handoff) => doc! {
                "$set": {"handoff": {
                    "operator": &handoff.operator,
                    "since": date(handoff.since),
                    "until": date(handoff.until),
                }},
                "$unset": {"handoff_requested": ""},
            },
            None => doc! {"$unset": {"handoff": ""}},
        };
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "conversations",
                doc! {"_id": wa_id.as_str()},
                update,
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn request_handoff(&self, wa_id: &WaId, request: &HandoffRequest) -> StoreResult<()> {
        let requested = doc! {"at": date(request.at), "reason": &request.reason};
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {
                "$set": {"handoff_requested": requested},
            },
        )
        .await
    }

    async fn set_pending_action(
        &self,
        wa_id: &WaId,
        action: Option<&PendingAction>,
    ) -> StoreResult<()> {
        let update = match action {
            Some(action) => doc! {
                "$set": {"pending_action": {
                    "id": &action.id,
                    "tool": &action.tool,
                    "args": bson::to_bson(&action.args).context("tool arguments to BSON")?,
                    "summary": &action.summary,
                    "agent": &action.agent,
                    "created_at": date(action.created_at),
                }},
            },
            None => doc! {"$unset": {"pending_action": ""}},
        };
        self.upsert_conversation(Lane::Work, doc! {"_id": wa_id.as_str()}, update)
            .await
    }

    async fn set_conversation_location(
        &self,
        wa_id: &WaId,
        location: crate::domain::GeoPoint,
    ) -> StoreResult<()> {
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {
                "$set": {"location": {
                    "type": "Point",
                    "coordinates": [location.lon, location.lat],
                }},
            },
        )
        .await
    }

    async fn note_history_written(&self, wa_id: &WaId, at: DateTime<Utc>) -> StoreResult<()> {
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {"$set": {"history_at": date(at)}},
        )
        .await
    }

    async fn set_conversation_lang(&self, wa_id: &WaId, lang: &str) -> StoreResult<()> {
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {"$set": {"lang": lang}},
        )
        .await
    }
}
