//! MemoryStore's `inbox` (and `rejected`): what customers sent, until a turn answers it.

use crate::domain::{WaId, WaMessageId};
use crate::store::{
    InboxBacklog, InboxEntry, InboxInsert, InboxOutcomes, InboxStatus, MemoryStore, RejectedEntry,
    StoreResult, first_distinct,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::InboxStore;

#[async_trait]
impl InboxStore for MemoryStore {
    async fn insert_inbox(&self, messages: &[InboxEntry]) -> StoreResult<InboxInsert> {
        let mut inner = self.lock();
        let mut outcome = InboxInsert::default();
        for entry in messages {
            if inner.inbox.contains_key(&entry.wamid) {
                outcome.duplicates += 1;
                outcome.known.push(entry.wamid.clone());
            } else {
                inner
                    .inbox
                    .insert(entry.wamid.clone(), Box::new(entry.clone()));
                inner.inbox_order.push(entry.wamid.clone());
                let arrival = inner.next_arrival;
                inner.next_arrival += 1;
                inner.arrivals.insert(entry.wamid.clone(), arrival);
                inner.index_open(entry);
                outcome.inserted += 1;
            }
        }
        Ok(outcome)
    }

    async fn inbox_entry(&self, wamid: &WaMessageId) -> StoreResult<Option<InboxEntry>> {
        Ok(self.lock().inbox.get(wamid).map(|e| (**e).clone()))
    }

    async fn pending_inbox(&self, limit: usize) -> StoreResult<Vec<InboxEntry>> {
        let inner = self.lock();
        // Same order as Mongo's `{received_at: 1}` index, equal timestamps in arrival order.
        Ok(inner
            .open
            .values()
            .filter_map(|id| inner.inbox.get(id))
            .filter(|e| e.status == InboxStatus::Pending)
            .take(limit)
            .map(|e| (**e).clone())
            .collect())
    }

    async fn record_rejected(&self, rejected: &RejectedEntry) -> StoreResult<()> {
        self.lock().rejected.push(rejected.clone());
        Ok(())
    }

    async fn rejected(&self, limit: usize) -> StoreResult<Vec<RejectedEntry>> {
        let inner = self.lock();
        let skip = inner.rejected.len().saturating_sub(limit);
        Ok(inner.rejected[skip..].to_vec())
    }

    async fn inbox_outcomes_since(&self, since: DateTime<Utc>) -> StoreResult<InboxOutcomes> {
        let inner = self.lock();
        let mut outcomes = InboxOutcomes::default();
        for entry in inner.inbox.values().filter(|e| e.received_at >= since) {
            match entry.status {
                InboxStatus::Done => outcomes.answered += 1,
                InboxStatus::Failed => outcomes.failed += 1,
                _ => outcomes.open += 1,
            }
        }
        Ok(outcomes)
    }

    async fn open_inbox(&self, wa_id: &WaId) -> StoreResult<Vec<InboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .open_by_conversation
            .get(wa_id)
            .into_iter()
            .flat_map(|open| open.iter().map(|(_, id)| id))
            .filter_map(|id| inner.inbox.get(id))
            .map(|e| (**e).clone())
            .collect())
    }

    async fn conversations_with_open_inbox(&self, limit: usize) -> StoreResult<Vec<WaId>> {
        let inner = self.lock();
        Ok(first_distinct(
            inner
                .open
                .values()
                .filter_map(|id| inner.inbox.get(id))
                .map(|e| e.wa_id.clone()),
            limit,
        ))
    }

    async fn set_inbox_status(
        &self,
        wamids: &[WaMessageId],
        status: InboxStatus,
    ) -> StoreResult<()> {
        let mut inner = self.lock();
        for wamid in wamids {
            if let Some(entry) = inner.inbox.get_mut(wamid) {
                entry.status = status;
                if status == InboxStatus::Processing {
                    entry.attempts += 1;
                }
                let entry = entry.clone();
                inner.index_open(&entry);
            }
        }
        Ok(())
    }

    async fn count_attempt(&self, wamids: &[WaMessageId]) -> StoreResult<()> {
        let mut inner = self.lock();
        for wamid in wamids {
            if let Some(entry) = inner.inbox.get_mut(wamid) {
                entry.attempts += 1;
            }
        }
        Ok(())
    }

    async fn inbox_backlog(&self) -> StoreResult<InboxBacklog> {
        let inner = self.lock();
        let mut backlog = InboxBacklog::default();
        for entry in inner.inbox.values() {
            if entry.status.is_open() {
                backlog.open += 1;
                backlog.oldest_received_at = Some(
                    backlog
                        .oldest_received_at
                        .map_or(entry.received_at, |at| at.min(entry.received_at)),
                );
            } else if entry.status == InboxStatus::Failed {
                backlog.failed += 1;
            }
        }
        Ok(backlog)
    }

    async fn latest_inbox(&self, wa_id: &WaId) -> StoreResult<Option<InboxEntry>> {
        let inner = self.lock();
        Ok(inner
            .inbox_order
            .iter()
            .rev()
            .filter_map(|id| inner.inbox.get(id))
            .find(|entry| &entry.wa_id == wa_id)
            .map(|e| (**e).clone()))
    }
}
