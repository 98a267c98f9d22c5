//! MemoryStore's `pagers`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::store::{MemoryStore, Page, PageBatch, PagerStore, StoreResult};

/// One staff member's pager.
#[derive(Debug, Default)]
pub(super) struct Pager {
    pages: Vec<Page>,
    sent_at: Option<DateTime<Utc>>,
    batch_at: Option<DateTime<Utc>>,
}

impl Pager {
    fn batch(&self, at: DateTime<Utc>) -> PageBatch {
        PageBatch {
            at,
            pages: self.pages.iter().filter(|p| p.at <= at).cloned().collect(),
        }
    }

    fn due(&self, now: DateTime<Utc>, quiet: chrono::Duration) -> bool {
        self.batch_at.is_some()
            || (!self.pages.is_empty() && self.sent_at.is_none_or(|at| at <= now - quiet))
    }
}

#[async_trait]
impl PagerStore for MemoryStore {
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()> {
        let mut inner = self.lock();
        let pager = inner.pagers.entry(member.clone()).or_default();
        if !pager.pages.iter().any(|p| p.key == page.key) {
            pager.pages.push(page.clone());
        }
        Ok(())
    }

    async fn claim_pages(
        &self,
        member: &WaId,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
    ) -> StoreResult<Option<PageBatch>> {
        let mut inner = self.lock();
        let Some(pager) = inner.pagers.get_mut(member) else {
            return Ok(None);
        };
        if let Some(at) = pager.batch_at {
            return Ok(Some(pager.batch(at)));
        }
        if !pager.due(now, quiet) {
            return Ok(None);
        }
        pager.batch_at = Some(now);
        pager.sent_at = Some(now);
        Ok(Some(pager.batch(now)))
    }

    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()> {
        let mut inner = self.lock();
        if let Some(pager) = inner.pagers.get_mut(member)
            && pager.batch_at == Some(batch.at)
        {
            pager
                .pages
                .retain(|p| !batch.pages.iter().any(|sent| sent.key == p.key));
            pager.batch_at = None;
        }
        Ok(())
    }

    async fn due_pagers(
        &self,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        let inner = self.lock();
        let mut due: Vec<WaId> = inner
            .pagers
            .iter()
            .filter(|(_, pager)| pager.due(now, quiet))
            .map(|(member, _)| member.clone())
            .collect();
        due.sort();
        due.truncate(limit);
        Ok(due)
    }
}
