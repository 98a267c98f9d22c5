//! `feed_imports` in MongoDB: [`FeedImportStore`]. A round is claimed by inserting its `_id`,
//! which one instance wins.

use async_trait::async_trait;
use bson::doc;
use chrono::{DateTime, Utc};

use super::MongoRealEstate;
use super::codec::{Fields, date, opt_date, opt_str};
use crate::realestate::store::{FeedImportRecord, FeedImportStore};
use crate::store::StoreResult;

fn record(d: &bson::Document) -> StoreResult<FeedImportRecord> {
    let f = Fields(d);
    Ok(FeedImportRecord {
        round: f.required_str("_id")?,
        instance: f.text("instance"),
        started_at: f.required_date("started_at")?,
        finished_at: f.date("finished_at"),
        summary: f.str("summary"),
        error: f.str("error"),
    })
}

#[async_trait]
impl FeedImportStore for MongoRealEstate {
    async fn claim_feed_import(
        &self,
        round: &str,
        instance: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.insert_claim(
            "feed_imports",
            doc! {"_id": round, "instance": instance, "started_at": date(at)},
        )
        .await
    }

    async fn finish_feed_import(&self, r: &FeedImportRecord) -> StoreResult<()> {
        self.upsert_all(
            "feed_imports",
            vec![doc! {
                "_id": &r.round,
                "instance": &r.instance,
                "started_at": date(r.started_at),
                "finished_at": opt_date(r.finished_at),
                "summary": opt_str(r.summary.as_deref()),
                "error": opt_str(r.error.as_deref()),
            }],
        )
        .await
    }

    async fn feed_imports(&self, limit: usize) -> StoreResult<Vec<FeedImportRecord>> {
        let mut records = self
            .find_all("feed_imports", doc! {}, doc! {"started_at": -1}, record)
            .await?;
        records.truncate(limit);
        Ok(records)
    }
}
