//! MongoStore's `conversations`: where each conversation stands (`dialog_state`, a pending action,
//! a handoff, its language).

use crate::domain::{DialogState, WaId};
use crate::domain::{Handoff, PendingAction};
use crate::store::mongo::codec::{
    conversation, date, handoff_reason_doc, handoff_request_doc, notice_failure_doc,
};
use crate::store::pool::{Find, Lane};
use crate::store::{
    Conversation, ConversationQuery, HandoffFilter, HandoffReason, HandoffRequest, HandoffStep,
    MongoStore, NoticeFailure, StoreResult,
};
use anyhow::Context as _;
use async_trait::async_trait;
use bson::{Bson, doc};
use chrono::{DateTime, Utc};

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
            doc! {
                "$set": {
                    "dialog_state": dialog_state.to_list(),
                    "state_entered_at": date(at),
                },
                "$max": {"updated_at": date(at)},
            },
        )
        .await
    }

    async fn list_conversations(
        &self,
        query: &ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        // The database filters, sorts and pages: only the page comes back (the health monitor
        // asks every tick, and an agency keeps every conversation it ever had).
        if query.limit == 0 {
            return Ok(Vec::new()); // MongoDB reads a limit of 0 as none
        }
        let mut filter = match &query.agent {
            Some(agent) => doc! {"dialog_state": agent.as_str()},
            None => doc! {},
        };
        if query.in_assistant {
            filter.insert("dialog_state.0", doc! {"$exists": true});
        }
        if let Some(since) = query.idle_since {
            // `last_activity() <= since`: neither is later (a missing one is not).
            let not_later = doc! {"$not": {"$gt": date(since)}};
            filter.insert("updated_at", not_later.clone());
            filter.insert("last_inbound_at", not_later);
        }
        match query.handoff {
            Some(HandoffFilter::Requested) => {
                filter.insert(HANDOFF_WAITING, true);
                filter.insert("handoff_requested", doc! {"$exists": true});
            }
            Some(HandoffFilter::ActiveAt(now)) => {
                filter.insert(HANDOFF_TAKEN, true);
                filter.insert("handoff.until", doc! {"$gt": date(now)});
            }
            None => {}
        }
        let page = Find::sorted(doc! {"updated_at": 1, "_id": 1})
            .skip(query.skip)
            .limit(query.limit);
        let docs = self
            .pool
            .find(Lane::Work, "conversations", filter, page)
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| {
                conversation(doc)
                    .map_err(|error| tracing::warn!("conversation skipped: {error}"))
                    .ok()
            })
            .collect())
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
                        "reset_by": by,
                        "reset_at": date(at),
                    },
                    "$max": {"updated_at": date(at)},
                    "$unset": {"pending_action": ""},
                },
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn set_handoff(&self, wa_id: &WaId, handoff: Option<&Handoff>) -> StoreResult<bool> {
        let update = match handoff {
            Some(handoff) => doc! {
                "$set": {
                    "handoff": {
                        "operator": &handoff.operator,
                        "since": date(handoff.since),
                        "until": date(handoff.until),
                    },
                    HANDOFF_TAKEN: true,
                },
                "$unset": {"handoff_requested": "", HANDOFF_WAITING: ""},
            },
            None => doc! {"$unset": {"handoff": "", HANDOFF_TAKEN: ""}},
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

    async fn request_handoff(
        &self,
        wa_id: &WaId,
        reason: &HandoffReason,
        first_notice_at: Option<DateTime<Utc>>,
    ) -> StoreResult<HandoffRequest> {
        // Read, then change: a conversation's turns run one at a time (its lease), and the
        // escalation writes other fields (`level`, `notified`).
        let current = self
            .conversation(wa_id)
            .await?
            .and_then(|c| c.handoff_requested);
        let Some(mut request) = current else {
            let request = HandoffRequest::first(reason.clone(), first_notice_at);
            self.upsert_conversation(
                Lane::Work,
                doc! {"_id": wa_id.as_str()},
                doc! {"$set": {
                    "handoff_requested": handoff_request_doc(&request),
                    HANDOFF_WAITING: true,
                }},
            )
            .await?;
            return Ok(request);
        };
        if request.add(reason.clone()) {
            self.pool
                .update_one(
                    Lane::Work,
                    "conversations",
                    doc! {"_id": wa_id.as_str(), "handoff_requested": {"$exists": true}},
                    doc! {
                        "$push": {"handoff_requested.reasons": handoff_reason_doc(reason)},
                        "$set": {"handoff_requested.reason": &request.reason},
                    },
                )
                .await?;
        }
        Ok(request)
    }

    async fn due_handoffs(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(WaId, HandoffRequest)>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "conversations",
                doc! {
                    HANDOFF_WAITING: true,
                    "handoff_requested.next_notice_at": {"$lte": date(now)},
                },
                Find {
                    sort: Some(doc! {"handoff_requested.next_notice_at": 1}),
                    limit: i64::try_from(limit).ok(),
                    ..Find::default()
                },
            )
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| {
                let c = conversation(doc)
                    .map_err(|error| tracing::warn!("conversation skipped: {error}"))
                    .ok()?;
                Some((c.wa_id, c.handoff_requested?))
            })
            .collect())
    }

    async fn advance_handoff(
        &self,
        wa_id: &WaId,
        requested_at: DateTime<Utc>,
        from_level: u8,
        step: &HandoffStep,
    ) -> StoreResult<bool> {
        let mut update = doc! {
            "$set": {"handoff_requested.level": i32::from(step.level)},
            "$push": {
                "handoff_requested.notified": {"$each": &step.told},
                "handoff_requested.failures": {
                    "$each": step.failed.iter().map(notice_failure_doc).collect::<Vec<_>>(),
                },
            },
        };
        match step.next_notice_at {
            Some(at) => {
                update
                    .get_document_mut("$set")
                    .expect("set above")
                    .insert("handoff_requested.next_notice_at", date(at));
            }
            None => {
                update.insert("$unset", doc! {"handoff_requested.next_notice_at": ""});
            }
        }
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "conversations",
                doc! {
                    "_id": wa_id.as_str(),
                    "handoff_requested.at": date(requested_at),
                    "handoff_requested.level": i32::from(from_level),
                },
                update,
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn handoff_notice_failed(
        &self,
        wa_id: &WaId,
        failure: &NoticeFailure,
    ) -> StoreResult<bool> {
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "conversations",
                doc! {"_id": wa_id.as_str(), "handoff_requested": {"$exists": true}},
                doc! {
                    "$push": {"handoff_requested.failures": notice_failure_doc(failure)},
                    "$set": {"handoff_requested.next_notice_at": date(failure.at)},
                },
            )
            .await?;
        Ok(result.matched_count > 0)
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
                    "agent": action.agent.as_str(),
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

/// `true` while `handoff_requested` is set: the escalation and the lists of those waiting for a
/// person ask for it by equality, which FerretDB hands to its database and MongoDB serves from
/// an index. FerretDB filters `$exists` and a range on a nested date itself, after reading every
/// conversation, and the escalation looks every few seconds.
pub(super) const HANDOFF_WAITING: &str = "handoff_waiting";

/// `true` while `handoff` is set (a person has the conversation, or had it and nobody wrote
/// since), for the lists of active handoffs, as [`HANDOFF_WAITING`] is for requests.
pub(super) const HANDOFF_TAKEN: &str = "handoff_taken";

/// Each mark and the field it stands beside, for the documents an older version wrote.
pub(super) const MARKS: [(&str, &str); 2] = [
    (HANDOFF_WAITING, "handoff_requested"),
    (HANDOFF_TAKEN, "handoff"),
];
