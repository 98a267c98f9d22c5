//! A turn's reply in as few WhatsApp messages as say it. Since October 2026 Meta bills every
//! message inside the window, so the parts are bundled before they are queued:
//!
//! - consecutive texts become one, up to WhatsApp's 4,096 characters;
//! - a text before a list or a question with buttons becomes that message's body, when the
//!   two fit its 1,024 characters;
//! - a text, two to ten photos and a question with one or two buttons become one media
//!   carousel (Meta's «Interactive media carousel messages»: a body of up to 1,024
//!   characters, cards with an image header, a body of up to 160 characters and the same
//!   quick replies on every card). A carousel Meta refuses is sent again as the text, the
//!   photos and the question it was made of, once ([`crate::outbound::failures`]).
//!
//! What cannot be bundled goes as it was.

use crate::outbound::graph::{MAX_INTERACTIVE_BODY, MAX_TEXT_BODY};
use crate::store::{Card, Media, NewOutbox};

/// Fewest and most cards a carousel holds.
pub const CAROUSEL_CARDS: std::ops::RangeInclusive<usize> = 2..=10;
/// Most characters of a card's body.
pub const MAX_CARD_BODY: usize = 160;
/// Most quick replies a card carries.
pub const MAX_CARD_BUTTONS: usize = 2;

/// `parts` bundled, numbered again in order.
pub fn bundle(parts: Vec<NewOutbox>) -> Vec<NewOutbox> {
    let before = parts.len();
    let mut bundled = carousels(intros(texts(parts)));
    let count = u32::try_from(bundled.len()).unwrap_or(u32::MAX);
    for (i, part) in bundled.iter_mut().enumerate() {
        part.part = u32::try_from(i).unwrap_or(u32::MAX);
        part.parts = count;
    }
    if bundled.len() < before {
        metrics::counter!("zaguan_outbound_bundled_total")
            .increment((before - bundled.len()) as u64);
    }
    bundled
}

/// Plain words: no media, no buttons, no template.
fn is_text(part: &NewOutbox) -> bool {
    part.media.is_none() && part.buttons.is_empty() && part.template.is_none()
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// `a` and `b` as one text, a blank line between.
fn joined(a: &str, b: &str) -> String {
    match (a.trim().is_empty(), b.trim().is_empty()) {
        (true, _) => b.to_owned(),
        (_, true) => a.to_owned(),
        _ => format!("{a}\n\n{b}"),
    }
}

/// Consecutive texts merged while they fit one message.
fn texts(parts: Vec<NewOutbox>) -> Vec<NewOutbox> {
    let mut out: Vec<NewOutbox> = Vec::with_capacity(parts.len());
    for part in parts {
        if let Some(last) = out.last_mut()
            && is_text(last)
            && is_text(&part)
            && chars(&joined(&last.body, &part.body)) <= MAX_TEXT_BODY
        {
            last.body = joined(&last.body, &part.body);
            continue;
        }
        out.push(part);
    }
    out
}

/// A text followed by a list or a question with buttons, as that message's body.
fn intros(parts: Vec<NewOutbox>) -> Vec<NewOutbox> {
    let mut out: Vec<NewOutbox> = Vec::with_capacity(parts.len());
    for mut part in parts {
        let Some(intro) = out.last().filter(|last| is_text(last)) else {
            out.push(part);
            continue;
        };
        let absorbed = match &mut part.media {
            Some(Media::List { text, .. }) if part.template.is_none() => {
                let body = joined(&intro.body, text);
                (chars(&body) <= MAX_INTERACTIVE_BODY).then(|| {
                    *text = body;
                    // The plain form, sent if the list is refused, says the intro too.
                    part.body = joined(&intro.body, &part.body);
                })
            }
            None if !part.buttons.is_empty() && part.template.is_none() => {
                let body = joined(&intro.body, &part.body);
                (chars(&body) <= MAX_INTERACTIVE_BODY).then(|| part.body = body)
            }
            _ => None,
        };
        if absorbed.is_some() {
            out.pop();
        }
        out.push(part);
    }
    out
}

fn is_photo(part: &NewOutbox) -> bool {
    matches!(part.media, Some(Media::Image { .. }))
        && part.buttons.is_empty()
        && part.template.is_none()
}

/// A text, photos and a question with buttons as one carousel.
fn carousels(parts: Vec<NewOutbox>) -> Vec<NewOutbox> {
    let mut out: Vec<NewOutbox> = Vec::with_capacity(parts.len());
    let mut parts = parts.into_iter().peekable();
    while let Some(part) = parts.next() {
        if !is_text(&part) || chars(&part.body) > MAX_INTERACTIVE_BODY || part.body.is_empty() {
            out.push(part);
            continue;
        }
        let mut photos = Vec::new();
        while let Some(next) = parts.peek()
            && is_photo(next)
            && photos.len() < *CAROUSEL_CARDS.end()
        {
            photos.extend(parts.next());
        }
        let question = parts.peek().filter(|next| {
            next.media.is_none()
                && next.template.is_none()
                && (1..=MAX_CARD_BUTTONS).contains(&next.buttons.len())
        });
        if !CAROUSEL_CARDS.contains(&photos.len()) || question.is_none() {
            out.push(part);
            out.extend(photos);
            continue;
        }
        let question = parts.next().expect("peeked");
        let cards = photos
            .iter()
            .filter_map(|photo| match &photo.media {
                Some(Media::Image { link }) => Some(Card {
                    link: link.clone(),
                    caption: card_body(&photo.body),
                }),
                _ => None,
            })
            .collect();
        let mut carousel = part;
        carousel.media = Some(Media::Carousel {
            text: carousel.body.clone(),
            cards,
            question: question.body.clone(),
        });
        carousel.buttons = question.buttons;
        out.push(carousel);
    }
    out
}

/// A photo's caption as a card's body: 160 characters, two line breaks at most.
fn card_body(caption: &str) -> String {
    let mut lines = caption.lines().take(3).collect::<Vec<_>>().join("\n");
    if chars(&lines) > MAX_CARD_BODY {
        lines = lines.chars().take(MAX_CARD_BODY - 1).collect::<String>() + "…";
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{WaId, WaMessageId};
    use crate::store::{ListRow, ReplyButton};

    fn parts(bodies: &[&str]) -> Vec<NewOutbox> {
        let bodies: Vec<String> = bodies.iter().map(|b| (*b).to_owned()).collect();
        NewOutbox::parts(
            &WaId::parse("34600111222").unwrap(),
            Some(&WaMessageId::parse("wamid.IN").unwrap()),
            Some("1065"),
            &bodies,
            chrono::Utc::now(),
        )
    }

    fn list(part: &mut NewOutbox) {
        part.media = Some(Media::List {
            text: "Toca una para ver su ficha.".into(),
            button: "Ver".into(),
            rows: vec![ListRow {
                id: "property:P-1031".into(),
                title: "P-1031".into(),
                description: "1.130 €/mes".into(),
            }],
        });
    }

    fn photo(part: &mut NewOutbox, n: usize) {
        part.media = Some(Media::Image {
            link: format!("https://media.example/{n}.jpg"),
        });
    }

    #[test]
    fn texts_merge_up_to_a_message_and_an_intro_becomes_the_lists_body() {
        let mut reply = parts(&["Hola.", "He encontrado 3 pisos.", "P-1031 · 1.130 €/mes"]);
        list(&mut reply[2]);
        let bundled = bundle(reply);
        assert_eq!(bundled.len(), 1);
        let Some(Media::List { text, .. }) = &bundled[0].media else {
            panic!("a list: {bundled:?}");
        };
        assert_eq!(
            text,
            "Hola.\n\nHe encontrado 3 pisos.\n\nToca una para ver su ficha."
        );
        assert!(bundled[0].body.starts_with("Hola.\n\nHe encontrado"));
        assert_eq!((bundled[0].part, bundled[0].parts), (0, 1));

        // Too long for one message: two.
        let long = "a".repeat(3000);
        let bundled = bundle(parts(&[&long, &long]));
        assert_eq!(bundled.len(), 2);
        assert_eq!((bundled[1].part, bundled[1].parts), (1, 2));
    }

    #[test]
    fn an_intro_joins_a_question_with_buttons_only_when_it_fits() {
        let mut reply = parts(&[
            "Antes de hacerlo, necesito tu confirmación.",
            "Visita el martes",
        ]);
        reply[1].buttons = vec![
            ReplyButton::new("confirm:1", "Confirmar"),
            ReplyButton::new("cancel:1", "Cancelar"),
        ];
        let bundled = bundle(reply.clone());
        assert_eq!(bundled.len(), 1);
        assert_eq!(
            bundled[0].body,
            "Antes de hacerlo, necesito tu confirmación.\n\nVisita el martes"
        );
        reply[0].body = "x".repeat(1010);
        assert_eq!(bundle(reply).len(), 2, "over 1,024 characters together");
    }

    #[test]
    fn a_listing_its_photos_and_a_tap_to_book_become_one_carousel() {
        let mut reply = parts(&[
            "P-1031 — Piso amueblado en Benimaclet",
            "P-1031 (1/3)",
            "P-1031 (2/3)",
            "P-1031 (3/3)",
            "¿Quieres visitarlo?",
        ]);
        for (n, part) in reply.iter_mut().enumerate().skip(1).take(3) {
            photo(part, n);
        }
        reply[4].buttons = vec![ReplyButton::new("visit:P-1031", "Quiero visitarlo")];
        let bundled = bundle(reply.clone());
        assert_eq!(bundled.len(), 1, "{bundled:?}");
        let Some(Media::Carousel {
            text,
            cards,
            question,
        }) = &bundled[0].media
        else {
            panic!("a carousel: {bundled:?}");
        };
        assert_eq!(text, "P-1031 — Piso amueblado en Benimaclet");
        assert_eq!(cards.len(), 3);
        assert_eq!(cards[1].link, "https://media.example/2.jpg");
        assert_eq!(cards[1].caption, "P-1031 (2/3)");
        assert_eq!(question, "¿Quieres visitarlo?");
        assert_eq!(bundled[0].buttons[0].id, "visit:P-1031");

        // One photo is no carousel; nor photos with no button to tap.
        let one: Vec<NewOutbox> = [&reply[0], &reply[1], &reply[4]]
            .into_iter()
            .cloned()
            .collect();
        assert_eq!(bundle(one).len(), 3);
        let no_button: Vec<NewOutbox> = reply[..4].to_vec();
        assert_eq!(bundle(no_button).len(), 4);
    }

    #[test]
    fn a_cards_body_keeps_to_160_characters_and_two_line_breaks() {
        let body = card_body(&format!("uno\ndos\ntres\ncuatro {}", "x".repeat(200)));
        assert_eq!(body, "uno\ndos\ntres");
        let long = card_body(&"y".repeat(300));
        assert_eq!(long.chars().count(), MAX_CARD_BODY);
        assert!(long.ends_with('…'));
    }
}
