//! MemoryStore's `leads`.

use async_trait::async_trait;

use crate::store::{LeadFilter, LeadStatus, LeadStore, MemoryStore, PortalLead, StoreResult};

#[async_trait]
impl LeadStore for MemoryStore {
    async fn insert_lead(&self, lead: &PortalLead) -> StoreResult<(PortalLead, bool)> {
        let mut inner = self.lock();
        if let Some(stored) = inner.leads.get(&lead.id) {
            return Ok((stored.clone(), false));
        }
        inner.leads.insert(lead.id.clone(), lead.clone());
        Ok((lead.clone(), true))
    }

    async fn lead(&self, id: &str) -> StoreResult<Option<PortalLead>> {
        Ok(self.lock().leads.get(id).cloned())
    }

    async fn update_lead(&self, lead: &PortalLead, from: LeadStatus) -> StoreResult<bool> {
        let mut inner = self.lock();
        match inner.leads.get_mut(&lead.id) {
            Some(stored) if stored.status == from => {
                *stored = lead.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn leads(&self, filter: &LeadFilter) -> StoreResult<Vec<PortalLead>> {
        let inner = self.lock();
        let mut found: Vec<PortalLead> = inner
            .leads
            .values()
            .filter(|l| filter.status.is_none_or(|s| l.status == s))
            .filter(|l| {
                filter
                    .wa_id
                    .as_ref()
                    .is_none_or(|w| l.wa_id.as_ref() == Some(w))
            })
            .filter(|l| filter.since.is_none_or(|at| l.received_at >= at))
            .cloned()
            .collect();
        found.sort_by(|a, b| b.received_at.cmp(&a.received_at).then(a.id.cmp(&b.id)));
        if filter.oldest_first {
            found.sort_by(|a, b| a.received_at.cmp(&b.received_at).then(a.id.cmp(&b.id)));
        }
        found.truncate(filter.limit);
        Ok(found)
    }
}
