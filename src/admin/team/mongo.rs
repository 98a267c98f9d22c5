//! The team in MongoDB: `operators` (`_id` the name; argon2 `password_hash`, `token_hash`,
//! `role`, `disabled_at`) and `sessions` (`_id` the digest of the cookie; `operator`,
//! `expires_at`, `csrf`). Every call goes through the process's pool, so a stalled database
//! answers "unavailable" rather than hanging a sign-in.

use async_trait::async_trait;
use bson::{Bson, Document, doc};
use chrono::{DateTime, Utc};

use super::{Operator, OperatorRole, SessionRecord, TeamStore};
use crate::store::pool::{Find, Lane};
use crate::store::{MongoPool, StoreResult};

const OPERATORS: &str = "operators";
const SESSIONS: &str = "sessions";
const FAILURES: &str = "sign_in_failures";

#[derive(Clone)]
pub struct MongoTeam {
    pool: MongoPool,
}

impl MongoTeam {
    pub fn new(pool: MongoPool) -> Self {
        Self { pool }
    }

    /// The lookups' indexes (a token by its digest, sessions by operator). Idempotent.
    pub async fn ensure_indexes(&self) -> StoreResult<()> {
        for (collection, keys) in [
            (OPERATORS, doc! {"token_hash": 1}),
            (SESSIONS, doc! {"operator": 1}),
            (SESSIONS, doc! {"expires_at": 1}),
            (FAILURES, doc! {"address": 1, "at": 1}),
            (FAILURES, doc! {"at": 1}),
        ] {
            self.pool
                .run(
                    Lane::Work,
                    ("createIndexes", collection),
                    move |db| async move {
                        db.collection::<Document>(collection)
                            .create_index(mongodb::IndexModel::builder().keys(keys).build())
                            .await
                    },
                )
                .await?;
        }
        Ok(())
    }
}

fn at(value: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(value)
}

fn opt_at(value: Option<DateTime<Utc>>) -> Bson {
    value.map_or(Bson::Null, |v| Bson::DateTime(at(v)))
}

fn date_of(doc: &Document, key: &str) -> Option<DateTime<Utc>> {
    doc.get_datetime(key).ok().map(|d| d.to_chrono())
}

fn str_of(doc: &Document, key: &str) -> String {
    doc.get_str(key).unwrap_or_default().to_owned()
}

fn operator_doc(o: &Operator) -> Document {
    doc! {
        "_id": &o.name,
        "role": o.role.as_str(),
        "display_name": o.display_name.as_deref(),
        "password_hash": &o.password_hash,
        "token_hash": &o.token_hash,
        "created_at": at(o.created_at),
        "created_by": &o.created_by,
        "issued_at": at(o.issued_at),
        "disabled_at": opt_at(o.disabled_at),
        "last_sign_in_at": opt_at(o.last_sign_in_at),
    }
}

/// An operator document; one whose role was edited into something unknown reads as a viewer.
fn operator_of(doc: &Document) -> Operator {
    Operator {
        name: str_of(doc, "_id"),
        role: OperatorRole::parse(doc.get_str("role").unwrap_or_default())
            .unwrap_or(OperatorRole::Viewer),
        display_name: doc.get_str("display_name").ok().map(str::to_owned),
        password_hash: str_of(doc, "password_hash"),
        token_hash: str_of(doc, "token_hash"),
        created_at: date_of(doc, "created_at").unwrap_or_default(),
        created_by: str_of(doc, "created_by"),
        issued_at: date_of(doc, "issued_at").unwrap_or_default(),
        disabled_at: date_of(doc, "disabled_at"),
        last_sign_in_at: date_of(doc, "last_sign_in_at"),
    }
}

fn session_of(doc: &Document) -> Option<SessionRecord> {
    Some(SessionRecord {
        id: str_of(doc, "_id"),
        operator: doc.get_str("operator").ok()?.to_owned(),
        created_at: date_of(doc, "created_at")?,
        expires_at: date_of(doc, "expires_at")?,
        csrf: doc.get_str("csrf").ok()?.to_owned(),
        bootstrap: doc.get_str("bootstrap").ok().map(str::to_owned),
    })
}

#[async_trait]
impl TeamStore for MongoTeam {
    async fn insert_operator(&self, operator: &Operator) -> StoreResult<bool> {
        self.pool
            .insert_unique(Lane::Work, OPERATORS, operator_doc(operator))
            .await
    }

    async fn operator(&self, name: &str) -> StoreResult<Option<Operator>> {
        Ok(self
            .pool
            .find_one(Lane::Work, OPERATORS, doc! {"_id": name}, Find::default())
            .await?
            .as_ref()
            .map(operator_of))
    }

    async fn operators(&self) -> StoreResult<Vec<Operator>> {
        Ok(self
            .pool
            .find(
                Lane::Work,
                OPERATORS,
                doc! {},
                Find::sorted(doc! {"_id": 1}).limit(1_000),
            )
            .await?
            .iter()
            .map(operator_of)
            .collect())
    }

    async fn operator_by_token(&self, token_hash: &str) -> StoreResult<Option<Operator>> {
        Ok(self
            .pool
            .find_one(
                Lane::Work,
                OPERATORS,
                doc! {"token_hash": token_hash},
                Find::default(),
            )
            .await?
            .as_ref()
            .map(operator_of))
    }

    async fn set_credentials(
        &self,
        name: &str,
        password_hash: &str,
        token_hash: &str,
        when: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let result = self
            .pool
            .update_one(
                Lane::Work,
                OPERATORS,
                doc! {"_id": name},
                doc! {"$set": {
                    "password_hash": password_hash,
                    "token_hash": token_hash,
                    "issued_at": at(when),
                    "disabled_at": Bson::Null,
                }},
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn set_disabled(&self, name: &str, when: Option<DateTime<Utc>>) -> StoreResult<bool> {
        let result = self
            .pool
            .update_one(
                Lane::Work,
                OPERATORS,
                doc! {"_id": name},
                doc! {"$set": {"disabled_at": opt_at(when)}},
            )
            .await?;
        Ok(result.matched_count > 0)
    }

    async fn note_sign_in(&self, name: &str, when: DateTime<Utc>) -> StoreResult<()> {
        self.pool
            .update_one(
                Lane::Work,
                OPERATORS,
                doc! {"_id": name},
                doc! {"$set": {"last_sign_in_at": at(when)}},
            )
            .await
            .map(drop)
    }

    async fn insert_session(&self, session: &SessionRecord) -> StoreResult<()> {
        let mut document = doc! {
            "_id": &session.id,
            "operator": &session.operator,
            "created_at": at(session.created_at),
            "expires_at": at(session.expires_at),
            "csrf": &session.csrf,
        };
        if let Some(bootstrap) = &session.bootstrap {
            document.insert("bootstrap", bootstrap);
        }
        self.pool.insert_one(Lane::Work, SESSIONS, document).await
    }

    async fn session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        Ok(self
            .pool
            .find_one(Lane::Work, SESSIONS, doc! {"_id": id}, Find::default())
            .await?
            .as_ref()
            .and_then(session_of))
    }

    async fn delete_session(&self, id: &str) -> StoreResult<()> {
        self.pool
            .delete_many(Lane::Work, SESSIONS, doc! {"_id": id})
            .await
            .map(drop)
    }

    async fn delete_sessions_of(&self, operator: &str) -> StoreResult<u64> {
        self.pool
            .delete_many(Lane::Work, SESSIONS, doc! {"operator": operator})
            .await
    }

    async fn delete_expired_sessions(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        self.pool
            .delete_many(Lane::Work, SESSIONS, doc! {"expires_at": {"$lte": at(now)}})
            .await
    }

    async fn record_sign_in_failure(
        &self,
        address: &str,
        account: &str,
        when: DateTime<Utc>,
        forget_before: DateTime<Utc>,
    ) -> StoreResult<()> {
        // No TTL index on FerretDB: the expired ones go on the next failure.
        self.pool
            .delete_many(
                Lane::Work,
                FAILURES,
                doc! {"at": {"$lt": at(forget_before)}},
            )
            .await?;
        self.pool
            .insert_one(
                Lane::Work,
                FAILURES,
                doc! {"address": address, "account": account, "at": at(when)},
            )
            .await
    }

    async fn sign_in_failures(
        &self,
        address: &str,
        account: &str,
        since: DateTime<Utc>,
    ) -> StoreResult<(u64, u64)> {
        let from_address = self
            .pool
            .count(
                Lane::Work,
                FAILURES,
                doc! {"address": address, "at": {"$gt": at(since)}},
            )
            .await?;
        let for_account = if from_address == 0 {
            0
        } else {
            self.pool
                .count(
                    Lane::Work,
                    FAILURES,
                    doc! {"address": address, "account": account, "at": {"$gt": at(since)}},
                )
                .await?
        };
        Ok((from_address, for_account))
    }
}
