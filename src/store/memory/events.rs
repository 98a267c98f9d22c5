//! MemoryStore's `events`: business events waiting for (or done with) delivery.

use crate::store::{Event, EventQuery, EventStatus, EventUpdate, MemoryStore, StoreResult};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::EventStore;

#[async_trait]
impl EventStore for MemoryStore {
    async fn insert_events(&self, events: &[Event]) -> StoreResult<()> {
        let mut inner = self.lock();
        for event in events {
            inner
                .events
                .entry(event.id.clone())
                .or_insert_with(|| event.clone());
        }
        Ok(())
    }

    async fn due_events(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Event>> {
        let inner = self.lock();
        let mut pending: Vec<&Event> = inner
            .events
            .values()
            .filter(|e| e.status == EventStatus::Pending)
            .collect();
        pending.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        Ok(crate::store::heads_due(
            pending.into_iter().cloned(),
            now,
            limit,
        ))
    }

    async fn claim_event(
        &self,
        id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let Some(event) = inner.events.get_mut(id) else {
            return Ok(false);
        };
        if event.status != EventStatus::Pending || event.claimed_until.is_some_and(|u| u > now) {
            return Ok(false);
        }
        event.claimed_until = Some(until);
        Ok(true)
    }

    async fn settle_event(&self, id: &str, update: &EventUpdate) -> StoreResult<()> {
        let mut inner = self.lock();
        if let Some(event) = inner.events.get_mut(id) {
            event.apply(update);
        }
        Ok(())
    }

    async fn list_events(&self, query: &EventQuery) -> StoreResult<Vec<Event>> {
        let inner = self.lock();
        let mut events: Vec<Event> = inner
            .events
            .values()
            .filter(|e| query.admits(e))
            .cloned()
            .collect();
        events.sort_by(|a, b| (b.at, &b.id).cmp(&(a.at, &a.id)));
        if query.oldest_first {
            events.reverse();
        }
        events.truncate(query.limit);
        Ok(events)
    }

    async fn retry_event(&self, id: &str, now: DateTime<Utc>) -> StoreResult<bool> {
        let mut inner = self.lock();
        match inner.events.get_mut(id) {
            Some(event) if event.status == EventStatus::Failed => {
                event.status = EventStatus::Pending;
                event.next_attempt_at = Some(now);
                event.claimed_until = None;
                event.attempts = 0;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
