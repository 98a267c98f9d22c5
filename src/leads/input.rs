//! A lead as it comes in, from a CRM's JSON push or from a portal's e-mail, checked field by
//! field: a body that is not a lead is refused with the field named, and nothing is stored.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// The longest message kept (a portal's form allows a few hundred characters).
const MAX_MESSAGE: usize = 4000;
/// The longest of the other fields.
const MAX_FIELD: usize = 200;

/// What a portal or CRM says of a lead.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Incoming {
    /// `idealista`, `fotocasa`, a CRM's name: lower case.
    pub source: String,
    /// The portal's id of the lead.
    pub lead_id: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub email: Option<String>,
    /// The listing's id or the portal's reference.
    pub listing_ref: Option<String>,
    pub message: Option<String>,
    pub received_at: Option<DateTime<Utc>>,
    /// ISO 639-1.
    pub lang: Option<String>,
}

/// The fields of `POST /leads`, for the error of an unknown one.
pub const FIELDS: &[&str] = &[
    "source",
    "lead_id",
    "name",
    "phone",
    "email",
    "listing_ref",
    "message",
    "received_at",
    "lang",
];

/// `body` as a lead, or what is wrong with it, naming the field.
pub fn from_json(body: &[u8]) -> Result<Incoming, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let Value::Object(fields) = value else {
        return Err("the body is not a JSON object of a lead's fields".to_owned());
    };
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "{unknown}: not a field of a lead (the fields are {})",
            FIELDS.join(", ")
        ));
    }
    let text = |key: &str, max: usize| text_field(&fields, key, max);
    let source = text("source", 40)?
        .ok_or_else(|| "source: required (the portal or CRM, like `idealista`)".to_owned())?;
    let source = source.to_lowercase();
    if !source
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "source: `{source}` is not a name like `idealista` or `pisos.com`"
        ));
    }
    let lead = Incoming {
        source,
        lead_id: text("lead_id", MAX_FIELD)?,
        name: text("name", MAX_FIELD)?,
        phone: text("phone", 40)?,
        email: text("email", MAX_FIELD)?,
        listing_ref: text("listing_ref", 80)?,
        message: text("message", MAX_MESSAGE)?,
        received_at: instant(&fields)?,
        lang: language(&fields)?,
    };
    if let Some(email) = &lead.email
        && !looks_like_email(email)
    {
        return Err(format!("email: `{email}` is not an e-mail address"));
    }
    if lead.phone.is_none() && lead.email.is_none() && lead.message.is_none() {
        return Err("phone: a lead needs a phone, an email or a message".to_owned());
    }
    Ok(lead)
}

/// A string field (a number is taken as its digits: CRMs send phones and ids as numbers);
/// blank is absent.
fn text_field(
    fields: &Map<String, Value>,
    key: &str,
    max: usize,
) -> Result<Option<String>, String> {
    let text = match fields.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(format!(
                "{key}: expected a string, got {}",
                match other {
                    Value::Bool(_) => "a boolean",
                    Value::Array(_) => "a list",
                    _ => "an object",
                }
            ));
        }
    };
    if text.chars().count() > max {
        return Err(format!("{key}: longer than {max} characters"));
    }
    let text: String = text
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .collect();
    Ok(Some(text).filter(|t| !t.is_empty()))
}

/// `received_at`: RFC 3339, or seconds since 1970 (what many CRMs send).
fn instant(fields: &Map<String, Value>) -> Result<Option<DateTime<Utc>>, String> {
    match fields.get("received_at") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => DateTime::parse_from_rfc3339(s.trim())
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| {
                format!("received_at: `{s}` is not a time like 2026-12-03T21:14:00+01:00")
            }),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|s| DateTime::from_timestamp(s, 0))
            .map(Some)
            .ok_or_else(|| format!("received_at: `{n}` is not seconds since 1970")),
        Some(_) => Err("received_at: expected a time (RFC 3339) or seconds".to_owned()),
    }
}

/// `lang`: two letters, or a tag like `es-ES` (its first part).
fn language(fields: &Map<String, Value>) -> Result<Option<String>, String> {
    let Some(tag) = text_field(fields, "lang", 20)? else {
        return Ok(None);
    };
    let primary = tag
        .split(['-', '_'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if primary.len() == 2 && primary.chars().all(|c| c.is_ascii_lowercase()) {
        Ok(Some(primary))
    } else {
        Err(format!("lang: `{tag}` is not a language like `es` or `en`"))
    }
}

/// A light check: something, `@`, a domain with a dot.
pub fn looks_like_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crm_push_is_read_and_a_bad_one_names_its_field() {
        let lead = from_json(
            br#"{"source": "Idealista", "lead_id": 98765, "name": " Marta Gimenez ",
                 "phone": "+34 612 34 56 78", "email": "marta@example.com",
                 "listing_ref": "P-1001", "message": "Me interesa", "lang": "es-ES",
                 "received_at": "2026-12-03T21:14:00+01:00"}"#,
        )
        .unwrap();
        assert_eq!(lead.source, "idealista");
        assert_eq!(lead.lead_id.as_deref(), Some("98765"));
        assert_eq!(lead.name.as_deref(), Some("Marta Gimenez"));
        assert_eq!(lead.lang.as_deref(), Some("es"));
        assert_eq!(
            lead.received_at.unwrap().to_rfc3339(),
            "2026-12-03T20:14:00+00:00"
        );
        for (body, field) in [
            (r#"[1, 2]"#, "not a JSON object"),
            (r#"{"phone": "612345678"}"#, "source: required"),
            (
                r#"{"source": "x", "phone": true}"#,
                "phone: expected a string",
            ),
            (
                r#"{"source": "x", "phone": "1", "colour": 1}"#,
                "colour: not a field",
            ),
            (r#"{"source": "x", "email": "nope"}"#, "email:"),
            (
                r#"{"source": "x", "phone": "1", "received_at": "ayer"}"#,
                "received_at:",
            ),
            (
                r#"{"source": "x", "phone": "1", "lang": "español"}"#,
                "lang:",
            ),
            (r#"{"source": "x"}"#, "phone: a lead needs"),
            ("not json", "not JSON"),
        ] {
            let error = from_json(body.as_bytes()).unwrap_err();
            assert!(error.contains(field), "{body}: {error}");
        }
    }
}
