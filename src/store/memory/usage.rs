//! MemoryStore's `llm_calls`: what each model call cost.

use crate::store::{LlmCall, MemoryStore, StoreResult};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::UsageStore;

#[async_trait]
impl UsageStore for MemoryStore {
    async fn insert_llm_calls(&self, calls: &[LlmCall]) -> StoreResult<()> {
        self.lock().llm_calls.extend_from_slice(calls);
        Ok(())
    }

    async fn llm_calls(&self, conversation: &str, limit: usize) -> StoreResult<Vec<LlmCall>> {
        let inner = self.lock();
        let mut calls: Vec<LlmCall> = inner
            .llm_calls
            .iter()
            .rev()
            .filter(|c| c.conversation.as_deref() == Some(conversation))
            .take(limit)
            .cloned()
            .collect();
        calls.reverse();
        Ok(calls)
    }

    async fn llm_tokens_since(&self, conversation: &str, since: DateTime<Utc>) -> StoreResult<u64> {
        Ok(self
            .lock()
            .llm_calls
            .iter()
            .filter(|c| c.conversation.as_deref() == Some(conversation) && c.at >= since)
            .map(|c| c.input_tokens + c.output_tokens)
            .sum())
    }

    async fn llm_calls_between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<LlmCall>> {
        Ok(self
            .lock()
            .llm_calls
            .iter()
            .filter(|c| c.at >= from && c.at < to)
            .take(limit)
            .cloned()
            .collect())
    }
}
