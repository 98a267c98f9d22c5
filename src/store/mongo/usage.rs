//! MongoStore's `llm_calls`: what each model call cost.

use crate::store::mongo::codec::{Fields, date, llm_call};
use crate::store::pool::{Find, Lane};
use crate::store::{LlmCall, MongoStore, StoreResult};
use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use crate::store::UsageStore;

#[async_trait]
impl UsageStore for MongoStore {
    async fn insert_llm_calls(&self, calls: &[LlmCall]) -> StoreResult<()> {
        if calls.is_empty() {
            return Ok(());
        }
        let docs = calls
            .iter()
            .map(|call| {
                let mut doc = doc! {
                    "agent": call.agent.as_str(),
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

    async fn llm_calls_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<LlmCall>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "llm_calls",
                doc! {"at": {"$gte": date(from), "$lt": date(to)}},
                Find::sorted(doc! {"at": 1}).limit(limit),
            )
            .await?;
        docs.iter().map(llm_call).collect()
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
}
