//! MongoStore's `users`: who wrote, and the role the business gives them.

use crate::domain::{Referral, Role, WaId};
use crate::store::mongo::codec::{Fields, date};
use crate::store::pool::{Find, Lane};
use crate::store::{
    ContactSeen, MongoStore, OptOut, RoleAssignment, RoleSource, StoreResult, User,
};
use anyhow::Context as _;
use async_trait::async_trait;
use bson::doc;

use crate::store::UserStore;

#[async_trait]
impl UserStore for MongoStore {
    async fn record_lead(
        &self,
        wa_id: &WaId,
        at: chrono::DateTime<chrono::Utc>,
        assistant: &str,
    ) -> StoreResult<()> {
        // Only where none is recorded: a replayed turn does not move the first.
        self.pool
            .update_one(
                Lane::Work,
                "users",
                doc! {"_id": wa_id.as_str(), "lead_at": {"$exists": false}},
                doc! {"$set": {"lead_at": date(at), "lead_assistant": assistant}},
            )
            .await
            .map(drop)
    }

    async fn note_portal_contact(
        &self,
        wa_id: &WaId,
        name: Option<&str>,
        source: &str,
    ) -> StoreResult<()> {
        let key = wa_id.as_str();
        self.ensure_user(key).await?;
        if let Some(name) = name {
            self.pool
                .update_one(
                    Lane::Work,
                    "users",
                    doc! {"_id": key, "name": {"$exists": false}},
                    doc! {"$set": {"name": name}},
                )
                .await?;
        }
        self.pool
            .update_one(
                Lane::Work,
                "users",
                doc! {"_id": key, "lead_source": {"$exists": false}},
                doc! {"$set": {"lead_source": source}},
            )
            .await
            .map(drop)
    }

    async fn leads_since(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<User>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "users",
                doc! {"lead_at": {"$gte": date(since)}},
                Find::sorted(doc! {"lead_at": 1, "_id": 1}).limit(limit),
            )
            .await?;
        Ok(docs.iter().filter_map(user_of).collect())
    }

    async fn opt_outs_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<u64> {
        self.pool
            .count(
                Lane::Work,
                "users",
                doc! {"opted_out_at": {"$gte": date(from), "$lt": date(to)}},
            )
            .await
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

        // Both only ever rise: `updated_at` then sorts conversations by their last activity
        // (`Conversation::last_activity`).
        let mut conversation_update = doc! {"$max": {"last_inbound_at": seen, "updated_at": seen}};
        let mut conversation_set = doc! {};
        for (field, value) in [("wa_id", &contact.phone), ("user_id", &contact.user_id)] {
            if let Some(value) = value {
                conversation_set.insert(field, value);
            }
        }
        if !conversation_set.is_empty() {
            conversation_update.insert("$set", conversation_set);
        }
        self.upsert_conversation(Lane::Ingress, doc! {"_id": key}, conversation_update)
            .await
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
        Ok(user_of(&doc))
    }

    async fn set_opt_out(&self, wa_id: &WaId, opt_out: Option<&OptOut>) -> StoreResult<()> {
        let update = match opt_out {
            Some(opt_out) => doc! {
                "$set": {"opted_out_at": date(opt_out.at), "opt_out_source": &opt_out.source},
                "$setOnInsert": {"role": Role::Prospect.as_str()},
            },
            None => doc! {
                "$unset": {"opted_out_at": "", "opt_out_source": ""},
                "$setOnInsert": {"role": Role::Prospect.as_str()},
            },
        };
        self.pool
            .upsert_one(Lane::Work, "users", doc! {"_id": wa_id.as_str()}, update)
            .await
            .map(drop)
    }

    async fn set_marketing_preference(
        &self,
        wa_id: &WaId,
        stopped: bool,
        at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<bool> {
        let key = wa_id.as_str();
        self.ensure_user(key).await?;
        let update = if stopped {
            doc! {"$set": {"marketing_opted_out_at": date(at), "marketing_choice_at": date(at)}}
        } else {
            doc! {
                "$set": {"marketing_choice_at": date(at)},
                "$unset": {"marketing_opted_out_at": ""},
            }
        };
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "users",
                doc! {"_id": key, "$or": [
                    {"marketing_choice_at": {"$exists": false}},
                    {"marketing_choice_at": {"$lt": date(at)}},
                ]},
                update,
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn note_referral(
        &self,
        wa_id: &WaId,
        referral: &Referral,
        at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<bool> {
        let key = wa_id.as_str();
        self.ensure_user(key).await?;
        let mut stored = bson::to_document(referral).context("referral to BSON")?;
        stored.insert("at", date(at));
        let result = self
            .pool
            .update_one(
                Lane::Work,
                "users",
                doc! {"_id": key, "referral": {"$exists": false}},
                doc! {"$set": {"referral": stored}},
            )
            .await?;
        Ok(result.matched_count > 0)
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
}

impl MongoStore {
    /// The contact's `users` document, made a prospect's if it is not there yet.
    async fn ensure_user(&self, key: &str) -> StoreResult<()> {
        self.pool
            .upsert_one(
                Lane::Work,
                "users",
                doc! {"_id": key},
                doc! {"$setOnInsert": {"role": Role::Prospect.as_str()}},
            )
            .await
            .map(drop)
    }
}

/// A `users` document; `None` without a readable `_id`.
fn user_of(doc: &bson::Document) -> Option<User> {
    let f = Fields(doc);
    Some(User {
        wa_id: f.wa_id("_id").ok()?,
        name: f.str("name"),
        username: f.str("username"),
        role: f.str("role").map_or(Role::Prospect, |r| Role::parse(&r)),
        lang: f.str("lang"),
        role_source: f.str("role_source").and_then(|s| RoleSource::parse(&s)),
        role_set_by: f.str("role_set_by"),
        role_set_at: f.date("role_set_at"),
        opted_out_at: f.date("opted_out_at"),
        opt_out_source: f.str("opt_out_source"),
        lead_at: f.date("lead_at"),
        lead_assistant: f.str("lead_assistant"),
        lead_source: f.str("lead_source"),
        marketing_opted_out_at: f.date("marketing_opted_out_at"),
        marketing_choice_at: f.date("marketing_choice_at"),
        referral: doc
            .get_document("referral")
            .ok()
            .and_then(|r| bson::from_document::<Referral>(r.clone()).ok()),
        referral_at: doc
            .get_document("referral")
            .ok()
            .and_then(|r| Fields(r).date("at")),
    })
}
