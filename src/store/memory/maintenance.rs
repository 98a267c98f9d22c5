//! MemoryStore's the database as a whole: is it there, how strained, and what it forgets or purges.

use crate::domain::{WaId, WaMessageId};
use crate::store::{
    EventStatus, ForgetCounts, InboxStatus, MemoryStore, PurgeBefore, PurgeCounts, StoreResult,
};
use async_trait::async_trait;

use crate::store::MaintenanceStore;

#[async_trait]
impl MaintenanceStore for MemoryStore {
    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }

    async fn forget(&self, wa_id: &WaId) -> StoreResult<ForgetCounts> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let key = wa_id.as_str();
        let mut counts = ForgetCounts {
            conversations: u64::from(inner.conversations.remove(wa_id).is_some()),
            users: u64::from(inner.users.remove(wa_id).is_some()),
            messages: inner.messages.remove(wa_id).map_or(0, |m| m.len() as u64),
            leases: u64::from(inner.leases.remove(wa_id).is_some()),
            ..ForgetCounts::default()
        };
        let before = inner.leads.len();
        inner.leads.retain(|_, l| l.wa_id.as_ref() != Some(wa_id));
        counts.leads = (before - inner.leads.len()) as u64;
        let inbox: Vec<WaMessageId> = inner
            .inbox
            .values()
            .filter(|e| &e.wa_id == wa_id)
            .map(|e| e.wamid.clone())
            .collect();
        for wamid in &inbox {
            inner.inbox.remove(wamid);
            inner.arrivals.remove(wamid);
        }
        inner.inbox_order.retain(|id| inner.inbox.contains_key(id));
        inner.open.retain(|_, id| !inbox.contains(id));
        inner.open_by_conversation.remove(wa_id);
        counts.inbox = inbox.len() as u64;
        let before = inner.outbox.len();
        inner.outbox.retain(|e| &e.wa_id != wa_id);
        counts.outbox = (before - inner.outbox.len()) as u64;
        counts.outbox += inner.forget_pages_about(wa_id);
        inner.reindex_outbox();
        let before = inner.llm_calls.len();
        inner
            .llm_calls
            .retain(|c| c.conversation.as_deref() != Some(key));
        counts.llm_calls = (before - inner.llm_calls.len()) as u64;
        let before = inner.rejected.len();
        inner.rejected.retain(|r| !r.raw.contains(key));
        counts.webhook_rejects = (before - inner.rejected.len()) as u64;
        let before = inner.events.len();
        inner.events.retain(|_, e| &e.wa_id != wa_id);
        counts.events = (before - inner.events.len()) as u64;
        Ok(counts)
    }

    /// The outbox is kept: its entries are indexed by position (it goes with the process).
    async fn purge(&self, before: &PurgeBefore) -> StoreResult<PurgeCounts> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let mut counts = PurgeCounts::default();
        if let Some(at) = before.inbox {
            let old: Vec<WaMessageId> = inner
                .inbox
                .values()
                .filter(|e| {
                    matches!(e.status, InboxStatus::Done | InboxStatus::Failed)
                        && e.received_at < at
                })
                .map(|e| e.wamid.clone())
                .collect();
            for wamid in &old {
                inner.inbox.remove(wamid);
                inner.arrivals.remove(wamid);
            }
            inner.inbox_order.retain(|id| inner.inbox.contains_key(id));
            counts.inbox = old.len() as u64;
            let before_len = inner.rejected.len();
            inner.rejected.retain(|r| r.at >= at);
            counts.webhook_rejects = (before_len - inner.rejected.len()) as u64;
        }
        if let Some(at) = before.messages {
            for history in inner.messages.values_mut() {
                let before_len = history.len();
                history.retain(|stored| stored.message.at >= at);
                counts.messages += (before_len - history.len()) as u64;
            }
        }
        if let Some(at) = before.llm_calls {
            let before_len = inner.llm_calls.len();
            inner.llm_calls.retain(|c| c.at >= at);
            counts.llm_calls = (before_len - inner.llm_calls.len()) as u64;
        }
        if let Some(at) = before.events {
            let before_len = inner.events.len();
            inner
                .events
                .retain(|_, e| e.status == EventStatus::Pending || e.at >= at);
            counts.events = (before_len - inner.events.len()) as u64;
        }
        if let Some(at) = before.leases {
            let before_len = inner.instances.len();
            inner.instances.retain(|_, record| record.seen_at >= at);
            counts.leases = (before_len - inner.instances.len()) as u64;
            let before_len = inner.leases.len();
            let instances = &inner.instances;
            inner.leases.retain(|_, lease| {
                lease.until >= at || (!lease.released && instances.contains_key(&lease.owner))
            });
            counts.leases += (before_len - inner.leases.len()) as u64;
        }
        Ok(counts)
    }
}
