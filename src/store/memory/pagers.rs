//! MemoryStore's `pagers`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::store::{MemoryStore, Page, PageBatch, PagerStore, StoreResult};

/// One staff member's pager.
#[derive(Debug, Default)]
pub(super) struct Pager {
    pages: Vec<Page>,
    /// The keys of pages sent, and when: the same page written again is one already sent.
    sent: Vec<(String, DateTime<Utc>)>,
    sent_at: Option<DateTime<Utc>>,
    /// The batch claimed: when, and its pages' keys (fixed at the claim).
    batch: Option<(DateTime<Utc>, Vec<String>)>,
}

impl Pager {
    fn batch(&self) -> Option<PageBatch> {
        let (at, keys) = self.batch.as_ref()?;
        Some(PageBatch {
            at: *at,
            pages: self
                .pages
                .iter()
                .filter(|p| keys.contains(&p.key))
                .cloned()
                .collect(),
        })
    }

    fn due(&self, now: DateTime<Utc>, quiet: chrono::Duration) -> bool {
        self.batch.is_some()
            || (!self.pages.is_empty() && self.sent_at.is_none_or(|at| at <= now - quiet))
    }
}

impl super::Inner {
    /// Removes the waiting pages about `customer`; how many there were.
    pub(super) fn forget_pages_about(&mut self, customer: &WaId) -> u64 {
        let mut gone = 0;
        for pager in self.pagers.values_mut() {
            let before = pager.pages.len();
            pager.pages.retain(|p| p.customer != *customer);
            gone += (before - pager.pages.len()) as u64;
        }
        gone
    }
}

#[async_trait]
impl PagerStore for MemoryStore {
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()> {
        let mut inner = self.lock();
        let pager = inner.pagers.entry(member.clone()).or_default();
        if !pager.pages.iter().any(|p| p.key == page.key)
            && !pager.sent.iter().any(|(key, _)| *key == page.key)
        {
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
        if pager.batch.is_some() {
            return Ok(pager.batch());
        }
        if !pager.due(now, quiet) {
            return Ok(None);
        }
        pager.batch = Some((now, pager.pages.iter().map(|p| p.key.clone()).collect()));
        pager.sent_at = Some(now);
        Ok(pager.batch())
    }

    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()> {
        let mut inner = self.lock();
        if let Some(pager) = inner.pagers.get_mut(member)
            && pager.batch.as_ref().is_some_and(|(at, _)| *at == batch.at)
            && let Some((_, sent)) = pager.batch.take()
        {
            pager.pages.retain(|p| !sent.contains(&p.key));
            let now = Utc::now();
            pager
                .sent
                .retain(|(_, at)| *at > now - chrono::Duration::days(1));
            pager.sent.extend(sent.into_iter().map(|key| (key, now)));
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
