//! What one message object says, typed ([`Content`]), from its wire form.

use serde::Deserialize;

use super::{WireMedia, WireMessage};
use crate::domain::{Content, MediaKind};

fn media(kind: MediaKind, m: WireMedia) -> Content {
    let kind = match kind {
        MediaKind::Audio if m.voice => MediaKind::Voice,
        other => other,
    };
    Content::Media {
        kind,
        id: m.id,
        mime_type: m.mime_type,
        caption: m.caption,
        filename: m.filename,
        animated: m.animated,
    }
}

/// What one message object (an element of `messages`) says, as [`parse`] reads it: for those
/// who hold a single message, such as `zaguan chat` and tests. Anything unreadable is `Other`.
pub fn message_content(message: &serde_json::Value) -> Content {
    let mut message = message.clone();
    if let Some(object) = message.as_object_mut() {
        object.entry("id").or_insert_with(|| "-".into());
    }
    match WireMessage::deserialize(&message) {
        Ok(wire) => {
            let kind = wire.kind.clone().unwrap_or_default();
            content(&kind, wire)
        }
        Err(_) => Content::Other,
    }
}

pub(super) fn content(kind: &str, wire: WireMessage) -> Content {
    match (kind, wire) {
        ("text", WireMessage { text: Some(t), .. }) => Content::Text { body: t.body },
        ("image", WireMessage { image: Some(m), .. }) => media(MediaKind::Image, m),
        ("video", WireMessage { video: Some(m), .. }) => media(MediaKind::Video, m),
        ("audio" | "voice", WireMessage { audio: Some(m), .. }) => media(MediaKind::Audio, m),
        (
            "document",
            WireMessage {
                document: Some(m), ..
            },
        ) => media(MediaKind::Document, m),
        (
            "sticker",
            WireMessage {
                sticker: Some(m), ..
            },
        ) => media(MediaKind::Sticker, m),
        (
            "location",
            WireMessage {
                location: Some(l), ..
            },
        ) => Content::Location {
            latitude: l.latitude,
            longitude: l.longitude,
            name: l.name,
            address: l.address,
            url: l.url,
        },
        (
            "contacts",
            WireMessage {
                contacts: Some(cs), ..
            },
        ) => Content::Contacts {
            names: cs
                .into_iter()
                .map(|c| {
                    let name = c.name.and_then(|n| n.formatted_name).unwrap_or_default();
                    let phones: Vec<String> = c
                        .phones
                        .into_iter()
                        .filter_map(|p| p.phone.or(p.wa_id))
                        .collect();
                    if phones.is_empty() {
                        name
                    } else {
                        format!("{name} ({})", phones.join(", "))
                    }
                })
                .collect(),
        },
        (
            "interactive",
            WireMessage {
                interactive: Some(i),
                ..
            },
        ) => {
            if let Some(r) = i.button_reply {
                Content::ButtonReply {
                    id: r.id,
                    title: r.title,
                }
            } else if let Some(r) = i.list_reply {
                Content::ListReply {
                    id: r.id,
                    title: r.title,
                    description: r.description,
                }
            } else if let Some(r) = i.nfm_reply {
                Content::FlowReply {
                    response_json: r.response_json,
                    body: r.body,
                }
            } else {
                Content::Other
            }
        }
        (
            "button",
            WireMessage {
                button: Some(b), ..
            },
        ) => Content::Button {
            payload: b.payload,
            text: b.text,
        },
        (
            "reaction",
            WireMessage {
                reaction: Some(r), ..
            },
        ) => Content::Reaction {
            message_id: r.message_id,
            emoji: r.emoji.filter(|e| !e.is_empty()),
        },
        (
            "system",
            WireMessage {
                system: Some(s), ..
            },
        ) => Content::System {
            body: s.body,
            kind: s.kind,
            new_wa_id: s.wa_id,
        },
        ("unsupported", WireMessage { errors, .. }) => Content::Unsupported { errors },
        (_, WireMessage { errors, .. }) if !errors.is_empty() => Content::Unsupported { errors },
        _ => Content::Other,
    }
}
