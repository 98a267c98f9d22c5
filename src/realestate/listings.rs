//! Listings written by the agency's staff: `zaguan listings add|update FILE.json` and the admin
//! API's `POST /admin/listings` and `PATCH /admin/listings/{id}` share this. A batch is checked
//! whole before anything is written, so a bad line changes nothing; an update is a merge of the
//! fields given over the stored listing, and a lower price stamps `price_dropped_at`, which is
//! what tells saved searches ([`super::alerts`]) the listing is news again.

use crate::realestate::PropertyStore;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::Property;
use crate::store::StoreError;

/// Most listings in one batch.
pub const MAX_BATCH: usize = 1_000;

#[derive(Debug, thiserror::Error)]
pub enum ListingsError {
    /// The input is wrong; nothing was written.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a batch did, by listing id.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Applied {
    pub added: Vec<String>,
    pub updated: Vec<String>,
    /// Of `updated`, the ones whose price went down.
    pub price_drops: Vec<String>,
}

/// The listings of a file or request body: one JSON object, or an array of them.
pub fn parse(text: &str) -> Result<Vec<Map<String, Value>>, ListingsError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ListingsError::Invalid(format!("not valid JSON: {e}")))?;
    let items = match value {
        Value::Array(items) => items,
        object @ Value::Object(_) => vec![object],
        _ => {
            return Err(ListingsError::Invalid(
                "expected a listing (a JSON object) or an array of listings".into(),
            ));
        }
    };
    if items.len() > MAX_BATCH {
        return Err(ListingsError::Invalid(format!(
            "{} listings in one batch; at most {MAX_BATCH}",
            items.len()
        )));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(map) => Ok(map),
            _ => Err(ListingsError::Invalid(format!(
                "item {}: a listing is a JSON object",
                i + 1
            ))),
        })
        .collect()
}

/// Adds new listings; one whose id is taken is an error (update it instead). `listed_at`
/// defaults to `now`.
pub async fn add(
    store: &(impl PropertyStore + ?Sized),
    items: Vec<Map<String, Value>>,
    now: DateTime<Utc>,
) -> Result<Applied, ListingsError> {
    let mut listings = Vec::with_capacity(items.len());
    for (i, mut item) in items.into_iter().enumerate() {
        item.entry("listed_at")
            .or_insert_with(|| Value::String(now.to_rfc3339()));
        item.remove("price_dropped_at");
        let property = read(i, item)?;
        if listings.iter().any(|p: &Property| p.id == property.id) {
            return Err(invalid(i, &property.id, "appears twice in the batch"));
        }
        if store.property(&property.id).await?.is_some() {
            return Err(invalid(
                i,
                &property.id,
                "already exists; use `listings update` to change it",
            ));
        }
        listings.push(property);
    }
    store.upsert_properties(&listings).await?;
    Ok(Applied {
        added: listings.into_iter().map(|p| p.id).collect(),
        ..Applied::default()
    })
}

/// Changes existing listings: each item names its `id` and the fields to change.
pub async fn update(
    store: &(impl PropertyStore + ?Sized),
    items: Vec<Map<String, Value>>,
    now: DateTime<Utc>,
) -> Result<Applied, ListingsError> {
    let mut applied = Applied::default();
    let mut listings: Vec<Property> = Vec::with_capacity(items.len());
    for (i, patch) in items.into_iter().enumerate() {
        let id = patch
            .get("id")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                ListingsError::Invalid(format!(
                    "item {}: `id` (the listing's P-…) is required",
                    i + 1
                ))
            })?
            .to_owned();
        if listings.iter().any(|p| p.id == id) {
            return Err(invalid(i, &id, "appears twice in the batch"));
        }
        let Some(stored) = store.property(&id).await? else {
            return Err(invalid(
                i,
                &id,
                "does not exist; use `listings add` for a new one",
            ));
        };
        let Value::Object(mut merged) =
            serde_json::to_value(&stored).map_err(|e| invalid(i, &id, &e.to_string()))?
        else {
            return Err(invalid(
                i,
                &id,
                "is stored in a shape that cannot be merged",
            ));
        };
        merged.extend(patch.into_iter().filter(|(k, _)| k != "price_dropped_at"));
        let mut property = read(i, merged)?;
        if property.price < stored.price {
            property.price_dropped_at = Some(now);
            applied.price_drops.push(id.clone());
        }
        applied.updated.push(id);
        listings.push(property);
    }
    store.upsert_properties(&listings).await?;
    Ok(applied)
}

/// One listing from its JSON, checked: what a customer would be shown must make sense.
fn read(i: usize, item: Map<String, Value>) -> Result<Property, ListingsError> {
    let id = item
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    let property: Property =
        serde_json::from_value(Value::Object(item)).map_err(|e| invalid(i, &id, &e.to_string()))?;
    let problem = if !property.id.starts_with("P-") || property.id.len() < 3 {
        Some("the id must look like P-1234".to_owned())
    } else if property.title.trim().is_empty() {
        Some("the title is empty".to_owned())
    } else if property.city.trim().is_empty() {
        Some("the city is empty".to_owned())
    } else if property.price == 0 {
        Some("the price must be above 0".to_owned())
    } else if property.currency.len() != 3 {
        Some(format!(
            "`{}` is not a currency code like EUR",
            property.currency
        ))
    } else if !(-90.0..=90.0).contains(&property.location.lat)
        || !(-180.0..=180.0).contains(&property.location.lon)
    {
        Some("the location is not a valid lat/lon".to_owned())
    } else {
        property
            .photos
            .iter()
            .find(|url| {
                url::Url::parse(url).map_or(true, |u| u.scheme() != "https" || u.host().is_none())
            })
            .map(|url| format!("photo `{url}` is not an https URL"))
    };
    match problem {
        Some(problem) => Err(invalid(i, &property.id, &problem)),
        None => Ok(property),
    }
}

fn invalid(i: usize, id: &str, why: &str) -> ListingsError {
    ListingsError::Invalid(format!("item {} ({id}): {why}", i + 1))
}
