//! The agency's listings feed as its whole inventory: `zaguan listings import FILE|URL
//! --format kyero`, and `serve` every `ZAGUAN_LISTINGS_FEED_EVERY`. The feed's `ref` is the
//! listing id customers quote; a listing the feed no longer holds is withdrawn (never
//! deleted), one that comes back is available again, a lower price stamps
//! `price_dropped_at` — which is what saved searches ([`super::alerts`]) hear of, like new
//! listings.
//!
//! Bad input changes nothing: a feed that does not parse, is cut short, or holds far fewer
//! listings than are listed now (below [`ImportOptions::min_share`], unless
//! `allow_shrink`) is refused whole; one `<property>` that cannot be a listing is skipped and
//! named, and the rest imported.

pub mod kyero;
pub mod schedule;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{ListingStatus, Operation, Property, PropertyFilter, PropertyStore, PropertyType};
use crate::domain::GeoPoint;
use crate::store::StoreError;

/// Listings written to the store at once.
const WRITE_BATCH: usize = 500;
/// Largest feed fetched from a URL.
pub const MAX_FEED_BYTES: usize = 200 * 1024 * 1024;
/// Longest a feed's download may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The feed was refused whole; nothing changed.
    #[error("{0}; nothing was changed")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How an import may change the inventory.
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    /// Import a feed that holds fewer than `min_share` of the listings listed now.
    pub allow_shrink: bool,
    /// The share of today's listings a feed must hold (default one half): a CRM export cut
    /// at the source still parses, and would otherwise withdraw the rest.
    pub min_share: f64,
    pub now: DateTime<Utc>,
}

impl ImportOptions {
    pub fn at(now: DateTime<Utc>) -> Self {
        ImportOptions {
            allow_shrink: false,
            min_share: 0.5,
            now,
        }
    }
}

/// A `<property>` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedListing {
    pub position: usize,
    pub id: Option<String>,
    pub reason: String,
}

/// What an import did, by listing id.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    /// Listings the feed held.
    pub in_feed: usize,
    pub added: Vec<String>,
    pub updated: Vec<String>,
    /// Of `updated`, those whose price went down.
    pub cheaper: Vec<String>,
    pub withdrawn: Vec<String>,
    /// Withdrawn before, in the feed again: available.
    pub back: Vec<String>,
    pub unchanged: usize,
    pub skipped: Vec<SkippedListing>,
}

impl ImportReport {
    /// `200 in the feed: 3 added, 2 updated (1 cheaper), 10 withdrawn, 0 back, 185 unchanged,
    /// 1 skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} in the feed: {} added, {} updated ({} cheaper), {} withdrawn, {} back, {} unchanged, {} skipped",
            self.in_feed,
            self.added.len(),
            self.updated.len(),
            self.cheaper.len(),
            self.withdrawn.len(),
            self.back.len(),
            self.unchanged,
            self.skipped.len()
        )
    }
}

/// Imports a Kyero v3 feed as the whole inventory.
pub async fn import_kyero(
    store: &(impl PropertyStore + ?Sized),
    xml: &[u8],
    options: ImportOptions,
) -> Result<ImportReport, ImportError> {
    let feed = kyero::read(xml).map_err(|e| ImportError::Refused(e.to_string()))?;
    let mut report = ImportReport {
        skipped: feed
            .skipped
            .iter()
            .map(|s| SkippedListing {
                position: s.position,
                id: s.id.clone(),
                reason: s.reason.clone(),
            })
            .collect(),
        ..ImportReport::default()
    };
    let stored: HashMap<String, Property> = store
        .properties(&PropertyFilter::default())
        .await?
        .into_iter()
        .map(|p| (p.id.clone(), p))
        .collect();
    // Mapped first, so a listing that cannot be shown is skipped before anything is counted.
    let mut incoming: BTreeMap<String, Property> = BTreeMap::new();
    for (listing, position) in feed.listings.iter().zip(positions(&feed)) {
        match listing_of(listing, stored.get(&listing.reference), options.now) {
            Ok(property) => {
                incoming.insert(property.id.clone(), property);
            }
            Err(reason) => report.skipped.push(SkippedListing {
                position,
                id: Some(listing.reference.clone()),
                reason,
            }),
        }
    }
    report.skipped.sort_by_key(|s| s.position);
    report.in_feed = incoming.len();
    let listed_now = stored
        .values()
        .filter(|p| p.status != ListingStatus::Withdrawn)
        .count();
    let needed = (options.min_share * listed_now as f64).ceil() as usize;
    if !options.allow_shrink && listed_now > 0 && incoming.len() < needed {
        return Err(ImportError::Refused(format!(
            "the feed holds {} listings, fewer than {:.0} % of the {listed_now} listed now \
             (a feed cut at the source?); `--allow-shrink` imports it anyway",
            incoming.len(),
            options.min_share * 100.0
        )));
    }
    let mut writes: Vec<Property> = Vec::new();
    for (id, mut property) in incoming.iter().map(|(id, p)| (id.clone(), p.clone())) {
        match stored.get(&id) {
            None => {
                report.added.push(id);
                writes.push(property);
            }
            Some(before) => {
                if before.status == ListingStatus::Withdrawn {
                    report.back.push(id.clone());
                } else if property.price < before.price {
                    report.cheaper.push(id.clone());
                    property.price_dropped_at = Some(options.now);
                }
                if property == *before {
                    report.unchanged += 1;
                } else {
                    if before.status != ListingStatus::Withdrawn {
                        report.updated.push(id);
                    }
                    writes.push(property);
                }
            }
        }
    }
    for (id, before) in &stored {
        if incoming.contains_key(id)
            || !matches!(
                before.status,
                ListingStatus::Available | ListingStatus::Reserved
            )
        {
            continue;
        }
        let mut withdrawn = before.clone();
        withdrawn.status = ListingStatus::Withdrawn;
        report.withdrawn.push(id.clone());
        writes.push(withdrawn);
    }
    report.withdrawn.sort();
    for batch in writes.chunks(WRITE_BATCH) {
        store.upsert_properties(batch).await?;
    }
    Ok(report)
}

/// The feed positions of `feed.listings`, in order: every `<property>` counts, skipped or not.
fn positions(feed: &kyero::Feed) -> Vec<usize> {
    let skipped: std::collections::HashSet<usize> =
        feed.skipped.iter().map(|s| s.position).collect();
    (1..)
        .filter(|p| !skipped.contains(p))
        .take(feed.listings.len())
        .collect()
}

/// A feed's listing as ours, over what is stored for it: the feed says what it holds; the
/// agency's own fields (owner, agent, when it was listed, whether it is reserved or sold)
/// stay.
fn listing_of(
    listing: &kyero::FeedListing,
    stored: Option<&Property>,
    now: DateTime<Utc>,
) -> Result<Property, String> {
    let price = listing
        .price
        .ok_or("no price (on request): a listing is shown with its price")?;
    let currency = listing.currency.trim().to_ascii_uppercase();
    if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(format!("`{currency}` is not a currency code like EUR"));
    }
    if listing.reference.chars().count() > 40 || listing.reference.chars().any(char::is_whitespace)
    {
        return Err(format!(
            "`{}` cannot be a reference customers quote (spaces, or over 40 characters)",
            listing.reference
        ));
    }
    let kind = PropertyType::parse(listing.kind).ok_or("no type")?;
    let operation = if listing.rent {
        Operation::Rent
    } else {
        Operation::Sale
    };
    let descriptions: BTreeMap<String, String> = listing
        .descriptions
        .iter()
        .map(|(lang, text)| (lang.to_ascii_lowercase(), text.clone()))
        .collect();
    let description = listing.description("es").unwrap_or_default().to_owned();
    let title = match listing.beds {
        0 => format!("{} en {}", capitalised(kind.label_es()), listing.town),
        1 => format!(
            "{} de 1 habitación en {}",
            capitalised(kind.label_es()),
            listing.town
        ),
        beds => format!(
            "{} de {beds} habitaciones en {}",
            capitalised(kind.label_es()),
            listing.town
        ),
    };
    let address = [
        listing.location_detail.as_deref().unwrap_or_default(),
        &listing.town,
        &listing.province,
    ]
    .iter()
    .map(|part| part.trim())
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join(", ");
    // WhatsApp fetches images over https; a feed's http links are asked for over https.
    let photos = listing
        .images
        .iter()
        .map(|url| match url.strip_prefix("http://") {
            Some(rest) => format!("https://{rest}"),
            None => url.clone(),
        })
        .collect();
    let (lat, lon) = listing.location.unwrap_or((0.0, 0.0));
    Ok(Property {
        id: listing.reference.clone(),
        title,
        description,
        operation,
        kind,
        city: listing.town.trim().to_owned(),
        neighbourhood: listing
            .location_detail
            .clone()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        address,
        location: GeoPoint { lat, lon },
        price,
        currency,
        bedrooms: listing.beds,
        bathrooms: listing.baths,
        area_m2: listing.built_m2.unwrap_or(0),
        amenities: listing.amenities.clone(),
        status: match stored.map(|p| p.status) {
            None | Some(ListingStatus::Withdrawn) => ListingStatus::Available,
            Some(status) => status,
        },
        owner_id: stored.map(|p| p.owner_id.clone()).unwrap_or_default(),
        listed_at: stored.map_or(now, |p| p.listed_at),
        photos,
        price_dropped_at: stored.and_then(|p| p.price_dropped_at),
        agent_id: stored.and_then(|p| p.agent_id.clone()),
        feed_id: Some(listing.feed_id.clone()).filter(|id| !id.is_empty()),
        descriptions,
    })
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Downloads a feed: within [`FETCH_TIMEOUT`] and [`MAX_FEED_BYTES`], or an error saying
/// which.
pub async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
    super::download::bounded(client, url, url, MAX_FEED_BYTES, FETCH_TIMEOUT).await
}

#[cfg(test)]
mod tests;
