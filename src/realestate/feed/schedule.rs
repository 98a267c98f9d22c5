//! `serve` imports `ZAGUAN_LISTINGS_FEED_URL` every `ZAGUAN_LISTINGS_FEED_EVERY`, on one
//! instance at a time: each period is a round whose record one instance claims
//! (`feed_imports`), so two instances never import the same feed at once and none imports it
//! twice in a period. The outcome is logged, counted and kept for the console; a failed round
//! changes nothing and the next period tries again.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{ImportError, ImportOptions, fetch, import_kyero};
use crate::realestate::{FeedImportRecord, RealEstateStore};
use crate::runtime::{PeriodicJob, spawn_every};

/// Where the feed is and how often it is read.
#[derive(Debug, Clone)]
pub struct FeedSettings {
    pub url: url::Url,
    pub every: Duration,
    /// [`ImportOptions::min_share`] (`ZAGUAN_LISTINGS_FEED_MIN_SHARE`).
    pub min_share: f64,
}

pub struct FeedImports {
    store: Arc<dyn RealEstateStore>,
    client: reqwest::Client,
    settings: FeedSettings,
    instance: String,
}

impl FeedImports {
    pub fn new(
        store: Arc<dyn RealEstateStore>,
        settings: FeedSettings,
        instance: String,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            store,
            client,
            settings,
            instance,
        })
    }

    /// Looks often enough to start each period's round within a minute of it.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let look = self.settings.every.min(Duration::from_secs(60));
        spawn_every(self, look)
    }

    /// The round `now` falls in: the start of its period, so every instance names it alike.
    pub fn round_of(&self, now: DateTime<Utc>) -> String {
        let every = self.settings.every.as_secs().max(1) as i64;
        let start = now.timestamp().div_euclid(every) * every;
        let start = DateTime::from_timestamp(start, 0).unwrap_or(now);
        format!("listings:{}", start.format("%Y-%m-%dT%H:%M:%SZ"))
    }
}

impl PeriodicJob for FeedImports {
    const DONE: Option<&'static str> = None;
    const FAILED: &'static str = "listings feed not imported";
    type Error = crate::store::StoreError;

    async fn round(&self, now: DateTime<Utc>) -> Result<usize, Self::Error> {
        let round = self.round_of(now);
        if !self
            .store
            .claim_feed_import(&round, &self.instance, now)
            .await?
        {
            return Ok(0);
        }
        let outcome = match fetch(&self.client, self.settings.url.as_str()).await {
            Err(why) => Err(format!("{why}; nothing was changed")),
            Ok(xml) => import_kyero(
                self.store.as_ref(),
                &xml,
                ImportOptions {
                    min_share: self.settings.min_share,
                    ..ImportOptions::at(now)
                },
            )
            .await
            .map_err(|error| match error {
                ImportError::Store(error) => format!("store: {error}"),
                refused => refused.to_string(),
            }),
        };
        let mut record = FeedImportRecord {
            round,
            instance: self.instance.clone(),
            started_at: now,
            finished_at: Some(Utc::now()),
            summary: None,
            error: None,
        };
        let changed = match outcome {
            Ok(report) => {
                tracing::info!(
                    added = report.added.len(),
                    updated = report.updated.len(),
                    withdrawn = report.withdrawn.len(),
                    back = report.back.len(),
                    skipped = report.skipped.len(),
                    "listings feed imported: {}",
                    report.summary()
                );
                for skipped in &report.skipped {
                    tracing::warn!(
                        position = skipped.position,
                        id = skipped.id.as_deref().unwrap_or("?"),
                        "feed property skipped: {}",
                        skipped.reason
                    );
                }
                metrics::counter!("zaguan_listings_feed_imports_total", "outcome" => "imported")
                    .increment(1);
                for (change, count) in [
                    ("added", report.added.len()),
                    ("updated", report.updated.len()),
                    ("withdrawn", report.withdrawn.len()),
                    ("back", report.back.len()),
                    ("skipped", report.skipped.len()),
                ] {
                    metrics::gauge!("zaguan_listings_feed_last_import", "change" => change)
                        .set(count as f64);
                }
                record.summary = Some(report.summary());
                report.added.len()
                    + report.updated.len()
                    + report.withdrawn.len()
                    + report.back.len()
            }
            Err(why) => {
                tracing::warn!("listings feed not imported: {why}");
                metrics::counter!("zaguan_listings_feed_imports_total", "outcome" => "refused")
                    .increment(1);
                record.error = Some(why);
                0
            }
        };
        self.store.finish_feed_import(&record).await?;
        Ok(changed)
    }
}
