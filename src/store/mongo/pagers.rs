//! MongoStore's `pagers`: one document per staff member, changed only by a compare-and-set on
//! its `v` — a page added while another instance claims a batch makes one of the two read
//! again, never loses the other's change (FerretDB has no pipeline updates to do it in one).

use async_trait::async_trait;
use bson::{Bson, Document, doc};
use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::store::mongo::codec::{Fields, date};
use crate::store::pool::{Find, Lane};
use crate::store::{MongoStore, Page, PageBatch, PagerStore, StoreError, StoreResult};

/// Tries of a compare-and-set before the write is given up as contended.
const MAX_RACES: usize = 8;

/// A pager as read: its version, pages and times.
struct Pager {
    version: i64,
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
}

impl MongoStore {
    async fn pager(&self, member: &WaId) -> StoreResult<Option<Pager>> {
        let doc = self
            .pool
            .find_one(
                Lane::Work,
                "pagers",
                doc! {"_id": member.as_str()},
                Find::default(),
            )
            .await?;
        Ok(doc.map(|doc| {
            let f = Fields(&doc);
            Pager {
                version: f.int("v").unwrap_or(0),
                pages: match doc.get("pages") {
                    Some(Bson::Array(items)) => items
                        .iter()
                        .filter_map(|item| match item {
                            Bson::Document(page) => page_of(page),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                },
                sent_at: f.date("sent_at"),
                batch_at: f.date("batch_at"),
            }
        }))
    }

    /// Writes `pager` as the version after `from` (`None`: a pager not there yet); `false`
    /// when another write came first.
    async fn put_pager(
        &self,
        member: &WaId,
        from: Option<i64>,
        pager: &Pager,
    ) -> StoreResult<bool> {
        let fields = doc! {
            "v": pager.version,
            "pages": pager.pages.iter().map(page_doc).collect::<Vec<_>>(),
            "waiting": i64::try_from(pager.pages.len()).unwrap_or(i64::MAX),
            "sent_at": pager.sent_at.map(date),
            "batch_at": pager.batch_at.map(date),
        };
        match from {
            None => {
                let mut document = doc! {"_id": member.as_str()};
                document.extend(fields);
                self.pool
                    .insert_unique(Lane::Work, "pagers", document)
                    .await
            }
            Some(version) => Ok(self
                .pool
                .update_one(
                    Lane::Work,
                    "pagers",
                    doc! {"_id": member.as_str(), "v": version},
                    doc! {"$set": fields},
                )
                .await?
                .matched_count
                == 1),
        }
    }

    /// Reads `member`'s pager, changes it with `change` (which returns what to answer, and
    /// whether anything changed), and writes it back unless another write came first — then
    /// again, from what that write left.
    async fn change_pager<T>(
        &self,
        member: &WaId,
        mut change: impl FnMut(&mut Pager) -> (T, bool),
    ) -> StoreResult<T> {
        for _ in 0..MAX_RACES {
            let read = self.pager(member).await?;
            let from = read.as_ref().map(|p| p.version);
            let mut pager = read.unwrap_or(Pager {
                version: 0,
                pages: Vec::new(),
                sent_at: None,
                batch_at: None,
            });
            let (answer, changed) = change(&mut pager);
            if !changed {
                return Ok(answer);
            }
            pager.version += 1;
            if self.put_pager(member, from, &pager).await? {
                return Ok(answer);
            }
        }
        Err(StoreError::Unexpected(anyhow::anyhow!(
            "a staff member's pager kept changing under {MAX_RACES} writes"
        )))
    }
}

#[async_trait]
impl PagerStore for MongoStore {
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()> {
        self.change_pager(member, |pager| {
            if pager.pages.iter().any(|p| p.key == page.key) {
                return ((), false);
            }
            pager.pages.push(page.clone());
            ((), true)
        })
        .await
    }

    async fn claim_pages(
        &self,
        member: &WaId,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
    ) -> StoreResult<Option<PageBatch>> {
        self.change_pager(member, |pager| {
            if let Some(at) = pager.batch_at {
                return (Some(pager.batch(at)), false);
            }
            let quiet_enough = pager.sent_at.is_none_or(|at| at <= now - quiet);
            if pager.pages.is_empty() || !quiet_enough {
                return (None, false);
            }
            pager.batch_at = Some(now);
            pager.sent_at = Some(now);
            (Some(pager.batch(now)), true)
        })
        .await
    }

    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()> {
        self.change_pager(member, |pager| {
            if pager
                .batch_at
                .is_none_or(|at| at.timestamp_millis() != batch.at.timestamp_millis())
            {
                return ((), false);
            }
            pager
                .pages
                .retain(|p| !batch.pages.iter().any(|sent| sent.key == p.key));
            pager.batch_at = None;
            ((), true)
        })
        .await
    }

    async fn due_pagers(
        &self,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
        limit: usize,
    ) -> StoreResult<Vec<WaId>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                "pagers",
                doc! {"$or": [
                    {"batch_at": {"$ne": Bson::Null}},
                    {"waiting": {"$gt": 0_i64}, "sent_at": Bson::Null},
                    {"waiting": {"$gt": 0_i64}, "sent_at": {"$lte": date(now - quiet)}},
                ]},
                Find::sorted(doc! {"_id": 1})
                    .limit(limit)
                    .projection(doc! {"_id": 1}),
            )
            .await?;
        Ok(docs
            .iter()
            .filter_map(|doc| WaId::parse(doc.get_str("_id").ok()?).ok())
            .collect())
    }
}

fn page_doc(page: &Page) -> Document {
    doc! {
        "key": &page.key,
        "customer": page.customer.as_str(),
        "label": &page.label,
        "reason": &page.reason,
        "text": &page.text,
        "link": &page.link,
        "staff_id": &page.staff_id,
        "phone_number_id": page.phone_number_id.as_deref(),
        "at": date(page.at),
    }
}

fn page_of(doc: &Document) -> Option<Page> {
    let f = Fields(doc);
    Some(Page {
        key: f.str("key")?,
        customer: f.wa_id("customer").ok()?,
        label: f.str("label").unwrap_or_default(),
        reason: f.str("reason").unwrap_or_default(),
        text: f.str("text").unwrap_or_default(),
        link: f.str("link").unwrap_or_default(),
        staff_id: f.str("staff_id").unwrap_or_default(),
        phone_number_id: f.str("phone_number_id"),
        at: f.date("at")?,
    })
}
