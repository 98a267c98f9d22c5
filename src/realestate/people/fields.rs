//! The fields of `staff` and `owners` as written by people: each read and checked on its own,
//! so an error names the field and says what it takes.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Writing;
use crate::domain::phone::wa_id_of;
use crate::realestate::{Owner, StaffMember};

/// What a `staff` item may hold, in the collection's names.
pub const STAFF_FIELDS: &[&str] = &[
    "id",
    "name",
    "wa_id",
    "notify_handoffs",
    "hours",
    "works_holidays",
    "visit_minutes",
    "zones",
    "calendar_url",
    "disabled",
];

/// What an `owners` item may hold.
pub const OWNER_FIELDS: &[&str] = &["id", "name", "wa_id", "agent_id", "listings"];

/// Shortest and longest visit an agent's day is cut into.
const VISIT_MINUTES: std::ops::RangeInclusive<u64> = 10..=240;

/// Applies `item` to `member`. `adding`: a new record, whose `id` may be given and whose
/// `name` is required.
pub(super) fn apply_staff(
    member: &mut StaffMember,
    item: Map<String, Value>,
    adding: bool,
    writing: Writing,
) -> Result<(), String> {
    if adding && !item.contains_key("name") {
        return Err("name: required".to_owned());
    }
    for (key, value) in item {
        let field = |why: String| format!("{key}: {why}");
        match key.as_str() {
            "id" | "name" | "wa_id" => identity(
                &key,
                &value,
                Identity {
                    id: &mut member.id,
                    name: &mut member.name,
                    wa_id: &mut member.wa_id,
                    example: "A-",
                },
                adding,
                writing,
            )
            .map_err(field)?,
            "notify_handoffs" => member.notify_handoffs = boolean(&value).map_err(field)?,
            "works_holidays" => member.works_holidays = boolean(&value).map_err(field)?,
            "hours" => member.hours = nullable(&value, hours).map_err(field)?,
            "visit_minutes" => {
                member.visit_minutes = nullable(&value, |v| {
                    whole(v, VISIT_MINUTES).map(|n| u32::try_from(n).expect("in range"))
                })
                .map_err(field)?
            }
            "zones" => member.zones = words(&value).map_err(field)?,
            "calendar_url" => {
                member.calendar_url = nullable(&value, calendar_url).map_err(field)?
            }
            "disabled" => {
                member.disabled_at = boolean(&value)
                    .map_err(field)?
                    .then(|| member.disabled_at.unwrap_or(writing.now))
            }
            "calendar_token" => {
                return Err(field(
                    "made by Zaguan; `zaguan staff update ID --new-calendar-token` replaces it"
                        .to_owned(),
                ));
            }
            "disabled_at" => {
                return Err(field(
                    "set by `zaguan staff disable`; or send `disabled`: true/false".to_owned(),
                ));
            }
            _ => return Err(unknown(&key, STAFF_FIELDS)),
        }
    }
    if member.notify_handoffs && member.wa_id.is_none() {
        return Err("notify_handoffs: needs a wa_id to tell them on".to_owned());
    }
    Ok(())
}

/// Applies `item` to `owner`; returns the listings it names (`None`: not given). An
/// `agent_id` must be one of `staff`, active.
pub(super) fn apply_owner(
    owner: &mut Owner,
    item: Map<String, Value>,
    adding: bool,
    staff: &[StaffMember],
    writing: Writing,
) -> Result<Option<Vec<String>>, String> {
    if adding && !item.contains_key("name") {
        return Err("name: required".to_owned());
    }
    let mut listings = None;
    for (key, value) in item {
        let field = |why: String| format!("{key}: {why}");
        match key.as_str() {
            "id" | "name" | "wa_id" => identity(
                &key,
                &value,
                Identity {
                    id: &mut owner.id,
                    name: &mut owner.name,
                    wa_id: &mut owner.wa_id,
                    example: "O-",
                },
                adding,
                writing,
            )
            .map_err(field)?,
            "agent_id" => {
                let agent = nullable(&value, string).map_err(field)?;
                if let Some(agent) = &agent {
                    match staff.iter().find(|m| &m.id == agent) {
                        None => return Err(field(format!("there is no staff member `{agent}`"))),
                        Some(m) if !m.is_active() => {
                            return Err(field(format!("{agent} ({}) is disabled", m.name)));
                        }
                        Some(_) => {}
                    }
                }
                owner.agent_id = agent;
            }
            "listings" => listings = Some(words(&value).map_err(field)?),
            _ => return Err(unknown(&key, OWNER_FIELDS)),
        }
    }
    Ok(listings)
}

/// The fields staff and owners share: who they are and the number they write from.
struct Identity<'a> {
    id: &'a mut String,
    name: &'a mut String,
    wa_id: &'a mut Option<crate::domain::WaId>,
    /// How their ids begin (`A-`, `O-`), for the error.
    example: &'static str,
}

/// Applies `id`, `name` or `wa_id`; an id is given on adding only.
fn identity(
    key: &str,
    value: &Value,
    record: Identity<'_>,
    adding: bool,
    writing: Writing,
) -> Result<(), String> {
    match key {
        "id" => {
            let id = string(value)?;
            if adding {
                *record.id = record_id(&id, record.example)?;
            } else if id != *record.id {
                return Err(format!("an id cannot change (this is {})", record.id));
            }
        }
        "name" => *record.name = name(value)?,
        _ => {
            *record.wa_id = nullable(value, string)?
                .map(|raw| wa_id_of(&raw, writing.region))
                .transpose()?
        }
    }
    Ok(())
}

fn unknown(key: &str, known: &[&str]) -> String {
    format!("unknown field `{key}`; the fields are {}", known.join(", "))
}

fn string(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.trim().to_owned()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("expected text, got {}", kind(other))),
    }
}

fn nullable<T>(
    value: &Value,
    read: impl Fn(&Value) -> Result<T, String>,
) -> Result<Option<T>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        other => read(other).map(Some),
    }
}

fn name(value: &Value) -> Result<String, String> {
    let name = string(value)?;
    if name.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if name.chars().count() > 80 {
        return Err("at most 80 characters".to_owned());
    }
    if name.chars().any(char::is_control) {
        return Err("must be one line".to_owned());
    }
    Ok(name)
}

/// `A-07`, `O-12` or any short code of letters, digits and `-`/`_`.
fn record_id(id: &str, example: &str) -> Result<String, String> {
    let fits = !id.is_empty()
        && id.len() <= 32
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fits {
        Ok(id.to_owned())
    } else {
        Err(format!(
            "`{id}` is not an id like {example}07 (letters, digits, - and _)"
        ))
    }
}

fn boolean(value: &Value) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) => match s.trim().to_lowercase().as_str() {
            "true" | "yes" | "si" | "sí" | "1" | "y" => Ok(true),
            "false" | "no" | "0" | "n" | "" => Ok(false),
            other => Err(format!("`{other}` is not true or false")),
        },
        Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
        Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
        other => Err(format!("expected true or false, got {}", kind(other))),
    }
}

fn whole(value: &Value, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    let n = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.filter(|n| range.contains(n))
        .ok_or_else(|| format!("a whole number from {} to {}", range.start(), range.end()))
}

/// A list of short texts: a JSON array, or one text separated by `;` or `,`.
fn words(value: &Value) -> Result<Vec<String>, String> {
    let items: Vec<String> = match value {
        Value::Null => Vec::new(),
        Value::Array(items) => items.iter().map(string).collect::<Result<_, _>>()?,
        Value::String(s) => s.split([';', ',']).map(|w| w.trim().to_owned()).collect(),
        other => return Err(format!("expected a list, got {}", kind(other))),
    };
    let items: Vec<String> = items.into_iter().filter(|w| !w.is_empty()).collect();
    if items.len() > 100 {
        return Err("at most 100 entries".to_owned());
    }
    if let Some(long) = items.iter().find(|w| w.chars().count() > 80) {
        return Err(format!("`{long}` is longer than 80 characters"));
    }
    Ok(items)
}

/// Weekday → spans, as the business file's `[hours]`: a JSON object, or in a CSV cell
/// `monday 9:00-14:00 16:00-19:00; tuesday 9:00-14:00`.
fn hours(value: &Value) -> Result<BTreeMap<String, Vec<String>>, String> {
    let days: BTreeMap<String, Vec<String>> = match value {
        Value::Object(days) => days
            .iter()
            .map(|(day, spans)| {
                let spans = match spans {
                    Value::Array(spans) => spans.iter().map(string).collect::<Result<_, _>>()?,
                    Value::String(span) => vec![span.trim().to_owned()],
                    other => return Err(format!("{day}: expected spans, got {}", kind(other))),
                };
                Ok((day.trim().to_lowercase(), spans))
            })
            .collect::<Result<_, String>>()?,
        Value::String(text) if text.trim_start().starts_with('{') => {
            let parsed: Value =
                serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
            return hours(&parsed);
        }
        Value::String(text) => text
            .split(';')
            .filter(|part| !part.trim().is_empty())
            .map(|part| {
                let mut words = part.split_whitespace();
                let day = words.next().unwrap_or_default().to_lowercase();
                (day, words.map(str::to_owned).collect())
            })
            .collect(),
        other => return Err(format!("expected weekdays and spans, got {}", kind(other))),
    };
    crate::business::week_from(&days)?;
    Ok(days)
}

/// An iCalendar address: http(s), or `webcal://` as Apple and Outlook hand them out.
fn calendar_url(value: &Value) -> Result<String, String> {
    let raw = string(value)?;
    let raw = match raw.strip_prefix("webcal://") {
        Some(rest) => format!("https://{rest}"),
        None => raw,
    };
    match url::Url::parse(&raw) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(raw),
        _ => Err(format!(
            "`{raw}` is not an http(s) address of an iCalendar feed"
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The rows of a CSV file as items: its header names the fields; empty cells are left out.
pub(super) fn csv_rows(text: &str) -> Result<Vec<Map<String, Value>>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(false)
        .from_reader(text.trim_start_matches('\u{feff}').as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| format!("the CSV header cannot be read: {e}"))?
        .iter()
        .map(str::to_owned)
        .collect();
    reader
        .records()
        .enumerate()
        .map(|(i, record)| {
            let record = record.map_err(|e| format!("line {}: {e}", i + 2))?;
            Ok(header
                .iter()
                .zip(record.iter())
                .filter(|(_, cell)| !cell.is_empty())
                .map(|(key, cell)| (key.clone(), Value::String(cell.to_owned())))
                .collect())
        })
        .collect()
}
