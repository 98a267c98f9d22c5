//! MongoStore's `pagers`: each page a document of `pages` (`_id` the member and the page's key,
//! so a page written twice is one — also after it was sent: a sent page stays a day, marked
//! `sent`, so a step replayed by another instance does not page again), and each message sent a generation document of
//! `pager_claims` (`{member}#{n}`) naming the pages it holds. Claiming is inserting the next
//! generation: the unique `_id` makes one claimant win, on MongoDB and on FerretDB, whose
//! conditional updates read then write and so cannot arbitrate (as the leases' claims).

use async_trait::async_trait;
use bson::{Bson, Document, doc};
use chrono::{DateTime, Utc};

use crate::domain::WaId;
use crate::store::mongo::codec::{Fields, date};
use crate::store::pool::{Find, Lane};
use crate::store::{MongoStore, Page, PageBatch, PagerStore, StoreResult};

const PAGES: &str = "pages";
const CLAIMS: &str = "pager_claims";

/// How long a sent page stays to turn away a replayed copy of it.
const SENT_PAGES_KEPT: chrono::Duration = chrono::Duration::days(1);

/// Most pages one message is claimed with (a digest names 15 and counts the rest).
const MOST_PAGES: usize = 500;

/// The latest claim of a member's pager.
struct Claim {
    generation: i64,
    at: DateTime<Utc>,
    keys: Vec<String>,
    sent: bool,
}

impl MongoStore {
    async fn latest_claim(&self, member: &WaId) -> StoreResult<Option<Claim>> {
        let doc = self
            .pool
            .find_one(
                Lane::Work,
                CLAIMS,
                doc! {"member": member.as_str()},
                Find::sorted(doc! {"generation": -1}),
            )
            .await?;
        Ok(doc.and_then(|doc| {
            let f = Fields(&doc);
            Some(Claim {
                generation: f.int("generation")?,
                at: f.date("at")?,
                keys: match doc.get("keys") {
                    Some(Bson::Array(keys)) => keys
                        .iter()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect(),
                    _ => Vec::new(),
                },
                sent: doc.get_bool("sent").unwrap_or(false),
            })
        }))
    }

    /// The pages of `member` waiting, oldest first.
    async fn waiting_pages(&self, member: &WaId) -> StoreResult<Vec<Page>> {
        let docs = self
            .pool
            .find(
                Lane::Work,
                PAGES,
                doc! {"member": member.as_str(), "sent": {"$ne": true}},
                Find::sorted(doc! {"at": 1, "_id": 1}).limit(MOST_PAGES),
            )
            .await?;
        Ok(docs.iter().filter_map(page_of).collect())
    }

    /// The batch of `claim`: its pages, as they were claimed.
    async fn batch_of(&self, member: &WaId, claim: &Claim) -> StoreResult<PageBatch> {
        let pages = self
            .waiting_pages(member)
            .await?
            .into_iter()
            .filter(|p| claim.keys.contains(&p.key))
            .collect();
        Ok(PageBatch {
            at: claim.at,
            pages,
        })
    }
}

#[async_trait]
impl PagerStore for MongoStore {
    async fn page(&self, member: &WaId, page: &Page) -> StoreResult<()> {
        let mut document = page_doc(page);
        document.insert("_id", format!("{}#{}", member.as_str(), page.key));
        document.insert("member", member.as_str());
        // Written twice (a replayed step): the first copy stays.
        self.pool
            .insert_unique(Lane::Work, PAGES, document)
            .await
            .map(drop)
    }

    async fn claim_pages(
        &self,
        member: &WaId,
        now: DateTime<Utc>,
        quiet: chrono::Duration,
    ) -> StoreResult<Option<PageBatch>> {
        let latest = self.latest_claim(member).await?;
        if let Some(claim) = &latest {
            if !claim.sent {
                return Ok(Some(self.batch_of(member, claim).await?));
            }
            if claim.at > now - quiet {
                return Ok(None);
            }
        }
        let pages = self.waiting_pages(member).await?;
        if pages.is_empty() {
            return Ok(None);
        }
        let generation = latest.as_ref().map_or(1, |c| c.generation + 1);
        // Stored to the millisecond: the batch reads back with the time it was claimed at.
        let at = DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now);
        let keys: Vec<String> = pages.iter().map(|p| p.key.clone()).collect();
        let claimed = self
            .pool
            .insert_unique(
                Lane::Work,
                CLAIMS,
                doc! {
                    "_id": format!("{}#{generation}", member.as_str()),
                    "member": member.as_str(),
                    "generation": generation,
                    "at": date(at),
                    "keys": &keys,
                    "sent": false,
                },
            )
            .await?;
        if claimed {
            return Ok(Some(PageBatch { at, pages }));
        }
        // Another instance claimed first: its batch, while it is not sent.
        match self.latest_claim(member).await? {
            Some(claim) if !claim.sent => Ok(Some(self.batch_of(member, &claim).await?)),
            _ => Ok(None),
        }
    }

    async fn pages_sent(&self, member: &WaId, batch: &PageBatch) -> StoreResult<()> {
        let Some(claim) = self.latest_claim(member).await? else {
            return Ok(());
        };
        if claim.sent || claim.at.timestamp_millis() != batch.at.timestamp_millis() {
            return Ok(());
        }
        // The pages first: a crash in between sends the batch again under the same id. They
        // stay, marked, so that the same page written again (a step replayed on another
        // instance, an escalation pass racing the turn) is one already sent.
        let sent_at = date(Utc::now());
        for key in &claim.keys {
            self.pool
                .update_one(
                    Lane::Work,
                    PAGES,
                    doc! {"_id": format!("{}#{key}", member.as_str())},
                    doc! {"$set": {"sent": true, "sent_at": sent_at}},
                )
                .await?;
        }
        self.pool
            .delete_many(
                Lane::Work,
                PAGES,
                doc! {
                    "member": member.as_str(),
                    "sent": true,
                    "sent_at": {"$lt": date(Utc::now() - SENT_PAGES_KEPT)},
                },
            )
            .await?;
        self.pool
            .update_one(
                Lane::Work,
                CLAIMS,
                doc! {"_id": format!("{}#{}", member.as_str(), claim.generation)},
                doc! {"$set": {"sent": true}},
            )
            .await?;
        // Only the latest claim is read: the older ones go.
        self.pool
            .delete_many(
                Lane::Work,
                CLAIMS,
                doc! {"member": member.as_str(), "generation": {"$lt": claim.generation}},
            )
            .await
            .map(drop)
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
                PAGES,
                doc! {"sent": {"$ne": true}},
                Find::sorted(doc! {"at": 1})
                    .limit(MOST_PAGES)
                    .projection(doc! {"member": 1}),
            )
            .await?;
        let mut members: Vec<WaId> = Vec::new();
        for doc in &docs {
            if let Some(member) = doc.get_str("member").ok().and_then(|m| WaId::parse(m).ok())
                && !members.contains(&member)
            {
                members.push(member);
            }
        }
        let mut due = Vec::new();
        for member in members {
            if due.len() >= limit {
                break;
            }
            let ready = match self.latest_claim(&member).await? {
                Some(claim) => !claim.sent || claim.at <= now - quiet,
                None => true,
            };
            if ready {
                due.push(member);
            }
        }
        Ok(due)
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
