//! `feed_imports` in memory: [`FeedImportStore`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::MemoryRealEstate;
use crate::realestate::store::{FeedImportRecord, FeedImportStore};
use crate::store::StoreResult;

#[async_trait]
impl FeedImportStore for MemoryRealEstate {
    async fn claim_feed_import(
        &self,
        round: &str,
        instance: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        if inner.feed_imports.contains_key(round) {
            return Ok(false);
        }
        inner.feed_imports.insert(
            round.to_owned(),
            FeedImportRecord {
                round: round.to_owned(),
                instance: instance.to_owned(),
                started_at: at,
                finished_at: None,
                summary: None,
                error: None,
            },
        );
        Ok(true)
    }

    async fn finish_feed_import(&self, record: &FeedImportRecord) -> StoreResult<()> {
        self.lock()
            .feed_imports
            .insert(record.round.clone(), record.clone());
        Ok(())
    }

    async fn feed_imports(&self, limit: usize) -> StoreResult<Vec<FeedImportRecord>> {
        let mut records: Vec<FeedImportRecord> =
            self.lock().feed_imports.values().cloned().collect();
        records.sort_by_key(|r| std::cmp::Reverse(r.started_at));
        records.truncate(limit);
        Ok(records)
    }
}
