//! The MongoDB store (the `mongodb` crate). Production runs MongoDB 6/7; tests run FerretDB over
//! the same wire protocol. Only single-document operations are used, so a replica set or a
//! sharded cluster scales it without transactions.
//!
//! Every call goes through the [`MongoPool`]'s gate: the client connects lazily (the service
//! starts, and `/readyz` says 503, while MongoDB is down), no more calls reach the driver than
//! it has connections, and a stalled database answers [`StoreError::Unavailable`], not a hang.

use crate::domain::{Content, Handoff, MessageRole, OutboxId, PendingAction, Role, ToolCall};
use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use bson::{Bson, Document, doc, oid::ObjectId};
use chrono::{DateTime, Utc};
use mongodb::IndexModel;
use mongodb::options::IndexOptions;

use super::MongoConfig;
use super::pool::{self, Adjust, DUPLICATE_KEY, Find, Lane, MongoPool, classify};
use super::*;
use crate::domain::CallOutcome;
use crate::domain::{GraphError, StatusUpdate, WaId, WaMessageId};

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

    /// Creates the indexes the queries rely on. Idempotent; run at start-up.
    pub async fn ensure_indexes(&self) -> StoreResult<()> {
        let unique = IndexOptions::builder().unique(true).build();
        let indexes: [(&str, Document, Option<IndexOptions>); 16] = [
            ("messages", doc! {"wa_id": 1, "seq": 1}, Some(unique)),
            // The cleanup job's deletes by age.
            ("messages", doc! {"at": 1}, None),
            ("llm_calls", doc! {"at": 1}, None),
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
        ];
        for (collection, keys, options) in indexes {
            let model = IndexModel::builder().keys(keys).options(options).build();
            let collection = collection.to_owned();
            self.pool
                .run(Lane::Work, move |db| async move {
                    db.collection::<Document>(&collection)
                        .create_index(model)
                        .await
                })
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
            .run(Lane::Work, |db| async move { db.drop().await })
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

fn date(at: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(at)
}

fn opt_date(at: Option<DateTime<Utc>>) -> Bson {
    at.map_or(Bson::Null, |at| Bson::DateTime(date(at)))
}

fn opt_str(value: &Option<String>) -> Bson {
    value
        .as_ref()
        .map_or(Bson::Null, |s| Bson::String(s.clone()))
}

/// Reading documents operators may have edited by hand: missing or mistyped fields read as absent.
struct Fields<'a>(&'a Document);

impl Fields<'_> {
    fn str(&self, key: &str) -> Option<String> {
        self.0.get_str(key).ok().map(str::to_owned)
    }

    fn date(&self, key: &str) -> Option<DateTime<Utc>> {
        self.0.get_datetime(key).ok().map(|d| d.to_chrono())
    }

    fn int(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            Bson::Int32(i) => Some(i64::from(*i)),
            Bson::Int64(i) => Some(*i),
            Bson::Double(f) => Some(*f as i64),
            _ => None,
        }
    }

    fn required_str(&self, key: &str) -> StoreResult<String> {
        self.str(key).ok_or_else(|| {
            anyhow::anyhow!("document {:?} has no string `{key}`", self.0.get("_id")).into()
        })
    }

    fn wa_id(&self, key: &str) -> StoreResult<WaId> {
        WaId::parse(&self.required_str(key)?).map_err(|e| anyhow::anyhow!(e).into())
    }
}

fn json_to_bson(raw: &str) -> Bson {
    serde_json::from_str::<serde_json::Value>(raw)
        .ok()
        .filter(|value| depth(value) <= MAX_DOCUMENT_DEPTH)
        .and_then(|value| bson::to_bson(&value).ok())
        .unwrap_or_else(|| Bson::String(raw.to_owned()))
}

/// MongoDB refuses documents nested more than 100 levels; a payload deeper than this (with
/// room for the inbox document around it) is kept as text, or one odd field would make the
/// whole webhook fail on every retry.
const MAX_DOCUMENT_DEPTH: usize = 90;

/// Nesting depth of a JSON value (serde_json parses at most 128 levels, so recursion is safe).
fn depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn bson_to_json(value: Option<&Bson>) -> String {
    match value {
        Some(Bson::String(s)) => s.clone(),
        Some(other) => other.clone().into_relaxed_extjson().to_string(),
        None => "null".to_owned(),
    }
}

/// A `conversations` document.
fn conversation(doc: &Document) -> StoreResult<Conversation> {
    let f = Fields(doc);
    let dialog_state = match doc.get("dialog_state") {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(|b| b.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    Ok(Conversation {
        wa_id: f.wa_id("_id")?,
        phone: f.str("wa_id"),
        user_id: f.str("user_id"),
        dialog_state,
        lang: f.str("lang"),
        last_inbound_at: f.date("last_inbound_at"),
        updated_at: f.date("updated_at"),
        state_entered_at: f.date("state_entered_at"),
        pending_action: doc
            .get_document("pending_action")
            .ok()
            .and_then(pending_action),
        location: doc.get_document("location").ok().and_then(geo_point),
        reset_by: f.str("reset_by"),
        reset_at: f.date("reset_at"),
        history_at: f.date("history_at"),
        role: f.str("role").map(|r| Role::parse(&r)),
        role_source: f.str("role_source").and_then(|s| RoleSource::parse(&s)),
        handoff: doc.get_document("handoff").ok().and_then(|doc| {
            let f = Fields(doc);
            Some(Handoff {
                operator: f.str("operator").unwrap_or_default(),
                since: f.date("since")?,
                until: f.date("until")?,
            })
        }),
        handoff_requested: doc.get_document("handoff_requested").ok().and_then(|doc| {
            let f = Fields(doc);
            Some(HandoffRequest {
                at: f.date("at")?,
                reason: f.str("reason").unwrap_or_default(),
            })
        }),
    })
}

/// A stored outbox `template`.
fn template(doc: &Document) -> Option<Template> {
    let f = Fields(doc);
    Some(Template {
        name: f.str("name")?,
        language: f.str("language")?,
        parameters: doc
            .get_array("parameters")
            .map(|items| {
                items
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// A stored `pending_action`; `None` when it was damaged by hand (then it is simply dropped).
fn pending_action(doc: &Document) -> Option<PendingAction> {
    let f = Fields(doc);
    Some(PendingAction {
        id: f.str("id").unwrap_or_default(),
        tool: f.str("tool")?,
        args: doc
            .get("args")
            .and_then(|args| serde_json::to_value(args.clone().into_relaxed_extjson()).ok())
            .unwrap_or(serde_json::Value::Null),
        summary: f.str("summary").unwrap_or_default(),
        agent: f.str("agent").unwrap_or_default(),
        created_at: f.date("created_at")?,
    })
}

/// GeoJSON `{"type": "Point", "coordinates": [lon, lat]}`.
fn geo_point(doc: &Document) -> Option<crate::domain::GeoPoint> {
    let coordinates = doc.get_array("coordinates").ok()?;
    let number = |b: &Bson| match b {
        Bson::Double(x) => Some(*x),
        Bson::Int32(x) => Some(f64::from(*x)),
        Bson::Int64(x) => Some(*x as f64),
        _ => None,
    };
    Some(crate::domain::GeoPoint {
        lon: number(coordinates.first()?)?,
        lat: number(coordinates.get(1)?)?,
    })
}

fn llm_call(doc: &Document) -> StoreResult<LlmCall> {
    let f = Fields(doc);
    let count = |key: &str| f.int(key).and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
    let outcome = f.required_str("outcome")?;
    Ok(LlmCall {
        conversation: f.str("wa_id"),
        agent: f.required_str("agent")?,
        provider: f.required_str("provider")?,
        model: f.required_str("model")?,
        outcome: CallOutcome::parse(&outcome)
            .ok_or_else(|| anyhow::anyhow!("llm_calls: unknown outcome `{outcome}`"))?,
        input_tokens: count("input_tokens"),
        output_tokens: count("output_tokens"),
        latency: Duration::from_millis(count("latency_ms")),
        error: f.str("error"),
        at: f.date("at").unwrap_or_default(),
    })
}

fn inbox_doc(entry: &InboxEntry) -> Document {
    doc! {
        "_id": entry.wamid.as_str(),
        "wa_id": entry.wa_id.as_str(),
        "phone_number_id": &entry.phone_number_id,
        "type": &entry.kind,
        "text": opt_str(&entry.text),
        "payload": json_to_bson(&entry.payload),
        "content": bson::to_bson(&entry.content).unwrap_or(Bson::Null),
        "context_id": opt_str(&entry.context_id),
        "sent_at": opt_date(entry.sent_at),
        "status": entry.status.as_str(),
        "received_at": date(entry.received_at),
        "attempts": i64::from(entry.attempts),
    }
}

fn inbox_entry(doc: &Document) -> StoreResult<InboxEntry> {
    let f = Fields(doc);
    Ok(InboxEntry {
        wamid: WaMessageId::from(f.required_str("_id")?),
        wa_id: f.wa_id("wa_id")?,
        phone_number_id: f.str("phone_number_id").unwrap_or_default(),
        kind: f.str("type").unwrap_or_default(),
        text: f.str("text"),
        payload: bson_to_json(doc.get("payload")),
        // Entries stored before `content` existed read as `Other`: their words are in `text`.
        content: doc
            .get("content")
            .and_then(|content| bson::from_bson(content.clone()).ok())
            .unwrap_or(Content::Other),
        context_id: f.str("context_id"),
        sent_at: f.date("sent_at"),
        status: f
            .str("status")
            .and_then(|s| InboxStatus::parse(&s))
            .unwrap_or(InboxStatus::Pending),
        received_at: f.date("received_at").unwrap_or_default(),
        attempts: f.int("attempts").unwrap_or(0).try_into().unwrap_or(0),
    })
}

fn message_doc(seq: i64, m: &NewMessage) -> StoreResult<Document> {
    let tool_calls = bson::to_bson(&m.tool_calls).context("tool calls to BSON")?;
    let mut doc = doc! {
        "wa_id": m.wa_id.as_str(),
        "seq": seq,
        "role": m.role.as_str(),
        "content": &m.content,
        "agent": opt_str(&m.agent),
        "tool_calls": tool_calls,
        "tool_call_id": opt_str(&m.tool_call_id),
        "wamids": m.wamids.iter().map(|w| w.as_str()).collect::<Vec<_>>(),
        "at": date(m.at),
    };
    if !m.attachments.is_empty() {
        let attachments = bson::to_bson(&m.attachments).context("attachments to BSON")?;
        doc.insert("attachments", attachments);
    }
    Ok(doc)
}

fn stored_message(doc: &Document) -> StoreResult<StoredMessage> {
    let f = Fields(doc);
    let tool_calls = match doc.get("tool_calls") {
        Some(Bson::Array(calls)) => calls
            .iter()
            .map(|c| bson::from_bson::<ToolCall>(c.clone()))
            .collect::<Result<_, _>>()
            .context("tool_calls in messages")?,
        _ => Vec::new(),
    };
    Ok(StoredMessage {
        seq: f.int("seq").unwrap_or_default(),
        message: NewMessage {
            wa_id: f.wa_id("wa_id")?,
            role: f
                .str("role")
                .and_then(|r| MessageRole::parse(&r))
                .ok_or_else(|| anyhow::anyhow!("message without a known role"))?,
            content: f.str("content").unwrap_or_default(),
            agent: f.str("agent"),
            tool_calls,
            tool_call_id: f.str("tool_call_id"),
            wamids: match doc.get("wamids") {
                Some(Bson::Array(ids)) => ids
                    .iter()
                    .filter_map(|id| id.as_str().map(|id| WaMessageId::from(id.to_owned())))
                    .collect(),
                _ => Vec::new(),
            },
            attachments: match doc.get("attachments") {
                // One this version cannot read is dropped, never the message.
                Some(Bson::Array(items)) => items
                    .iter()
                    .filter_map(|a| bson::from_bson::<Attachment>(a.clone()).ok())
                    .collect(),
                _ => Vec::new(),
            },
            at: f.date("at").unwrap_or_default(),
        },
    })
}

fn outbox_entry(doc: &Document) -> StoreResult<OutboxEntry> {
    let f = Fields(doc);
    let id = doc
        .get_object_id("_id")
        .map(|id| id.to_hex())
        .or_else(|_| f.required_str("_id"))?;
    let error = match doc.get("error") {
        Some(Bson::Document(e)) => bson::from_document::<GraphError>(e.clone()).ok(),
        _ => None,
    };
    let count = |key: &str| f.int(key).and_then(|n| u32::try_from(n).ok());
    let buttons = match doc.get("buttons") {
        Some(Bson::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Bson::Document(button) => Some(ReplyButton::new(
                    button.get_str("id").ok()?,
                    button.get_str("title").ok()?,
                )),
                // Written before buttons had ids of their own: a title, sent as `btn_<i>`.
                Bson::String(title) => Some(ReplyButton::new(format!("btn_{i}"), title)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(OutboxEntry {
        id: OutboxId(id),
        wa_id: f.wa_id("wa_id")?,
        in_reply_to: f.str("in_reply_to").map(WaMessageId::from),
        phone_number_id: f.str("phone_number_id"),
        body: f.str("body").unwrap_or_default(),
        buttons,
        template: doc.get_document("template").ok().and_then(template),
        media: doc
            .get("media")
            .and_then(|m| bson::from_bson::<Media>(m.clone()).ok()),
        part: count("part").unwrap_or(0),
        parts: count("parts").unwrap_or(1),
        status: f
            .str("status")
            .and_then(|s| OutboxStatus::parse(&s))
            .unwrap_or(OutboxStatus::Queued),
        next_attempt_at: f.date("next_attempt_at"),
        wamid: f.str("wamid").map(WaMessageId::from),
        error,
        attempts: f.int("attempts").unwrap_or(0).try_into().unwrap_or(0),
        at: f.date("at").unwrap_or_default(),
        sending_at: f.date("sending_at"),
        status_at: f.date("status_at"),
    })
}

fn outbox_id(id: &OutboxId) -> Bson {
    ObjectId::parse_str(&id.0).map_or_else(|_| Bson::String(id.0.clone()), Bson::ObjectId)
}

#[async_trait]
impl Store for MongoStore {
    fn pressure(&self) -> Option<Pressure> {
        Some(self.pool.pressure())
    }

    async fn ping(&self) -> StoreResult<()> {
        self.pool
            .run(Lane::Control, |db| async move {
                db.run_command(doc! {"ping": 1}).await
            })
            .await
            .map(drop)
    }

    async fn record_contact(&self, contact: &ContactSeen) -> StoreResult<()> {
        let key = contact.wa_id.as_str();
        let seen = date(contact.seen_at);
        let mut user_set = doc! {};
        for (field, value) in [("name", &contact.name), ("username", &contact.username)] {
            if let Some(value) = value {
                user_set.insert(field, value);
            }
        }
        let mut user_update = doc! {"$setOnInsert": {"role": Role::Prospect.as_str()}};
        if !user_set.is_empty() {
            user_update.insert("$set", user_set);
        }
        self.pool
            .upsert_one(Lane::Ingress, "users", doc! {"_id": key}, user_update)
            .await?;

        let mut conversation_set = doc! {"updated_at": seen};
        for (field, value) in [("wa_id", &contact.phone), ("user_id", &contact.user_id)] {
            if let Some(value) = value {
                conversation_set.insert(field, value);
            }
        }
        self.upsert_conversation(
            Lane::Ingress,
            doc! {"_id": key},
            doc! {
                "$set": conversation_set,
                "$max": {"last_inbound_at": seen},
            },
        )
        .await
    }

    async fn insert_inbox(&self, messages: &[InboxEntry]) -> StoreResult<InboxInsert> {
        if messages.is_empty() {
            return Ok(InboxInsert::default());
        }
        let docs: Vec<Document> = messages.iter().map(inbox_doc).collect();
        let result = self
            .pool
            .run_raw(Lane::Ingress, move |db| async move {
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

    async fn insert_llm_calls(&self, calls: &[LlmCall]) -> StoreResult<()> {
        if calls.is_empty() {
            return Ok(());
        }
        let docs = calls
            .iter()
            .map(|call| {
                let mut doc = doc! {
                    "agent": &call.agent,
                    "provider": &call.provider,
                    "model": &call.model,
                    "outcome": call.outcome.as_str(),
                    "input_tokens": i64::try_from(call.input_tokens).unwrap_or(i64::MAX),
                    "output_tokens": i64::try_from(call.output_tokens).unwrap_or(i64::MAX),
                    "latency_ms": i64::try_from(call.latency.as_millis()).unwrap_or(i64::MAX),
                    "at": date(call.at),
                };
                if let Some(conversation) = &call.conversation {
                    doc.insert("wa_id", conversation);
                }
                if let Some(error) = &call.error {
                    doc.insert("error", error);
                }
                doc
            })
            .collect();
        self.pool.insert_many(Lane::Work, "llm_calls", docs).await
    }

    async fn llm_calls(&self, conversation: &str, limit: usize) -> StoreResult<Vec<LlmCall>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "llm_calls",
                doc! {"wa_id": conversation},
                Find::sorted(doc! {"at": -1, "_id": -1}).limit(limit),
            )
            .await?;
        docs.iter().rev().map(llm_call).collect()
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
        Ok(ForgetCounts {
            inbox,
            messages: delete("messages", doc! {"wa_id": key}).await?,
            outbox: delete("outbox", doc! {"wa_id": key}).await?,
            llm_calls: delete("llm_calls", doc! {"wa_id": key}).await?,
            leases: delete("leases", doc! {"wa_id": key}).await?,
            webhook_rejects: delete("webhook_rejects", doc! {"raw": {"$regex": &mentions}}).await?,
            events: delete("events", doc! {"wa_id": key}).await?
                + delete("event_claims", doc! {"event_id": {"$regex": &mentions}}).await?,
            users: delete("users", doc! {"_id": key}).await?,
            conversations: delete("conversations", doc! {"_id": key}).await?,
        })
    }

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
                Find::sorted(doc! {"at": -1, "_id": -1}).limit(query.limit),
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

    async fn llm_tokens_since(&self, conversation: &str, since: DateTime<Utc>) -> StoreResult<u64> {
        // Summed here rather than by `$group`: a day's calls of one conversation are few, and
        // every MongoDB-compatible server answers a plain find.
        let docs = self
            .pool
            .find(
                Lane::Work,
                "llm_calls",
                doc! {"wa_id": conversation, "at": {"$gte": date(since)}},
                Find::default().projection(doc! {"_id": 0, "input_tokens": 1, "output_tokens": 1}),
            )
            .await?;
        Ok(docs
            .iter()
            .map(|d| {
                let f = Fields(d);
                let tokens =
                    f.int("input_tokens").unwrap_or(0) + f.int("output_tokens").unwrap_or(0);
                u64::try_from(tokens).unwrap_or(0)
            })
            .sum())
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

    async fn user(&self, wa_id: &WaId) -> StoreResult<Option<User>> {
        let Some(doc) = self
            .pool
            .find_one(
                Lane::Work,
                "users",
                doc! {"_id": wa_id.as_str()},
                Find::default(),
            )
            .await?
        else {
            return Ok(None);
        };
        let f = Fields(&doc);
        Ok(Some(User {
            wa_id: wa_id.clone(),
            name: f.str("name"),
            username: f.str("username"),
            role: f.str("role").map_or(Role::Prospect, |r| Role::parse(&r)),
            lang: f.str("lang"),
            role_source: f.str("role_source").and_then(|s| RoleSource::parse(&s)),
            role_set_by: f.str("role_set_by"),
            role_set_at: f.date("role_set_at"),
        }))
    }

    async fn assign_role(&self, wa_id: &WaId, assignment: &RoleAssignment) -> StoreResult<()> {
        let (role, source) = (assignment.role.as_str(), assignment.source.as_str());
        self.pool
            .upsert_one(
                Lane::Work,
                "users",
                doc! {"_id": wa_id.as_str()},
                doc! {"$set": {
                    "role": role,
                    "role_source": source,
                    "role_set_by": &assignment.by,
                    "role_set_at": date(assignment.at),
                }},
            )
            .await?;
        // The conversation carries a copy, so turns see the change at once.
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {"$set": {"role": role, "role_source": source}},
        )
        .await
    }

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

    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage> {
        // Next seq = last + 1, claimed by the insert itself: the unique `{wa_id, seq}` index
        // lets exactly one writer have each number. (A read-modify-write counter is not atomic
        // on every MongoDB-compatible server; a unique insert is.)
        for _ in 0..MAX_INSERT_RACES {
            let last = self
                .pool
                .find_one(
                    Lane::Work,
                    "messages",
                    doc! {"wa_id": message.wa_id.as_str()},
                    Find::sorted(doc! {"seq": -1}).projection(doc! {"seq": 1}),
                )
                .await?;
            let seq = last.and_then(|d| Fields(&d).int("seq")).unwrap_or(0) + 1;
            if self
                .pool
                .insert_unique(Lane::Work, "messages", message_doc(seq, &message)?)
                .await?
            {
                return Ok(StoredMessage { seq, message });
            }
        }
        Err(anyhow::anyhow!("{MAX_INSERT_RACES} concurrent writers took every next seq").into())
    }

    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "messages",
                doc! {"wa_id": wa_id.as_str()},
                Find::sorted(doc! {"seq": -1}).limit(limit),
            )
            .await?;
        docs.iter().rev().map(stored_message).collect()
    }

    async fn open_inbox(&self, wa_id: &WaId) -> StoreResult<Vec<InboxEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "inbox",
                doc! {"wa_id": wa_id.as_str(), "status": {"$in": &OPEN_INBOX[..]}},
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
            .find(
                Lane::Work,
                "inbox",
                doc! {"status": {"$in": &OPEN_INBOX[..]}},
                Find::sorted(doc! {"received_at": 1, "_id": 1})
                    .projection(doc! {"wa_id": 1})
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
        self.pool
            .update_many(Lane::Work, "inbox", by_ids(wamids), update)
            .await
            .map(drop)
    }

    async fn count_attempt(&self, wamids: &[WaMessageId]) -> StoreResult<()> {
        self.pool
            .update_many(
                Lane::Work,
                "inbox",
                by_ids(wamids),
                doc! {"$inc": {"attempts": 1_i64}},
            )
            .await
            .map(drop)
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

    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        let Some(first) = messages.first() else {
            return Ok(Vec::new());
        };
        let wa_id = first.wa_id.clone();
        let mut after = after;
        // The numbers after `after` are claimed by the insert itself: the unique
        // `{wa_id, seq}` index lets exactly one writer have each. Under the conversation's lease
        // nobody else writes; a race is a takeover's, and is retried after the real last.
        for _ in 0..MAX_INSERT_RACES {
            let stored: Vec<StoredMessage> = messages
                .iter()
                .zip(after + 1..)
                .map(|(message, seq)| StoredMessage {
                    seq,
                    message: message.clone(),
                })
                .collect();
            let docs = stored
                .iter()
                .map(|m| message_doc(m.seq, &m.message))
                .collect::<StoreResult<Vec<Document>>>()?;
            let inserted = self
                .pool
                .run_raw(Lane::Work, move |db| async move {
                    db.collection::<Document>("messages")
                        .insert_many(docs)
                        .await
                })
                .await?;
            match inserted {
                Ok(_) => return Ok(stored),
                Err(error) if pool::is_duplicate_key(&error) => {
                    let last = self
                        .pool
                        .find_one(
                            Lane::Work,
                            "messages",
                            doc! {"wa_id": wa_id.as_str()},
                            Find::sorted(doc! {"seq": -1}).projection(doc! {"seq": 1}),
                        )
                        .await?;
                    let last = last.and_then(|d| Fields(&d).int("seq")).unwrap_or(0);
                    // Part of the batch may have landed (an ordered insert stops at the
                    // first duplicate): only what lies beyond the real last is ours to write.
                    if last <= after {
                        return Err(anyhow::anyhow!(
                            "messages of {} clash below seq {after}",
                            wa_id.masked()
                        )
                        .into());
                    }
                    after = last;
                }
                Err(error) => return Err(classify(error)),
            }
        }
        Err(anyhow::anyhow!("{MAX_INSERT_RACES} concurrent writers took every next seq").into())
    }

    async fn set_dialog_state(
        &self,
        wa_id: &WaId,
        dialog_state: &[String],
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.upsert_conversation(
            Lane::Work,
            doc! {"_id": wa_id.as_str()},
            doc! {"$set": {
                "dialog_state": dialog_state,
                "state_entered_at": date(at),
                "updated_at": date(at),
            }},
        )
        .await
    }

    async fn inbox_backlog(&self) -> StoreResult<InboxBacklog> {
        let open = self
            .pool
            .count(
                Lane::Work,
                "inbox",
                doc! {"status": {"$in": &OPEN_INBOX[..]}},
            )
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
            .find_one(
                Lane::Work,
                "inbox",
                doc! {"status": {"$in": &OPEN_INBOX[..]}},
                Find::sorted(doc! {"received_at": 1}),
            )
            .await?;
        Ok(InboxBacklog {
            open,
            oldest_received_at: oldest.as_ref().and_then(|d| Fields(d).date("received_at")),
            failed,
        })
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

    async fn server_time(&self) -> StoreResult<DateTime<Utc>> {
        let hello = self
            .pool
            .run(Lane::Control, |db| async move {
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
            .run(Lane::Control, move |db| async move {
                db.collection::<Document>("instances")
                    .find_one_and_update(filter, update)
                    .upsert(take_over)
                    .return_document(mongodb::options::ReturnDocument::After)
                    .await
            })
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

    async fn insert_outbox(&self, entries: &[NewOutbox]) -> StoreResult<Vec<OutboxId>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let entries: Vec<OutboxEntry> = entries
            .iter()
            .map(|entry| OutboxEntry::queued(OutboxId(ObjectId::new().to_hex()), entry))
            .collect();
        let docs = entries.iter().map(outbox_doc).collect();
        // One ordered write: the parts of a reply are queued together.
        self.pool.insert_many(Lane::Work, "outbox", docs).await?;
        Ok(entries.into_iter().map(|entry| entry.id).collect())
    }

    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()> {
        let mut rest: &[OutboxEntry] = parts;
        while !rest.is_empty() {
            let docs: Vec<Document> = rest.iter().map(outbox_doc).collect();
            let inserted = self
                .pool
                .run_raw(Lane::Work, move |db| async move {
                    db.collection::<Document>("outbox").insert_many(docs).await
                })
                .await?;
            let error = match inserted {
                Ok(_) => return Ok(()),
                Err(error) => error,
            };
            // An ordered insert stops at the first part already there: a status webhook's
            // record of it, to complete, or an earlier record, to leave.
            let conflict = match &*error.kind {
                mongodb::error::ErrorKind::InsertMany(failure)
                    if pool::is_duplicate_key(&error) =>
                {
                    failure
                        .write_errors
                        .as_deref()
                        .and_then(|errors| errors.first())
                        .map(|e| e.index)
                }
                _ => None,
            };
            let Some(index) = conflict.filter(|i| *i < rest.len()) else {
                return Err(classify(error));
            };
            self.complete_early(&rest[index]).await?;
            rest = &rest[index + 1..];
        }
        Ok(())
    }

    async fn outbox_entry(&self, id: &OutboxId) -> StoreResult<Option<OutboxEntry>> {
        self.pool
            .find_one(
                Lane::Work,
                "outbox",
                doc! {"_id": outbox_id(id)},
                Find::default(),
            )
            .await?
            .as_ref()
            .map(outbox_entry)
            .transpose()
    }

    async fn update_outbox(&self, id: &OutboxId, update: &OutboxUpdate) -> StoreResult<bool> {
        let filter = doc! {"_id": outbox_id(id)};
        let unsent = statuses(&[OutboxStatus::Queued, OutboxStatus::Sending]);
        let (condition, change) = match update {
            OutboxUpdate::Sending { at, resend_at } => (
                doc! {"status": {"$in": &unsent}},
                doc! {
                    "$set": {
                        "status": OutboxStatus::Sending.as_str(),
                        "sending_at": date(*at),
                        "next_attempt_at": date(*resend_at),
                    },
                    "$inc": {"attempts": 1_i64},
                },
            ),
            OutboxUpdate::Sent { wamid } => {
                let wamid = wamid.as_ref().map(|w| w.as_str());
                let mut conditional = filter.clone();
                conditional.insert(
                    "status",
                    doc! {"$in": statuses(OutboxStatus::Sent.replaces())},
                );
                let result = self
                    .pool
                    .update_one(
                        Lane::Work,
                        "outbox",
                        conditional,
                        doc! {"$set": {
                            "status": OutboxStatus::Sent.as_str(),
                            "wamid": wamid,
                            "next_attempt_at": Bson::Null,
                        }},
                    )
                    .await?;
                if result.matched_count > 0 {
                    return Ok(true);
                }
                // A status webhook got there first (or it is gone): the id only, the status
                // as the webhook left it.
                let result = self
                    .pool
                    .update_one(
                        Lane::Work,
                        "outbox",
                        filter,
                        doc! {"$set": {"wamid": wamid, "next_attempt_at": Bson::Null}},
                    )
                    .await?;
                if result.matched_count == 0 {
                    return Err(anyhow::anyhow!("no outbox entry {}", id.0).into());
                }
                return Ok(true);
            }
            OutboxUpdate::Retry { at, error } => (
                doc! {"status": {"$in": &unsent}},
                doc! {"$set": {
                    "status": OutboxStatus::Queued.as_str(),
                    "next_attempt_at": date(*at),
                    "error": error.as_ref().map(bson::to_bson).transpose().context("Graph error to BSON")?,
                }},
            ),
            OutboxUpdate::Failed { error } => (
                doc! {"status": {"$in": &unsent}},
                doc! {"$set": {
                    "status": OutboxStatus::Failed.as_str(),
                    "error": bson::to_bson(error).context("Graph error to BSON")?,
                }},
            ),
        };
        let mut conditional = filter.clone();
        conditional.extend(condition);
        let result = self
            .pool
            .update_one(Lane::Work, "outbox", conditional, change)
            .await?;
        if result.matched_count == 0 {
            let exists = self.pool.count(Lane::Work, "outbox", filter).await?;
            if exists == 0 {
                return Err(anyhow::anyhow!("no outbox entry {}", id.0).into());
            }
        }
        Ok(result.matched_count > 0)
    }

    async fn unsent_outbox(&self, wa_id: &WaId) -> StoreResult<Vec<OutboxEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "outbox",
                doc! {
                    "wa_id": wa_id.as_str(),
                    "status": {"$in": statuses(&[OutboxStatus::Queued, OutboxStatus::Sending])},
                },
                Find::sorted(doc! {"at": 1, "part": 1, "_id": 1}),
            )
            .await?;
        docs.iter().map(outbox_entry).collect()
    }

    async fn conversations_with_unsent_outbox(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "outbox",
                doc! {
                    "status": {"$in": statuses(&[OutboxStatus::Queued, OutboxStatus::Sending])},
                    "$or": [
                        {"next_attempt_at": Bson::Null},
                        {"next_attempt_at": {"$lte": date(now)}},
                    ],
                },
                Find::sorted(doc! {"at": 1, "_id": 1})
                    .projection(doc! {"wa_id": 1})
                    .limit(limit.saturating_mul(4)),
            )
            .await?;
        let keys = docs
            .iter()
            .map(|doc| Fields(doc).wa_id("wa_id"))
            .collect::<StoreResult<Vec<WaId>>>()?;
        Ok(first_distinct(keys, limit))
    }

    async fn outbox_by_wamid(&self, wamid: &WaMessageId) -> StoreResult<Option<OutboxEntry>> {
        self.pool
            .find_one(
                Lane::Work,
                "outbox",
                doc! {"wamid": wamid.as_str()},
                Find::default(),
            )
            .await?
            .as_ref()
            .map(outbox_entry)
            .transpose()
    }

    async fn outbox_in_reply_to(&self, wamid: &WaMessageId) -> StoreResult<Vec<OutboxEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "outbox",
                doc! {"in_reply_to": wamid.as_str()},
                Find::sorted(doc! {"at": 1, "part": 1, "_id": 1}),
            )
            .await?;
        docs.iter().map(outbox_entry).collect()
    }

    async fn apply_status(&self, update: &StatusUpdate) -> StoreResult<StatusOutcome> {
        let Some(status) = OutboxStatus::parse(&update.status) else {
            return Ok(StatusOutcome::Unrecognised);
        };
        let mut set = doc! {"status": status.as_str(), "status_at": opt_date(update.at)};
        if status == OutboxStatus::Failed
            && let Some(error) = update.errors.first()
        {
            set.insert(
                "error",
                bson::to_bson(error).context("Graph error to BSON")?,
            );
        }
        let result = self
            .pool
            .update_one(
                Lane::Ingress,
                "outbox",
                doc! {
                    "wamid": update.wamid.as_str(),
                    // A document written by hand without a status counts as queued.
                    "$or": [
                        {"status": {"$in": statuses(status.replaces())}},
                        {"status": {"$exists": false}},
                    ],
                },
                doc! {"$set": set.clone()},
            )
            .await?;
        if result.matched_count > 0 {
            return Ok(StatusOutcome::Applied);
        }
        // Not by its wamid: the part the callback data names, if its wamid is not recorded.
        if let Some(id) = update
            .callback_data
            .as_deref()
            .and_then(OutboxId::from_callback_data)
            && let Ok(oid) = ObjectId::parse_str(&id.0)
        {
            set.insert("wamid", update.wamid.as_str());
            set.insert("next_attempt_at", Bson::Null);
            let result = self
                .pool
                .update_one(
                    Lane::Ingress,
                    "outbox",
                    doc! {
                        "_id": oid,
                        "wamid": Bson::Null,
                        "status": {"$in": statuses(status.replaces())},
                    },
                    doc! {"$set": set.clone()},
                )
                .await?;
            if result.matched_count > 0 {
                return Ok(StatusOutcome::Reconciled);
            }
        }
        let known = self
            .pool
            .find_one(
                Lane::Ingress,
                "outbox",
                doc! {"wamid": update.wamid.as_str()},
                Find::default().projection(doc! {"_id": 1}),
            )
            .await?;
        if known.is_some() {
            return Ok(StatusOutcome::Stale);
        }
        // Ours, but not recorded yet (its sender records a reply once the Graph API answered,
        // or died first): kept under the part's id for its record to complete, so a part whose
        // sender died is known to have gone out.
        if let (Some(id), Some(recipient)) = (
            update
                .callback_data
                .as_deref()
                .and_then(OutboxId::from_callback_data),
            update
                .recipient_id
                .as_deref()
                .and_then(|r| WaId::parse(r).ok()),
        ) && let Ok(oid) = ObjectId::parse_str(&id.0)
        {
            set.insert("_id", oid);
            set.insert("wa_id", recipient.as_str());
            set.insert("early", true);
            if self
                .pool
                .insert_unique(Lane::Ingress, "outbox", set)
                .await?
            {
                return Ok(StatusOutcome::Early);
            }
            // Recorded, with another wamid or past this status: not this message's.
            return Ok(StatusOutcome::Unknown);
        }
        Ok(StatusOutcome::Unknown)
    }
}

/// The filter naming inbox entries by id: a lone `_id` where it can (the filter every
/// MongoDB-compatible server looks up by index).
fn by_ids(wamids: &[WaMessageId]) -> Document {
    match wamids {
        [one] => doc! {"_id": one.as_str()},
        many => doc! {"_id": {"$in": many.iter().map(|w| w.as_str()).collect::<Vec<_>>()}},
    }
}

/// An `outbox` document.
fn outbox_doc(entry: &OutboxEntry) -> Document {
    let mut doc = doc! {
        "_id": outbox_id(&entry.id),
        "wa_id": entry.wa_id.as_str(),
        "in_reply_to": entry.in_reply_to.as_ref().map(|w| w.as_str()),
        "phone_number_id": opt_str(&entry.phone_number_id),
        "body": &entry.body,
        "buttons": entry.buttons.iter().map(|b| doc! {"id": &b.id, "title": &b.title}).collect::<Vec<_>>(),
        "template": entry.template.as_ref().map(|t| doc! {
            "name": &t.name,
            "language": &t.language,
            "parameters": &t.parameters,
        }),
        "part": i64::from(entry.part),
        "parts": i64::from(entry.parts),
        "status": entry.status.as_str(),
        "attempts": i64::from(entry.attempts),
        "at": date(entry.at),
    };
    if let Some(media) = entry.media.as_ref().and_then(|m| bson::to_bson(m).ok()) {
        doc.insert("media", media);
    }
    if let Some(at) = entry.sending_at {
        doc.insert("sending_at", date(at));
    }
    if let Some(at) = entry.next_attempt_at {
        doc.insert("next_attempt_at", date(at));
    }
    if let Some(wamid) = &entry.wamid {
        doc.insert("wamid", wamid.as_str());
    }
    if let Some(at) = entry.status_at {
        doc.insert("status_at", date(at));
    }
    if let Some(error) = entry.error.as_ref().and_then(|e| bson::to_bson(e).ok()) {
        doc.insert("error", error);
    }
    doc
}

fn statuses(list: &[OutboxStatus]) -> Vec<&'static str> {
    list.iter().map(|s| s.as_str()).collect()
}

/// An `events` document.
fn event_doc(event: &Event) -> StoreResult<Document> {
    let Bson::Document(typed) = bson::to_bson(&event.event).context("event to BSON")? else {
        return Err(StoreError::Unexpected(anyhow::anyhow!(
            "an event is not a document"
        )));
    };
    let mut doc = doc! {
        "_id": &event.id,
        "wa_id": event.wa_id.as_str(),
        "at": date(event.at),
        "status": event.status.as_str(),
        "attempts": i64::from(event.attempts),
    };
    doc.extend(typed);
    if let Some(at) = event.next_attempt_at {
        doc.insert("next_attempt_at", date(at));
    }
    if let Some(error) = &event.error {
        doc.insert("error", error);
    }
    Ok(doc)
}

fn event(doc: &Document) -> StoreResult<Event> {
    let f = Fields(doc);
    let typed = doc! {
        "type": doc.get("type").cloned().unwrap_or(Bson::Null),
        "data": doc.get("data").cloned().unwrap_or(Bson::Null),
    };
    let business =
        bson::from_document::<BusinessEvent>(typed).context("an event's type and data")?;
    Ok(Event {
        id: f.required_str("_id")?,
        wa_id: f.wa_id("wa_id")?,
        at: f.date("at").unwrap_or_default(),
        event: business,
        status: f
            .str("status")
            .and_then(|s| EventStatus::parse(&s))
            .unwrap_or(EventStatus::Pending),
        attempts: f
            .int("attempts")
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        next_attempt_at: f.date("next_attempt_at"),
        claimed_until: f.date("claimed_until"),
        delivered_at: f.date("delivered_at"),
        error: f.str("error"),
    })
}
