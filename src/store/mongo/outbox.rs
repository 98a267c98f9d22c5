//! MongoStore's `outbox`: replies on their way to the Graph API, and their delivery statuses.

use crate::domain::OutboxId;
use crate::domain::{AccountHealth, StatusUpdate, WaId, WaMessageId};
use crate::store::mongo::codec::{
    Fields, date, opt_date, outbox_doc, outbox_entry, outbox_id, statuses, template_doc,
};
use crate::store::pool::{self, Find, Lane, classify};
use crate::store::{
    Fallback, MongoStore, NewOutbox, OutboxEntry, OutboxStatus, OutboxUpdate, StatusOutcome,
    StoreResult, TemplateStatus, first_distinct,
};
use anyhow::Context as _;
use async_trait::async_trait;
use bson::{Bson, Document, doc, oid::ObjectId};
use chrono::{DateTime, Utc};

use crate::store::OutboxStore;

/// Statuses of parts not yet sent: the ones the worker still owes.
const UNSENT: [&str; 2] = [
    OutboxStatus::Queued.as_str(),
    OutboxStatus::Sending.as_str(),
];

/// At most this many template parts are read to count the contacts of Meta's messaging limit.
const INITIATED_READ_LIMIT: usize = 200_000;

#[async_trait]
impl OutboxStore for MongoStore {
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
                .run_raw(Lane::Work, ("insert", "outbox"), move |db| async move {
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
        let (condition, change) = match update {
            OutboxUpdate::Sending { at, resend_at } => (
                doc! {"status": {"$in": &UNSENT[..]}},
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
                doc! {"status": {"$in": &UNSENT[..]}},
                doc! {"$set": {
                    "status": OutboxStatus::Queued.as_str(),
                    "next_attempt_at": date(*at),
                    "error": error.as_ref().map(bson::to_bson).transpose().context("Graph error to BSON")?,
                }},
            ),
            OutboxUpdate::Failed { error } => (
                doc! {"status": {"$in": &UNSENT[..]}},
                doc! {"$set": {
                    "status": OutboxStatus::Failed.as_str(),
                    "error": bson::to_bson(error).context("Graph error to BSON")?,
                }},
            ),
            OutboxUpdate::Skipped { error } => (
                doc! {"status": {"$in": &UNSENT[..]}},
                doc! {"$set": {
                    "status": OutboxStatus::Skipped.as_str(),
                    "error": bson::to_bson(error).context("Graph error to BSON")?,
                    "fallback": null,
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
            .find_any_of(
                Lane::Work,
                "outbox",
                doc! {"wa_id": wa_id.as_str()},
                ("status", &UNSENT),
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
            .find_any_of(
                Lane::Work,
                "outbox",
                doc! {
                    "$or": [
                        {"next_attempt_at": Bson::Null},
                        {"next_attempt_at": {"$lte": date(now)}},
                    ],
                },
                ("status", &UNSENT),
                Find::sorted(doc! {"at": 1, "_id": 1})
                    .projection(doc! {"wa_id": 1, "at": 1})
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

    async fn fall_back(&self, id: &OutboxId, fallback: &Fallback) -> StoreResult<bool> {
        let mut set = doc! {
            "status": OutboxStatus::Queued.as_str(),
            "attempts": 0_i64,
            "fell_back": true,
        };
        let mut unset = doc! {"next_attempt_at": "", "wamid": "", "sending_at": ""};
        match fallback {
            Fallback::Text { body } => {
                set.insert("body", body);
                set.insert("buttons", Bson::Array(Vec::new()));
                unset.insert("media", "");
            }
            Fallback::Template(template) => {
                set.insert("template", template_doc(template));
            }
            // The carousel stays; `fell_back` sends it as its pieces.
            Fallback::Photos => {}
        }
        let delivered = statuses(&[
            OutboxStatus::Delivered,
            OutboxStatus::Read,
            OutboxStatus::Played,
        ]);
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "outbox",
                doc! {
                    "_id": outbox_id(id),
                    "fell_back": {"$ne": true},
                    "status": {"$nin": delivered},
                },
                doc! {"$set": set, "$unset": unset},
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn billed_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        // Meta bills delivered messages: by the (status, at) index.
        let docs = self
            .pool
            .find(
                Lane::Work,
                "outbox",
                doc! {
                    "status": {"$in": statuses(&[
                        OutboxStatus::Delivered,
                        OutboxStatus::Read,
                        OutboxStatus::Played,
                    ])},
                    "at": {"$gte": date(from), "$lt": date(to)},
                    "pricing.billable": true,
                },
                Find::sorted(doc! {"at": 1, "_id": 1})
                    .limit(limit)
                    .projection(
                        doc! {"wa_id": 1, "purpose": 1, "at": 1, "pricing": 1, "status": 1},
                    ),
            )
            .await?;
        docs.iter().map(outbox_entry).collect()
    }

    async fn undelivered_since(
        &self,
        since: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "outbox",
                doc! {
                    "status": {"$in": statuses(&[OutboxStatus::Failed, OutboxStatus::Skipped])},
                    "at": {"$gte": date(since)},
                },
                Find::sorted(doc! {"at": -1, "_id": -1}).limit(limit),
            )
            .await?;
        docs.iter().map(outbox_entry).collect()
    }

    async fn record_template_status(&self, status: &TemplateStatus) -> StoreResult<()> {
        let mut set = doc! {
            "name": &status.name,
            "language": &status.language,
            "status": &status.status,
            "at": date(status.at),
        };
        if let Some(category) = &status.category {
            set.insert("category", category);
        }
        if let Some(reason) = &status.reason {
            set.insert("reason", reason);
        }
        if let Some(quality) = &status.quality {
            set.insert("quality", quality);
        }
        self.pool
            .upsert_one(
                Lane::Work,
                "templates",
                doc! {"_id": format!("{}:{}", status.name, status.language)},
                doc! {"$set": set},
            )
            .await
            .map(drop)
    }

    async fn template_statuses(&self) -> StoreResult<Vec<TemplateStatus>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "templates",
                doc! {},
                Find::sorted(doc! {"_id": 1}),
            )
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| {
                let f = Fields(doc);
                Some(TemplateStatus {
                    name: f.str("name")?,
                    language: f.str("language")?,
                    status: f.str("status")?,
                    category: f.str("category"),
                    reason: f.str("reason"),
                    quality: f.str("quality"),
                    at: f.date("at")?,
                })
            })
            .collect())
    }

    async fn record_account_health(&self, health: &AccountHealth) -> StoreResult<()> {
        let restrictions = bson::to_bson(&health.restrictions).context("restrictions to BSON")?;
        let mut set = doc! {
            "flagged": health.flagged,
            "restrictions": restrictions,
            "last_event": &health.last_event,
            "at": opt_date(health.at),
        };
        for (key, value) in [
            ("quality", &health.quality),
            ("messaging_limit", &health.messaging_limit),
            ("disabled", &health.disabled),
            ("violation", &health.violation),
            ("tier", &health.tier),
        ] {
            set.insert(key, value.as_deref().map_or(Bson::Null, Bson::from));
        }
        self.pool
            .upsert_one(
                Lane::Work,
                "whatsapp_accounts",
                doc! {"_id": &health.key},
                doc! {"$set": set},
            )
            .await
            .map(drop)
    }

    async fn initiated_since(&self, since: DateTime<Utc>, with: &WaId) -> StoreResult<(u64, bool)> {
        let filter = doc! {
            "template": {"$ne": null},
            "at": {"$gte": since},
            "status": {"$nin": [OutboxStatus::Failed.as_str(), OutboxStatus::Skipped.as_str()]},
        };
        // One field per part; the limits Meta sets (up to 100,000 contacts) bound the read.
        let docs = self
            .pool
            .find(
                Lane::Work,
                "outbox",
                filter,
                Find::default()
                    .projection(doc! {"wa_id": 1, "_id": 0})
                    .limit(INITIATED_READ_LIMIT),
            )
            .await?;
        let reached: std::collections::HashSet<String> = docs
            .iter()
            .filter_map(|doc| Fields(doc).str("wa_id"))
            .collect();
        Ok((reached.len() as u64, reached.contains(with.as_str())))
    }

    async fn pause_sends(&self, key: &str, until: DateTime<Utc>) -> StoreResult<()> {
        self.pool
            .upsert_one(
                Lane::Work,
                "send_pauses",
                doc! {"_id": key},
                doc! {"$max": {"until": until}},
            )
            .await
            .map(drop)
    }

    async fn send_pauses(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(String, DateTime<Utc>)>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "send_pauses",
                doc! {"until": {"$gt": now}},
                Find::sorted(doc! {"until": -1}).limit(limit),
            )
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| {
                let f = Fields(doc);
                Some((f.str("_id")?, f.date("until")?))
            })
            .collect())
    }

    async fn account_health(&self) -> StoreResult<Vec<AccountHealth>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "whatsapp_accounts",
                doc! {},
                Find::sorted(doc! {"_id": 1}),
            )
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| {
                let f = Fields(doc);
                Some(AccountHealth {
                    key: f.str("_id")?,
                    quality: f.str("quality"),
                    flagged: doc.get_bool("flagged").unwrap_or(false),
                    messaging_limit: f.str("messaging_limit"),
                    restrictions: doc
                        .get("restrictions")
                        .and_then(|r| bson::from_bson(r.clone()).ok())
                        .unwrap_or_default(),
                    disabled: f.str("disabled"),
                    violation: f.str("violation"),
                    tier: f.str("tier"),
                    last_event: f.str("last_event").unwrap_or_default(),
                    at: f.date("at"),
                })
            })
            .collect())
    }

    async fn apply_status(&self, update: &StatusUpdate) -> StoreResult<StatusOutcome> {
        let Some(status) = OutboxStatus::parse(&update.status) else {
            return Ok(StatusOutcome::Unrecognised);
        };
        let mut set = doc! {"status": status.as_str(), "status_at": opt_date(update.at)};
        if let Some(pricing) = &update.pricing {
            set.insert(
                "pricing",
                bson::to_bson(pricing).context("pricing to BSON")?,
            );
        }
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
                        // A part queued again as its fallback is a new message: the old
                        // one's statuses are not its own.
                        "fell_back": {"$ne": true},
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
            // An older status, late: its pricing is still the part's.
            if let Some(pricing) = &update.pricing {
                self.pool
                    .update_one(
                        Lane::Ingress,
                        "outbox",
                        doc! {"wamid": update.wamid.as_str(), "pricing": {"$exists": false}},
                        doc! {"$set": {"pricing": bson::to_bson(pricing).context("pricing to BSON")?}},
                    )
                    .await?;
            }
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
