//! The agency's people, written by its staff: `zaguan staff|owners …`, the admin API's
//! `/admin/staff` and `/admin/owners`, and the console share this. Every field is checked
//! with an error naming it; a batch (`staff import FILE`) is checked whole before anything is
//! written; numbers are normalised to the WhatsApp id that will write in; a number already
//! taken is refused. Disabling keeps the record (its history stays readable) and takes the
//! member out of handoffs and visits.

mod fields;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{Owner, OwnerStore, Property, PropertyFilter, PropertyStore, StaffMember, StaffStore};
use crate::domain::phone::PhoneRegion;
use crate::store::StoreError;

pub use fields::{OWNER_FIELDS, STAFF_FIELDS};

/// Most people in one batch.
pub const MAX_BATCH: usize = 1_000;

#[derive(Debug, thiserror::Error)]
pub enum PeopleError {
    /// The input is wrong; nothing was written.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// A number or id already taken; nothing was written.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The format of a people file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// One JSON object, or an array of them, with the collection's field names.
    Json,
    /// A header row of field names, then a row per person (lists separated by `;`).
    Csv,
}

impl FileFormat {
    /// By the file's name, else by its first character.
    pub fn guess(name: &str, text: &str) -> Self {
        if name.to_ascii_lowercase().ends_with(".csv") {
            FileFormat::Csv
        } else if name.to_ascii_lowercase().ends_with(".json")
            || text.trim_start().starts_with(['[', '{'])
        {
            FileFormat::Json
        } else {
            FileFormat::Csv
        }
    }
}

/// The items of a file or request body, as JSON objects with the collection's field names.
pub fn parse(text: &str, format: FileFormat) -> Result<Vec<Map<String, Value>>, PeopleError> {
    let items = match format {
        FileFormat::Json => parse_json(text)?,
        FileFormat::Csv => fields::csv_rows(text).map_err(PeopleError::Invalid)?,
    };
    if items.is_empty() {
        return Err(PeopleError::Invalid("the file holds nobody".to_owned()));
    }
    if items.len() > MAX_BATCH {
        return Err(PeopleError::Invalid(format!(
            "{} people in one batch; at most {MAX_BATCH}",
            items.len()
        )));
    }
    Ok(items)
}

fn parse_json(text: &str) -> Result<Vec<Map<String, Value>>, PeopleError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| PeopleError::Invalid(format!("not valid JSON: {e}")))?;
    let items = match value {
        Value::Array(items) => items,
        object @ Value::Object(_) => vec![object],
        _ => {
            return Err(PeopleError::Invalid(
                "expected a JSON object or an array of them".into(),
            ));
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(map) => Ok(map),
            _ => Err(PeopleError::Invalid(format!(
                "item {}: a person is a JSON object",
                i + 1
            ))),
        })
        .collect()
}

/// How a change is read: where numbers are, and when it happens.
#[derive(Debug, Clone, Copy)]
pub struct Writing {
    pub region: PhoneRegion,
    pub now: DateTime<Utc>,
}

/// Adds staff members; an id is made when none is given (`A-07`), and each gets the secret
/// of their visits' feed. All or nothing.
pub async fn add_staff(
    store: &(impl StaffStore + ?Sized),
    items: Vec<Map<String, Value>>,
    writing: Writing,
) -> Result<Vec<StaffMember>, PeopleError> {
    let mut all = store.staff().await?;
    let mut added = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let mut member = StaffMember::default();
        let named = item.get("id").and_then(Value::as_str).map(str::to_owned);
        fields::apply_staff(&mut member, item, true, writing)
            .map_err(|why| invalid(i, named.as_deref(), &why))?;
        if member.id.is_empty() {
            member.id = next_id("A-", all.iter().map(|m| m.id.as_str()));
        }
        if all.iter().any(|m| m.id == member.id) {
            return Err(PeopleError::Conflict(format!(
                "item {} ({}): the id is taken; use `staff update` to change that member",
                i + 1,
                member.id
            )));
        }
        member.calendar_token = Some(new_calendar_token());
        staff_number_is_free(&all, &member).map_err(|why| conflict(i, &member.id, &why))?;
        all.push(member.clone());
        added.push(member);
    }
    store.upsert_staff(&added).await?;
    Ok(added)
}

/// Changes one member: the fields given, merged over the stored ones. `disabled: true`
/// disables, `false` enables again.
pub async fn update_staff(
    store: &(impl StaffStore + ?Sized),
    id: &str,
    patch: Map<String, Value>,
    rotate_token: bool,
    writing: Writing,
) -> Result<StaffMember, PeopleError> {
    let all = store.staff().await?;
    let mut member = all
        .iter()
        .find(|m| m.id == id)
        .cloned()
        .ok_or_else(|| PeopleError::NotFound(format!("no staff member `{id}`")))?;
    fields::apply_staff(&mut member, patch, false, writing)
        .map_err(|why| PeopleError::Invalid(format!("{id}: {why}")))?;
    if rotate_token || member.calendar_token.is_none() {
        member.calendar_token = Some(new_calendar_token());
    }
    let others: Vec<StaffMember> = all.into_iter().filter(|m| m.id != id).collect();
    staff_number_is_free(&others, &member)
        .map_err(|why| PeopleError::Conflict(format!("{id}: {why}")))?;
    store.upsert_staff(std::slice::from_ref(&member)).await?;
    Ok(member)
}

/// Disables a member: kept, out of handoffs and visits from now on.
pub async fn disable_staff(
    store: &(impl StaffStore + ?Sized),
    id: &str,
    now: DateTime<Utc>,
) -> Result<StaffMember, PeopleError> {
    let mut member = store
        .staff()
        .await?
        .into_iter()
        .find(|m| m.id == id)
        .ok_or_else(|| PeopleError::NotFound(format!("no staff member `{id}`")))?;
    if member.disabled_at.is_none() {
        member.disabled_at = Some(now);
        store.upsert_staff(std::slice::from_ref(&member)).await?;
    }
    Ok(member)
}

/// An owner as listed: the record and the listings that name them.
#[derive(Debug, Clone, Serialize)]
pub struct OwnerView {
    #[serde(flatten)]
    pub owner: Owner,
    pub listings: Vec<String>,
}

/// Every owner with their listings, by id.
pub async fn owners(
    store: &(impl OwnerStore + PropertyStore + ?Sized),
) -> Result<Vec<OwnerView>, PeopleError> {
    let mut listings: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for property in store.properties(&PropertyFilter::default()).await? {
        listings
            .entry(property.owner_id)
            .or_default()
            .push(property.id);
    }
    Ok(store
        .owners()
        .await?
        .into_iter()
        .map(|owner| OwnerView {
            listings: listings.remove(&owner.id).unwrap_or_default(),
            owner,
        })
        .collect())
}

/// Adds owners; `listings` names the listings that are theirs (each must exist), `agent_id`
/// an active staff member. All or nothing.
pub async fn add_owners(
    store: &(impl OwnerStore + StaffStore + PropertyStore + ?Sized),
    items: Vec<Map<String, Value>>,
    writing: Writing,
) -> Result<Vec<OwnerView>, PeopleError> {
    let mut all = store.owners().await?;
    let staff = store.staff().await?;
    let mut added = Vec::with_capacity(items.len());
    let mut moved: Vec<Property> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let mut owner = Owner::default();
        let named = item.get("id").and_then(Value::as_str).map(str::to_owned);
        let listings = fields::apply_owner(&mut owner, item, true, &staff, writing)
            .map_err(|why| invalid(i, named.as_deref(), &why))?;
        if owner.id.is_empty() {
            owner.id = next_id("O-", all.iter().map(|o| o.id.as_str()));
        }
        if all.iter().any(|o| o.id == owner.id) {
            return Err(PeopleError::Conflict(format!(
                "item {} ({}): the id is taken; use `owners update` to change that owner",
                i + 1,
                owner.id
            )));
        }
        owner_number_is_free(&all, &owner).map_err(|why| conflict(i, &owner.id, &why))?;
        let listings = listings.unwrap_or_default();
        moved.extend(
            claim_listings(store, &owner.id, &listings)
                .await
                .map_err(|why| invalid(i, Some(&owner.id), &why))?,
        );
        all.push(owner.clone());
        added.push(OwnerView { owner, listings });
    }
    let owners: Vec<Owner> = added.iter().map(|view| view.owner.clone()).collect();
    store.upsert_owners(&owners).await?;
    store.upsert_properties(&moved).await?;
    Ok(added)
}

/// Changes one owner; `listings`, when given, is the whole list of their listings.
pub async fn update_owner(
    store: &(impl OwnerStore + StaffStore + PropertyStore + ?Sized),
    id: &str,
    patch: Map<String, Value>,
    writing: Writing,
) -> Result<OwnerView, PeopleError> {
    let all = store.owners().await?;
    let mut owner = all
        .iter()
        .find(|o| o.id == id)
        .cloned()
        .ok_or_else(|| PeopleError::NotFound(format!("no owner `{id}`")))?;
    let staff = store.staff().await?;
    let listings = fields::apply_owner(&mut owner, patch, false, &staff, writing)
        .map_err(|why| PeopleError::Invalid(format!("{id}: {why}")))?;
    let others: Vec<Owner> = all.into_iter().filter(|o| o.id != id).collect();
    owner_number_is_free(&others, &owner)
        .map_err(|why| PeopleError::Conflict(format!("{id}: {why}")))?;
    let moved = match &listings {
        Some(listings) => claim_listings(store, id, listings)
            .await
            .map_err(|why| PeopleError::Invalid(format!("{id}: {why}")))?,
        None => Vec::new(),
    };
    store.upsert_owners(std::slice::from_ref(&owner)).await?;
    store.upsert_properties(&moved).await?;
    let listings = store
        .properties(&PropertyFilter {
            owner_id: Some(id.to_owned()),
            ..PropertyFilter::default()
        })
        .await?
        .into_iter()
        .map(|p| p.id)
        .collect();
    Ok(OwnerView { owner, listings })
}

/// The listings `ids` with `owner_id` set to the owner: each must exist.
async fn claim_listings(
    store: &(impl PropertyStore + ?Sized),
    owner_id: &str,
    ids: &[String],
) -> Result<Vec<Property>, String> {
    let mut moved = Vec::with_capacity(ids.len());
    for id in ids {
        let mut property = store
            .property(id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("listings: there is no listing `{id}`"))?;
        if property.owner_id != owner_id {
            property.owner_id = owner_id.to_owned();
            moved.push(property);
        }
    }
    Ok(moved)
}

/// A number belongs to one active member at most: two records for one phone would make
/// handoffs and roles ambiguous.
fn staff_number_is_free(others: &[StaffMember], member: &StaffMember) -> Result<(), String> {
    let Some(wa_id) = &member.wa_id else {
        return Ok(());
    };
    match others
        .iter()
        .find(|m| m.is_active() && m.id != member.id && m.wa_id.as_ref() == Some(wa_id))
    {
        Some(taken) if member.is_active() => Err(format!(
            "wa_id: the number {} is already {} ({})",
            wa_id.masked(),
            taken.id,
            taken.name
        )),
        _ => Ok(()),
    }
}

fn owner_number_is_free(others: &[Owner], owner: &Owner) -> Result<(), String> {
    let Some(wa_id) = &owner.wa_id else {
        return Ok(());
    };
    match others
        .iter()
        .find(|o| o.id != owner.id && o.wa_id.as_ref() == Some(wa_id))
    {
        Some(taken) => Err(format!(
            "wa_id: the number {} is already owner {} ({})",
            wa_id.masked(),
            taken.id,
            taken.name
        )),
        None => Ok(()),
    }
}

/// The next free id after the highest `{prefix}{n}`: `A-01`, `A-02` … (at least two digits).
fn next_id<'a>(prefix: &str, ids: impl Iterator<Item = &'a str>) -> String {
    let highest = ids
        .filter_map(|id| id.strip_prefix(prefix)?.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    format!("{prefix}{:02}", highest + 1)
}

/// A fresh secret for `/calendar/{token}.ics`: whoever has it reads the agent's visits.
pub fn new_calendar_token() -> String {
    hex::encode(rand::random::<[u8; 20]>())
}

fn invalid(i: usize, id: Option<&str>, why: &str) -> PeopleError {
    PeopleError::Invalid(match id {
        Some(id) => format!("item {} ({id}): {why}", i + 1),
        None => format!("item {}: {why}", i + 1),
    })
}

fn conflict(i: usize, id: &str, why: &str) -> PeopleError {
    PeopleError::Conflict(format!("item {} ({id}): {why}", i + 1))
}

#[cfg(test)]
mod tests;
