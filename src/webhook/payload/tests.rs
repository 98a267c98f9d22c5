//! Parsing of realistic payloads of every message type and status (`tests/fixtures/`).

use std::collections::BTreeMap;

use super::*;
use crate::domain::{Content, MediaKind};

const CLOUD_API: &str = include_str!("../../../tests/fixtures/cloud_api.json");

fn fixture(name: &str) -> Updates {
    let all: BTreeMap<String, serde_json::Value> = serde_json::from_str(CLOUD_API).unwrap();
    let body = serde_json::to_vec(&all[name]).unwrap();
    parse(&body).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn only_message(name: &str) -> InboundMessage {
    let updates = fixture(name);
    assert!(
        updates.rejected.is_empty(),
        "{name}: {:?}",
        updates.rejected
    );
    assert_eq!(updates.messages.len(), 1, "{name}");
    updates.messages.into_iter().next().unwrap()
}

#[test]
fn a_text_message_gives_sender_profile_and_body() {
    let m = only_message("text");
    assert_eq!(m.wa_id.as_str(), "34600111222");
    assert_eq!(m.phone.as_deref(), Some("34600111222"));
    assert_eq!(m.user_id.as_deref(), Some("ES.1502576394655843"));
    assert_eq!(m.name.as_deref(), Some("María José Núñez"));
    assert_eq!(m.phone_number_id, "109876543210");
    assert_eq!(m.kind, "text");
    assert_eq!(m.sent_at.unwrap().timestamp(), 1_764_100_800);
    assert_eq!(
        m.content,
        Content::Text {
            body: "Hola, ¿sigue disponible el ático de la calle Mayor? Me interesa verlo este sábado 🏠"
                .into()
        }
    );
    assert!(m.context.is_none());
}

#[test]
fn media_messages_keep_id_mime_and_caption() {
    for (name, kind, caption) in [
        (
            "image",
            MediaKind::Image,
            Some("¿Tenéis algo parecido a esta fachada en Málaga?"),
        ),
        ("audio_voice", MediaKind::Voice, None),
        (
            "video",
            MediaKind::Video,
            Some("Así se ve desde la terraza"),
        ),
        (
            "document",
            MediaKind::Document,
            Some("Mi nómina para la hipoteca"),
        ),
        ("sticker", MediaKind::Sticker, None),
    ] {
        let m = only_message(name);
        let Content::Media {
            kind: got,
            id,
            mime_type,
            caption: got_caption,
            ..
        } = &m.content
        else {
            panic!("{name}: {:?}", m.content);
        };
        assert_eq!(*got, kind, "{name}");
        assert!(id.is_some() && mime_type.is_some(), "{name}");
        assert_eq!(got_caption.as_deref(), caption, "{name}");
    }
    let Content::Media { filename, .. } = only_message("document").content else {
        unreachable!()
    };
    assert_eq!(filename.as_deref(), Some("nómina_octubre.pdf"));
}

#[test]
fn a_location_reads_as_place_and_coordinates() {
    let m = only_message("location");
    assert_eq!(
        m.content.text().unwrap(),
        "Puerta del Sol, Plaza de la Puerta del Sol, 28013 Madrid (40.4167754, -3.7037902)"
    );
}

#[test]
fn shared_contacts_read_as_names_and_phones() {
    let m = only_message("contacts");
    assert_eq!(
        m.content,
        Content::Contacts {
            names: vec!["Íñigo Alcázar (+34 611 222 333)".into()]
        }
    );
}

#[test]
fn interactive_replies_and_buttons_give_id_and_title() {
    let m = only_message("interactive_button_reply");
    assert_eq!(
        m.content,
        Content::ButtonReply {
            id: "confirm_visit:8842".into(),
            title: "Sí, confirmar".into()
        }
    );
    assert_eq!(
        m.context.unwrap().message_id.as_deref(),
        Some("wamid.HBgLMzQ2MDAxMTEyMjIVAgARGBI1QjQ2RUIwRUU2NTVBQjlCRUYA")
    );
    let m = only_message("interactive_list_reply");
    assert_eq!(
        m.content.text().unwrap(),
        "Sáb 28, 10:00 — Visita al piso de Chamberí"
    );
    let m = only_message("button");
    assert_eq!(
        m.content,
        Content::Button {
            payload: Some("RECORDATORIO_OK".into()),
            text: "Allí estaré".into()
        }
    );
}

#[test]
fn reactions_and_their_removal_are_told_apart() {
    assert_eq!(
        only_message("reaction").content.text().as_deref(),
        Some("👍")
    );
    let removed = only_message("reaction_removed");
    assert!(matches!(
        removed.content,
        Content::Reaction { emoji: None, .. }
    ));
    assert_eq!(removed.content.text(), None);
}

#[test]
fn an_unsupported_message_keeps_its_errors() {
    let m = only_message("unsupported");
    let Content::Unsupported { errors } = m.content else {
        panic!("{:?}", m.content);
    };
    assert_eq!(errors[0].code, Some(131051));
}

#[test]
fn a_reply_carries_the_replied_to_message_id() {
    let m = only_message("reply");
    let context = m.context.unwrap();
    assert_eq!(
        context.message_id.as_deref(),
        Some("wamid.HBgLMzQ2MDAxMTEyMjIVAgARGBI5Rjg4MkY0MjI5OTlFRjNGMDQA")
    );
    assert!(!context.forwarded);
}

#[test]
fn an_unknown_message_type_is_kept_with_its_raw_json() {
    let m = only_message("unknown_type");
    assert_eq!(m.kind, "hologram");
    assert_eq!(m.content, Content::Other);
    let raw: serde_json::Value = serde_json::from_str(&m.raw).unwrap();
    assert_eq!(raw["novel_field"]["nested"][2], 3);
    assert_eq!(raw["hologram"]["codec"], "future");
}

#[test]
fn a_username_user_without_phone_is_keyed_by_user_id() {
    let m = only_message("username_only");
    assert_eq!(m.wa_id.as_str(), "ES.9988776655443322");
    assert_eq!(m.phone, None);
    assert_eq!(m.username.as_deref(), Some("lucia_casas"));
    assert_eq!(m.name.as_deref(), Some("Lucía"));
}

#[test]
fn every_status_kind_is_read_with_its_errors() {
    for status in ["sent", "delivered", "read", "played", "failed"] {
        let updates = fixture(&format!("status_{status}"));
        assert!(updates.messages.is_empty());
        assert_eq!(updates.statuses.len(), 1);
        let s = &updates.statuses[0];
        assert_eq!(s.status, status);
        assert_eq!(s.at.unwrap().timestamp(), 1_764_100_860);
        assert_eq!(s.recipient_id.as_deref(), Some("34600111222"));
        assert_eq!(s.errors.is_empty(), status != "failed", "{status}");
    }
    let failed = fixture("status_failed");
    assert_eq!(failed.statuses[0].errors[0].code, Some(131047));
}

#[test]
fn value_level_errors_are_reported() {
    let updates = fixture("value_errors");
    assert!(updates.messages.is_empty());
    assert_eq!(updates.errors[0].code, Some(131000));
}

#[test]
fn a_batch_yields_every_entry_change_message_and_status_in_order() {
    let updates = fixture("batch");
    let ids: Vec<&str> = updates.messages.iter().map(|m| m.wamid.as_str()).collect();
    assert_eq!(
        ids,
        [
            "wamid.BATCH1",
            "wamid.BATCH2",
            "wamid.BATCH3",
            "wamid.BATCH4"
        ]
    );
    assert_eq!(updates.messages[2].wa_id.as_str(), "34622333444");
    assert_eq!(updates.messages[2].name.as_deref(), Some("Ana Belén"));
    assert_eq!(updates.statuses.len(), 1);
    // The account's change is read as a signal, in the same body.
    assert!(updates.ignored.is_empty());
    assert_eq!(updates.accounts.len(), 1);
    assert_eq!(updates.accounts[0].event, "VERIFIED_ACCOUNT");
}

#[test]
fn a_thousand_messages_in_one_body_are_all_read() {
    let messages: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            serde_json::json!({
                "from": format!("34600{i:06}"), "id": format!("wamid.N{i}"),
                "timestamp": "1764100800", "type": "text", "text": {"body": format!("mensaje {i}")}
            })
        })
        .collect();
    let body = serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "1", "phone_number_id": "2"},
            "messages": messages,
        }}]}]
    });
    let updates = parse(&serde_json::to_vec(&body).unwrap()).unwrap();
    assert_eq!(updates.messages.len(), 1000);
    assert_eq!(updates.messages[999].wamid.as_str(), "wamid.N999");
    assert_eq!(updates.messages[999].wa_id.as_str(), "34600000999");
}

#[test]
fn one_malformed_message_does_not_lose_the_others() {
    let body = br#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
        "metadata":{"phone_number_id":"2"},
        "messages":[
            {"from":"34600111222","id":"wamid.OK1","timestamp":"1","type":"text","text":{"body":"hola"}},
            {"from":"34600111222","id":12345,"type":"text"},
            {"from":"34600111222","timestamp":"1","type":"text","text":{"body":"sin id"}},
            {"id":"wamid.NOSENDER","type":"text","text":{"body":"sin remitente"}},
            {"from":"34600111222","id":"wamid.OK2","timestamp":"1","type":"text","text":{"body":"adios"}}
        ]}}]}]}"#;
    let updates = parse(body).unwrap();
    let ids: Vec<&str> = updates.messages.iter().map(|m| m.wamid.as_str()).collect();
    assert_eq!(ids, ["wamid.OK1", "wamid.OK2"]);
    assert_eq!(updates.rejected.len(), 3);
    assert!(updates.rejected.iter().all(|r| r.what == "message"));
    assert!(updates.rejected[2].reason.contains("no sender"));
}

#[test]
fn a_body_that_is_not_a_notification_is_refused() {
    for body in [
        &b"not json"[..],
        b"",
        b"[]",
        br#"{"entry": "nope"}"#,
        br#"{"entry":[{"changes":[{"field":"messages","value":{"messages":[]}}]}]}"#,
        b"{\"entry\":[\xff]}",
    ] {
        assert!(parse(body).is_err(), "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn an_empty_notification_is_valid_and_empty() {
    let updates = parse(br#"{"object":"whatsapp_business_account","entry":[]}"#).unwrap();
    assert!(updates.messages.is_empty() && updates.statuses.is_empty());
}
