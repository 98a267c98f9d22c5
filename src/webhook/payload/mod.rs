//! The Cloud API webhook body, typed (serde), and its one conversion into domain updates.
//!
//! Parsing is two-level on purpose: the envelope (`object`, `entry[]`, `changes[]`, `value`)
//! must be well-formed or the whole request is refused with 400, while each message and status
//! inside is parsed on its own from its raw JSON. One malformed or unknown message in a batch of
//! 1,000 is then recorded for an operator instead of failing the other 999, and the raw JSON of
//! every message is kept, so fields we do not model yet are never lost.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::domain::{GraphError, InboundMessage, ReplyContext, StatusUpdate, WaId, WaMessageId};

/// Why a body was refused as a whole.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("body is not a webhook notification: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("body is not a JSON object")]
    NotAnObject,
}

/// `POST /webhook` body.
#[derive(Debug, Deserialize)]
pub struct Notification<'a> {
    #[serde(default)]
    pub object: Option<String>,
    #[serde(default, borrow)]
    pub entry: Vec<Object<Entry<'a>>>,
}

/// A struct that must come from a JSON object: serde's derive also reads a struct from an
/// array, and with every field defaulted `[]` would be an empty entry, its updates silently
/// gone. In the envelope, anything but an object refuses the body (400) instead.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(Visit(std::marker::PhantomData))
            .map(Object)
    }
}

#[derive(Debug, Deserialize)]
pub struct Entry<'a> {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, borrow)]
    pub changes: Vec<Object<Change<'a>>>,
}

/// One change; only `field == "messages"` concerns the bot, the rest (account, template and
/// call updates, message echoes…) are acknowledged and counted.
#[derive(Debug, Deserialize)]
pub struct Change<'a> {
    #[serde(default)]
    pub field: String,
    #[serde(borrow)]
    pub value: &'a RawValue,
}

/// `value` of a `messages` change.
#[derive(Debug, Deserialize)]
pub struct MessagesValue<'a> {
    pub metadata: Metadata,
    #[serde(default)]
    pub contacts: Vec<Contact>,
    #[serde(default, borrow)]
    pub messages: Vec<&'a RawValue>,
    #[serde(default, borrow)]
    pub statuses: Vec<&'a RawValue>,
    #[serde(default)]
    pub errors: Vec<GraphError>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub display_phone_number: Option<String>,
    pub phone_number_id: String,
}

/// The sender's identity. Since 2026, `wa_id` (the phone number) may be withheld for users
/// with a username; `user_id` (business-scoped user id, BSUID) is then the only key.
#[derive(Debug, Clone, Deserialize)]
pub struct Contact {
    #[serde(default)]
    pub wa_id: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub profile: Option<Profile>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Profile {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

/// One inbound message as sent; every part but `id` optional, so unknown types still parse.
#[derive(Debug, Deserialize)]
struct WireMessage {
    id: String,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    from_user_id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    context: Option<WireContext>,
    #[serde(default)]
    text: Option<WireText>,
    #[serde(default)]
    image: Option<WireMedia>,
    #[serde(default)]
    video: Option<WireMedia>,
    #[serde(default)]
    audio: Option<WireMedia>,
    #[serde(default)]
    document: Option<WireMedia>,
    #[serde(default)]
    sticker: Option<WireMedia>,
    #[serde(default)]
    location: Option<WireLocation>,
    #[serde(default)]
    contacts: Option<Vec<WireSharedContact>>,
    #[serde(default)]
    interactive: Option<WireInteractive>,
    #[serde(default)]
    button: Option<WireButton>,
    #[serde(default)]
    reaction: Option<WireReaction>,
    #[serde(default)]
    system: Option<WireSystem>,
    #[serde(default)]
    errors: Vec<GraphError>,
    #[serde(default)]
    referral: Option<crate::domain::Referral>,
}

#[derive(Debug, Deserialize)]
struct WireContext {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    forwarded: bool,
    #[serde(default)]
    frequently_forwarded: bool,
}

#[derive(Debug, Deserialize)]
struct WireText {
    #[serde(default)]
    body: String,
}

#[derive(Debug, Deserialize)]
struct WireMedia {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    #[serde(default)]
    filename: Option<String>,
    #[serde(default)]
    voice: bool,
    #[serde(default)]
    animated: bool,
}

#[derive(Debug, Deserialize)]
struct WireLocation {
    latitude: f64,
    longitude: f64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireSharedContact {
    #[serde(default)]
    name: Option<WireSharedName>,
    #[serde(default)]
    phones: Vec<WireSharedPhone>,
}

#[derive(Debug, Deserialize)]
struct WireSharedName {
    #[serde(default)]
    formatted_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireSharedPhone {
    #[serde(default)]
    phone: Option<String>,
    #[serde(default)]
    wa_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireInteractive {
    #[serde(default)]
    button_reply: Option<WireReply>,
    #[serde(default)]
    list_reply: Option<WireReply>,
    #[serde(default)]
    nfm_reply: Option<WireFlowReply>,
}

#[derive(Debug, Deserialize)]
struct WireReply {
    id: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireFlowReply {
    #[serde(default)]
    response_json: Option<String>,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireButton {
    #[serde(default)]
    payload: Option<String>,
    #[serde(default)]
    text: String,
}

#[derive(Debug, Deserialize)]
struct WireReaction {
    #[serde(default)]
    message_id: Option<String>,
    #[serde(default)]
    emoji: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireSystem {
    #[serde(default)]
    body: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    wa_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireStatus {
    id: String,
    status: String,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    recipient_id: Option<String>,
    #[serde(default)]
    errors: Vec<GraphError>,
    #[serde(default)]
    biz_opaque_callback_data: Option<String>,
    #[serde(default)]
    pricing: Option<crate::domain::Pricing>,
}

/// Everything one request carried, in the order Meta sent it.
#[derive(Debug, Default)]
pub struct Updates {
    pub messages: Vec<InboundMessage>,
    pub statuses: Vec<StatusUpdate>,
    /// Messages that could not be read; kept for operators, never silently dropped.
    pub rejected: Vec<RejectedUpdate>,
    /// Changes of other fields (`account_update`, `calls`, …) and value-level errors, by field.
    pub ignored: Vec<String>,
    /// Value-level `errors[]` Meta reported (e.g. an undeliverable webhook payload).
    pub errors: Vec<GraphError>,
    /// Templates Meta approved, paused, rejected, moved to another category or rated
    /// (`message_template_status_update`, `template_category_update`,
    /// `message_template_quality_update`).
    pub templates: Vec<TemplateChange>,
    /// Customers' marketing choices made inside WhatsApp (`user_preferences`).
    pub preferences: Vec<MarketingPreference>,
    /// The account's and numbers' standing (`account_update`, `phone_number_quality_update`).
    pub accounts: Vec<crate::domain::AccountSignal>,
}

/// What Meta said of one template.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateChange {
    pub name: String,
    /// As approved (`es`, `en_US`).
    pub language: String,
    /// `APPROVED`, `PAUSED`, `REJECTED`…; `None` for a category change alone.
    pub event: Option<String>,
    pub category: Option<String>,
    pub reason: Option<String>,
    /// `GREEN`, `YELLOW`, `RED` or `UNKNOWN`, from a quality update.
    pub quality: Option<String>,
}

#[derive(Deserialize)]
struct WireTemplateChange {
    message_template_name: String,
    message_template_language: String,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message_template_category: Option<String>,
    #[serde(default)]
    new_category: Option<String>,
}

/// An update inside a valid notification that could not be typed.
#[derive(Debug)]
pub struct RejectedUpdate {
    pub what: &'static str,
    pub reason: String,
    pub raw: String,
}

/// Parses a whole notification. Fails only when the envelope is unusable; see module docs.
pub fn parse(body: &[u8]) -> Result<Updates, PayloadError> {
    // serde would also read a struct from a JSON array; a notification is always an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(PayloadError::NotAnObject);
    }
    let notification: Notification<'_> = serde_json::from_slice(body)?;
    let mut updates = Updates::default();
    for Object(entry) in notification.entry {
        for Object(change) in entry.changes {
            if matches!(
                change.field.as_str(),
                "message_template_status_update" | "template_category_update"
            ) {
                match serde_json::from_str::<WireTemplateChange>(change.value.get()) {
                    Ok(wire) => updates.templates.push(TemplateChange {
                        name: wire.message_template_name,
                        language: wire.message_template_language,
                        event: wire.event,
                        category: wire.new_category.or(wire.message_template_category),
                        reason: wire.reason.filter(|r| r != "NONE"),
                        quality: None,
                    }),
                    Err(error) => updates.rejected.push(RejectedUpdate {
                        what: "template",
                        reason: error.to_string(),
                        raw: change.value.get().to_owned(),
                    }),
                }
                continue;
            }
            if signals::reads(&change.field) {
                let account = entry.id.as_deref().unwrap_or_default();
                signals::read(account, &change.field, change.value.get(), &mut updates);
                continue;
            }
            if change.field != "messages" {
                updates.ignored.push(change.field);
                continue;
            }
            let value: MessagesValue<'_> = serde_json::from_str(change.value.get())?;
            read_messages_value(value, &mut updates);
        }
    }
    Ok(updates)
}

fn read_messages_value(value: MessagesValue<'_>, updates: &mut Updates) {
    updates.errors.extend(value.errors);
    for raw in value.messages {
        match serde_json::from_str::<WireMessage>(raw.get()) {
            Ok(wire) => match inbound_message(wire, raw, &value.metadata, &value.contacts) {
                Ok(message) => updates.messages.push(message),
                Err(reason) => updates.rejected.push(RejectedUpdate {
                    what: "message",
                    reason,
                    raw: raw.get().to_owned(),
                }),
            },
            Err(e) => updates.rejected.push(RejectedUpdate {
                what: "message",
                reason: e.to_string(),
                raw: raw.get().to_owned(),
            }),
        }
    }
    for raw in value.statuses {
        match serde_json::from_str::<WireStatus>(raw.get()) {
            Ok(wire) => updates.statuses.push(StatusUpdate {
                wamid: WaMessageId::from(wire.id),
                status: wire.status,
                at: wire.timestamp.as_deref().and_then(parse_timestamp),
                recipient_id: wire.recipient_id,
                errors: wire.errors,
                callback_data: wire.biz_opaque_callback_data,
                pricing: wire.pricing,
            }),
            Err(e) => updates.rejected.push(RejectedUpdate {
                what: "status",
                reason: e.to_string(),
                raw: raw.get().to_owned(),
            }),
        }
    }
}

/// The contact a message belongs to: the one with the same phone number or BSUID, else the
/// only contact of the change (Meta sends one contact per sender).
fn contact_for<'c>(wire: &WireMessage, contacts: &'c [Contact]) -> Option<&'c Contact> {
    contacts
        .iter()
        .find(|c| {
            (wire.from.is_some() && c.wa_id == wire.from)
                || (wire.from_user_id.is_some() && c.user_id == wire.from_user_id)
        })
        .or(match contacts {
            [only] => Some(only),
            _ => None,
        })
}

fn inbound_message(
    wire: WireMessage,
    raw: &RawValue,
    metadata: &Metadata,
    contacts: &[Contact],
) -> Result<InboundMessage, String> {
    let contact = contact_for(&wire, contacts);
    let phone = wire
        .from
        .clone()
        .or_else(|| contact.and_then(|c| c.wa_id.clone()));
    let user_id = wire
        .from_user_id
        .clone()
        .or_else(|| contact.and_then(|c| c.user_id.clone()));
    let wa_id = match (&phone, &user_id) {
        (Some(phone), _) => WaId::parse(phone),
        (None, Some(user_id)) => WaId::parse(user_id),
        (None, None) => Err("no sender: neither `from`, `from_user_id` nor a contact".to_owned()),
    }?;
    let wamid = WaMessageId::parse(&wire.id)?;
    let kind = wire.kind.clone().unwrap_or_else(|| "unknown".to_owned());
    let profile = contact.and_then(|c| c.profile.as_ref());
    let referral = wire.referral.clone().filter(|r| *r != Default::default());
    Ok(InboundMessage {
        wamid,
        wa_id,
        phone: phone.filter(|p| !p.is_empty()),
        user_id,
        name: profile.and_then(|p| p.name.clone()),
        username: profile.and_then(|p| p.username.clone()),
        phone_number_id: metadata.phone_number_id.clone(),
        sent_at: wire.timestamp.as_deref().and_then(parse_timestamp),
        context: wire.context.as_ref().map(|c| ReplyContext {
            message_id: c.id.clone(),
            from: c.from.clone(),
            forwarded: c.forwarded || c.frequently_forwarded,
        }),
        content: content(&kind, wire),
        kind,
        raw: raw.get().to_owned(),
        referral,
    })
}

/// WhatsApp timestamps are seconds since the epoch, as a string.
fn parse_timestamp(ts: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    ts.parse::<i64>()
        .ok()
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
}

mod content;
mod signals;

use content::content;
pub use content::message_content;
pub use signals::MarketingPreference;

#[cfg(test)]
mod tests;
