//! MemoryStore's `messages`: each conversation's history, numbered.

use crate::domain::WaId;
use crate::store::{MemoryStore, NewMessage, StoreResult, StoredMessage};
use async_trait::async_trait;

use crate::store::HistoryStore;

#[async_trait]
impl HistoryStore for MemoryStore {
    async fn messages_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        let inner = self.lock();
        let mut found: Vec<StoredMessage> = inner
            .messages
            .values()
            .flat_map(|history| history.iter())
            .filter(|StoredMessage { message: m, .. }| {
                m.at >= from
                    && m.at < to
                    && matches!(
                        m.role,
                        crate::domain::MessageRole::Human | crate::domain::MessageRole::Ai
                    )
            })
            .cloned()
            .collect();
        found.sort_by_key(|m| m.message.at);
        found.truncate(limit);
        Ok(found)
    }

    async fn append_message(&self, message: NewMessage) -> StoreResult<StoredMessage> {
        let mut inner = self.lock();
        let history = inner.messages.entry(message.wa_id.clone()).or_default();
        let seq = history.last().map_or(1, |last| last.seq + 1);
        let stored = StoredMessage { seq, message };
        history.push(stored.clone());
        Ok(stored)
    }

    async fn recent_messages(&self, wa_id: &WaId, limit: usize) -> StoreResult<Vec<StoredMessage>> {
        let inner = self.lock();
        let Some(history) = inner.messages.get(wa_id) else {
            return Ok(Vec::new());
        };
        Ok(history[history.len().saturating_sub(limit)..].to_vec())
    }

    async fn append_messages(
        &self,
        messages: Vec<NewMessage>,
        _after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        let mut stored = Vec::with_capacity(messages.len());
        for message in messages {
            stored.push(self.append_message(message).await?);
        }
        Ok(stored)
    }
}
