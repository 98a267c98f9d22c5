//! The cleanup job: deletes what the retention settings no longer keep — answered inbox
//! messages, sent outbox parts, old history, LLM call records and expired lease records — so
//! the collections stop growing with traffic. Plain deletes by age rather than TTL indexes
//! (FerretDB has none), run by every instance (deleting twice is harmless).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::{MaintenanceStore, PurgeBefore, PurgeCounts, StoreError};

/// How long finished records are kept (`None`: forever). The cleanup job deletes older ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Answered or failed inbox messages.
    pub inbox: Option<Duration>,
    /// Outbox parts sent, delivered, read or failed.
    pub outbox: Option<Duration>,
    /// The conversation history.
    pub messages: Option<Duration>,
    pub llm_calls: Option<Duration>,
    /// Business events delivered or failed.
    pub events: Option<Duration>,
}

/// Lease records are only needed while a lease may still be renewed or taken over.
const LEASE_RECORDS_KEPT: chrono::Duration = chrono::Duration::days(1);

pub struct Cleanup {
    store: Arc<dyn MaintenanceStore>,
    retention: Retention,
}

impl Cleanup {
    pub fn new(store: Arc<dyn MaintenanceStore>, retention: Retention) -> Self {
        Self { store, retention }
    }

    /// The cut-off dates at `now`.
    pub fn cutoffs(&self, now: DateTime<Utc>) -> PurgeBefore {
        let before = |keep: Option<Duration>| {
            keep.map(|keep| now - chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX))
        };
        PurgeBefore {
            inbox: before(self.retention.inbox),
            outbox: before(self.retention.outbox),
            messages: before(self.retention.messages),
            llm_calls: before(self.retention.llm_calls),
            leases: Some(now - LEASE_RECORDS_KEPT),
            events: before(self.retention.events),
        }
    }

    /// One pass: deletes, logs and counts what went.
    pub async fn run_once(&self, now: DateTime<Utc>) -> Result<PurgeCounts, StoreError> {
        let counts = self.store.purge(&self.cutoffs(now)).await?;
        for (collection, deleted) in [
            ("inbox", counts.inbox),
            ("outbox", counts.outbox),
            ("messages", counts.messages),
            ("llm_calls", counts.llm_calls),
            ("leases", counts.leases),
            ("webhook_rejects", counts.webhook_rejects),
            ("events", counts.events),
        ] {
            metrics::counter!("zaguan_retention_deleted_total", "collection" => collection)
                .increment(deleted);
        }
        if counts != PurgeCounts::default() {
            tracing::info!(?counts, "old records deleted");
        }
        Ok(counts)
    }

    /// Runs every `every` (the first pass a minute after start-up, off the start-up path).
    pub fn spawn(self, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60).min(every)).await;
            loop {
                if let Err(error) = self.run_once(Utc::now()).await {
                    tracing::warn!("cleanup failed, retrying at the next pass: {error}");
                }
                tokio::time::sleep(every).await;
            }
        })
    }
}
