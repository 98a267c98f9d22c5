//! A message as WhatsApp delivered it: what it says (`Content`), what it answers, and the
//! delivery statuses of ours.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{WaId, WaMessageId};

/// An error object as the Graph API and webhooks report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphError {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_data: Option<serde_json::Value>,
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(code) = self.code {
            write!(f, "({code}) ")?;
        }
        let text = self
            .message
            .as_deref()
            .or(self.title.as_deref())
            .unwrap_or("no message");
        f.write_str(text)
    }
}

/// A message a customer sent, as stored in `inbox`.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundMessage {
    pub wamid: WaMessageId,
    /// Conversation key (phone number, else BSUID).
    pub wa_id: WaId,
    /// The phone number when WhatsApp shares it.
    pub phone: Option<String>,
    /// The business-scoped user id when present.
    pub user_id: Option<String>,
    /// Profile name of the sender, upserted into `users`.
    pub name: Option<String>,
    pub username: Option<String>,
    /// Our business number the message was sent to; replies go out through it.
    pub phone_number_id: String,
    /// WhatsApp's own timestamp of the message.
    pub sent_at: Option<DateTime<Utc>>,
    pub context: Option<ReplyContext>,
    /// The `type` field as sent, kept even when we do not know it.
    pub kind: String,
    pub content: Content,
    /// The message object exactly as received: unknown fields are recorded, not dropped.
    pub raw: String,
    /// The click-to-WhatsApp ad or post the customer came from, when they did.
    pub referral: Option<Referral>,
}

/// `referral` of a message sent from a click-to-WhatsApp ad or a post's button: which ad, and
/// the click id (`ctwa_clid`) the agency's CRM reports conversions to Meta with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Referral {
    /// `ad` or `post`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<String>,
    /// The ad's or post's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    /// The ad's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The click's id: never the ad's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctwa_clid: Option<String>,
}

impl Referral {
    /// The `referral` of a message object as received (`inbox.payload`), if it has one.
    pub fn of_message(raw: &str) -> Option<Self> {
        #[derive(Deserialize)]
        struct Carrier {
            #[serde(default)]
            referral: Option<Referral>,
        }
        // Most messages have none: not worth a parse.
        if !raw.contains("\"referral\"") {
            return None;
        }
        serde_json::from_str::<Carrier>(raw)
            .ok()
            .and_then(|c| c.referral)
            .filter(|r| *r != Referral::default())
    }

    /// What the assistant reads beside the customer's words.
    pub fn note(&self) -> String {
        match (&self.headline, &self.body) {
            (Some(headline), _) => format!("(came from the ad «{headline}»)"),
            (None, Some(body)) => format!("(came from the ad «{body}»)"),
            (None, None) => "(came from an ad)".to_owned(),
        }
    }
}

/// `pricing` of a status webhook: whether and how Meta bills the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    #[serde(default)]
    pub billable: bool,
    /// `marketing`, `utility`, `authentication`, `service`, `referral_conversion`…
    #[serde(default)]
    pub category: String,
    /// `PMP` (per message) since July 2025, `CBP` before.
    #[serde(default)]
    pub pricing_model: String,
}

/// `context` of a message: a reply to an earlier message, or a forward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyContext {
    /// The replied-to message id.
    pub message_id: Option<String>,
    pub from: Option<String>,
    pub forwarded: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    Image,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
}

/// What a message says, per type: parsed once from Meta's JSON (`webhook::payload`), stored
/// as is with the inbox entry (`inbox.content`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        body: String,
    },
    Media {
        kind: MediaKind,
        id: Option<String>,
        mime_type: Option<String>,
        caption: Option<String>,
        filename: Option<String>,
        animated: bool,
    },
    Location {
        latitude: f64,
        longitude: f64,
        name: Option<String>,
        address: Option<String>,
        url: Option<String>,
    },
    Contacts {
        names: Vec<String>,
    },
    /// Tap on an interactive reply button we sent.
    ButtonReply {
        id: String,
        title: String,
    },
    ListReply {
        id: String,
        title: String,
        description: Option<String>,
    },
    FlowReply {
        response_json: Option<String>,
        body: Option<String>,
    },
    /// Tap on a template quick-reply button.
    Button {
        payload: Option<String>,
        text: String,
    },
    /// `emoji: None` is the removal of a reaction.
    Reaction {
        message_id: Option<String>,
        emoji: Option<String>,
    },
    System {
        body: Option<String>,
        kind: Option<String>,
        new_wa_id: Option<String>,
    },
    /// WhatsApp could not give us the message (`type: unsupported`, or errors attached).
    Unsupported {
        errors: Vec<GraphError>,
    },
    /// A type we do not model (order, edit, revoke, request_welcome, a new one…); the raw JSON
    /// and `kind` keep it.
    Other,
}

impl Content {
    /// What the message says in words, for the conversation: the text, caption, chosen option,
    /// place… `None` when there is nothing to say (a sticker, a removed reaction).
    pub fn text(&self) -> Option<String> {
        let text = match self {
            Content::Text { body } => Some(body.clone()),
            Content::Media {
                caption, filename, ..
            } => caption.clone().or_else(|| filename.clone()),
            Content::Location {
                latitude,
                longitude,
                name,
                address,
                ..
            } => {
                let place: Vec<&str> = [name, address]
                    .into_iter()
                    .flatten()
                    .map(|s| s.as_str())
                    .collect();
                Some(if place.is_empty() {
                    format!("{latitude}, {longitude}")
                } else {
                    format!("{} ({latitude}, {longitude})", place.join(", "))
                })
            }
            Content::Contacts { names } => Some(names.join("; ")),
            Content::ButtonReply { title, .. } => Some(title.clone()),
            Content::ListReply {
                title, description, ..
            } => Some(match description {
                Some(d) if !d.is_empty() => format!("{title} — {d}"),
                _ => title.clone(),
            }),
            Content::FlowReply {
                body,
                response_json,
            } => body.clone().or_else(|| response_json.clone()),
            Content::Button { text, .. } => Some(text.clone()),
            Content::Reaction { emoji, .. } => emoji.clone(),
            Content::System { body, .. } => body.clone(),
            Content::Unsupported { .. } | Content::Other => None,
        };
        text.filter(|t| !t.trim().is_empty())
    }
}

/// A delivery status Meta reports for a message we sent.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// The Graph API id of our outbound message.
    pub wamid: WaMessageId,
    /// `sent`, `delivered`, `read`, `played`, `failed`, or something newer.
    pub status: String,
    pub at: Option<DateTime<Utc>>,
    pub recipient_id: Option<String>,
    pub errors: Vec<GraphError>,
    /// The `biz_opaque_callback_data` the message was sent with, echoed by Meta.
    pub callback_data: Option<String>,
    /// How Meta bills it (`outbox.pricing`).
    pub pricing: Option<Pricing>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_reject_empty_blank_and_oversized_values() {
        assert!(WaId::parse("34600111222").is_ok());
        assert!(WaId::parse("US.13491208655302741918").is_ok());
        assert!(WaId::parse("").is_err());
        assert!(WaId::parse("34 600").is_err());
        assert!(WaId::parse("a\u{0}b").is_err());
        assert!(WaMessageId::parse(&"x".repeat(257)).is_err());
    }

    #[test]
    fn masked_ids_show_only_the_last_four_characters() {
        assert_eq!(WaId::parse("34600111222").unwrap().masked(), "…1222");
        assert_eq!(WaId::parse("12").unwrap().masked(), "…12");
    }

    #[test]
    fn content_text_says_what_the_user_chose_or_wrote() {
        let reply = Content::ListReply {
            id: "p1".into(),
            title: "Piso en Gràcia".into(),
            description: Some("3 hab.".into()),
        };
        assert_eq!(reply.text().unwrap(), "Piso en Gràcia — 3 hab.");
        let removed = Content::Reaction {
            message_id: None,
            emoji: None,
        };
        assert_eq!(removed.text(), None);
        let blank = Content::Text { body: "  ".into() };
        assert_eq!(blank.text(), None);
    }
}
