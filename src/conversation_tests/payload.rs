//! The shapes the Cloud API accepts for the messages Zaguan sends (Meta's "send messages"
//! reference: text, reply buttons, lists, images, templates), checked on every message a
//! conversation test sends: a reply Meta would refuse fails the step, whatever was expected.

use serde_json::Value;

fn chars(value: &Value) -> usize {
    value.as_str().map_or(0, |s| s.chars().count())
}

fn text_within(problems: &mut Vec<String>, what: &str, value: &Value, max: usize) {
    match value.as_str() {
        None => problems.push(format!("{what} is missing")),
        Some("") => problems.push(format!("{what} is empty")),
        Some(_) if chars(value) > max => problems.push(format!(
            "{what} has {} characters (at most {max})",
            chars(value)
        )),
        Some(_) => {}
    }
}

/// What Meta would refuse in `body` (a `POST /{phone_number_id}/messages` body); empty when
/// nothing.
pub fn problems(body: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if body["messaging_product"] != "whatsapp" {
        problems.push("messaging_product is not \"whatsapp\"".to_owned());
    }
    if body["to"].as_str().is_none_or(str::is_empty) {
        problems.push("to is missing".to_owned());
    }
    match body["type"].as_str() {
        Some("text") => text_within(&mut problems, "text.body", &body["text"]["body"], 4096),
        Some("image") => {
            let image = &body["image"];
            let link = image["link"].as_str().unwrap_or_default();
            if image["id"].is_null() && !link.starts_with("https://") {
                problems.push(format!("image.link `{link}` is not an https URL"));
            }
            if !image["caption"].is_null() && chars(&image["caption"]) > 1024 {
                problems.push("image.caption is over 1024 characters".to_owned());
            }
        }
        Some("interactive") => interactive(&mut problems, &body["interactive"]),
        Some("template") => {
            let template = &body["template"];
            if !template["name"].as_str().is_some_and(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            }) {
                problems.push(format!(
                    "template.name {} is not a template name",
                    template["name"]
                ));
            }
            text_within(
                &mut problems,
                "template.language.code",
                &template["language"]["code"],
                15,
            );
        }
        Some(other) => problems.push(format!("type `{other}` is not one Zaguan sends")),
        None => problems.push("type is missing".to_owned()),
    }
    problems
}

fn interactive(problems: &mut Vec<String>, interactive: &Value) {
    match interactive["type"].as_str() {
        Some("button") => {
            text_within(
                problems,
                "interactive.body.text",
                &interactive["body"]["text"],
                1024,
            );
            let buttons = interactive["action"]["buttons"].as_array();
            let count = buttons.map_or(0, Vec::len);
            if !(1..=3).contains(&count) {
                problems.push(format!("{count} reply buttons (1 to 3)"));
            }
            for button in buttons.into_iter().flatten() {
                if button["type"] != "reply" {
                    problems.push("a button's type is not \"reply\"".to_owned());
                }
                text_within(problems, "a button's title", &button["reply"]["title"], 20);
                text_within(problems, "a button's id", &button["reply"]["id"], 256);
            }
        }
        Some("list") => {
            text_within(
                problems,
                "interactive.body.text",
                &interactive["body"]["text"],
                4096,
            );
            text_within(
                problems,
                "the list's button",
                &interactive["action"]["button"],
                20,
            );
            let sections = interactive["action"]["sections"].as_array();
            let sections = sections.map(Vec::as_slice).unwrap_or_default();
            if !(1..=10).contains(&sections.len()) {
                problems.push(format!("{} list sections (1 to 10)", sections.len()));
            }
            let mut rows = 0;
            for section in sections {
                if !section["title"].is_null() && chars(&section["title"]) > 24 {
                    problems.push("a section title is over 24 characters".to_owned());
                }
                for row in section["rows"].as_array().into_iter().flatten() {
                    rows += 1;
                    text_within(problems, "a row's id", &row["id"], 200);
                    text_within(problems, "a row's title", &row["title"], 24);
                    if !row["description"].is_null() && chars(&row["description"]) > 72 {
                        problems.push("a row's description is over 72 characters".to_owned());
                    }
                }
            }
            if !(1..=10).contains(&rows) {
                problems.push(format!("{rows} list rows (1 to 10 in all)"));
            }
        }
        Some("carousel") => carousel(problems, interactive),
        other => problems.push(format!(
            "interactive type {other:?} is not one Zaguan sends"
        )),
    }
}

/// Meta's «Interactive media carousel messages»: a body of up to 1,024 characters, 2–10 cards
/// indexed from 0, each with an image or video header, a body of up to 160 characters and the
/// same quick replies as the first card.
fn carousel(problems: &mut Vec<String>, interactive: &Value) {
    text_within(
        problems,
        "interactive.body.text",
        &interactive["body"]["text"],
        1024,
    );
    let cards = interactive["action"]["cards"].as_array();
    let cards = cards.map(Vec::as_slice).unwrap_or_default();
    if !(2..=10).contains(&cards.len()) {
        problems.push(format!("{} carousel cards (2 to 10)", cards.len()));
    }
    for (i, card) in cards.iter().enumerate() {
        if card["card_index"] != i {
            problems.push(format!("card {i} is indexed {}", card["card_index"]));
        }
        if card["type"] != "cta_url" {
            problems.push(format!("card {i}'s type is {}", card["type"]));
        }
        let header = &card["header"];
        let kind = header["type"].as_str().unwrap_or_default();
        if !matches!(kind, "image" | "video") || !header[kind]["link"].is_string() {
            problems.push(format!("card {i} has no image or video header"));
        }
        if !card["body"].is_null() && chars(&card["body"]["text"]) > 160 {
            problems.push(format!("card {i}'s body is over 160 characters"));
        }
        if card["action"]["buttons"] != cards[0]["action"]["buttons"] {
            problems.push(format!("card {i}'s buttons differ from the first card's"));
        }
        let buttons = card["action"]["buttons"].as_array();
        if buttons.is_none_or(Vec::is_empty) {
            problems.push(format!("card {i} has no quick replies"));
        }
        for button in buttons.into_iter().flatten() {
            if button["type"] != "quick_reply" {
                problems.push(format!("card {i} has a button that is not a quick reply"));
            }
            text_within(
                problems,
                "a quick reply's title",
                &button["quick_reply"]["title"],
                20,
            );
            text_within(
                problems,
                "a quick reply's id",
                &button["quick_reply"]["id"],
                256,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_meta_accepts_passes_and_what_it_refuses_is_named() {
        let ok = json!({"messaging_product": "whatsapp", "to": "34600111222", "type": "interactive",
            "interactive": {"type": "button", "body": {"text": "¿Confirmas?"},
                "action": {"buttons": [{"type": "reply", "reply": {"id": "confirm:1", "title": "Confirmar"}}]}}});
        assert!(problems(&ok).is_empty(), "{:?}", problems(&ok));
        let mut long = ok.clone();
        long["interactive"]["action"]["buttons"][0]["reply"]["title"] =
            json!("Confirmar la visita del jueves");
        assert_eq!(
            problems(&long),
            ["a button's title has 30 characters (at most 20)"]
        );
        let list = json!({"messaging_product": "whatsapp", "to": "1", "type": "interactive",
            "interactive": {"type": "list", "body": {"text": "Opciones"},
                "action": {"button": "Ver", "sections": [{"rows": []}]}}});
        assert_eq!(problems(&list), ["0 list rows (1 to 10 in all)"]);
        let image = json!({"messaging_product": "whatsapp", "to": "1", "type": "image",
            "image": {"link": "http://insecure.example/p.jpg"}});
        assert_eq!(problems(&image).len(), 1);
        let card = |i: usize| {
            json!({"card_index": i, "type": "cta_url",
                "header": {"type": "image", "image": {"link": "https://fotos.example/1.jpg"}},
                "body": {"text": "Piso en Ruzafa"},
                "action": {"buttons": [{"type": "quick_reply",
                    "quick_reply": {"id": "book:P-1", "title": "Reservar visita"}}]}})
        };
        let carousel = json!({"messaging_product": "whatsapp", "to": "1", "type": "interactive",
            "interactive": {"type": "carousel", "body": {"text": "Mira estas fotos"},
                "action": {"cards": [card(0), card(1)]}}});
        assert!(problems(&carousel).is_empty(), "{:?}", problems(&carousel));
        let mut lone = carousel.clone();
        lone["interactive"]["action"]["cards"] = json!([card(0)]);
        assert_eq!(problems(&lone), ["1 carousel cards (2 to 10)"]);
    }
}
