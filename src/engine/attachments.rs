//! What the tools of a turn show the customer besides the assistant's words — photos, a list
//! of options to tap — put into the conversation's language and queued after the reply's text,
//! in the order the tools ran (before a confirmation's buttons, which stay last).

use super::context_extractor::State;
use crate::domain::Content;
use crate::domain::MessageRole;
use crate::outbound::graph::{MAX_CAPTION, MAX_LIST_ROWS};
use crate::store::{Attachment, ListRow};

/// Most attachments one reply carries: a few photos and a list, not an album.
pub const MAX_PER_REPLY: usize = 6;

/// The row id prefix of a list row that asks an assistant about something: `ask:<agent>:<ref>`.
/// A tap on it goes to that assistant with the row's words (see [`asked_agent`]).
pub const ASK_PREFIX: &str = "ask:";

/// The attachments of the tool messages (and offline mode's AI messages) since the user's
/// last message, oldest first.
pub fn this_turn(state: &State) -> Vec<Attachment> {
    let since = state
        .messages
        .iter()
        .rposition(|m| m.message.role == MessageRole::Human)
        .map_or(0, |i| i + 1);
    state.messages[since..]
        .iter()
        .filter(|m| m.message.role != MessageRole::Human)
        .flat_map(|m| m.message.attachments.iter().cloned())
        .take(MAX_PER_REPLY)
        .collect()
}

/// The list button's words (≤ 20 characters) in `lang`.
pub fn list_button(lang: Option<&str>) -> &'static str {
    match lang.unwrap_or("es") {
        "en" => "See options",
        "pt" => "Ver opções",
        "fr" => "Voir les options",
        "de" => "Optionen ansehen",
        "it" => "Vedi opzioni",
        "ca" => "Veure opcions",
        _ => "Ver opciones",
    }
}

/// A list as plain text: what is sent where a list message cannot be.
pub fn plain_list(text: &str, rows: &[ListRow]) -> String {
    let mut out = text.to_owned();
    for row in rows.iter().take(MAX_LIST_ROWS) {
        out.push('\n');
        out.push_str(&row.title);
        if !row.description.is_empty() {
            out.push_str(" — ");
            out.push_str(&row.description);
        }
    }
    out
}

/// A caption cut to what WhatsApp shows.
pub fn caption(text: &str) -> String {
    text.chars().take(MAX_CAPTION).collect()
}

/// The assistant a tapped list row or reply button asks for (`ask:<agent>:<ref>`).
pub fn asked_agent(content: &Content) -> Option<String> {
    let (Content::ListReply { id, .. } | Content::ButtonReply { id, .. }) = content else {
        return None;
    };
    let (agent, _) = id.strip_prefix(ASK_PREFIX)?.split_once(':')?;
    (!agent.is_empty()).then(|| agent.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tapped_row_names_the_assistant_it_asks() {
        let row = |id: &str| Content::ListReply {
            id: id.into(),
            title: "P-1001 · 245.000 €".into(),
            description: None,
        };
        assert_eq!(
            asked_agent(&row("ask:property_assistant:P-1001")).as_deref(),
            Some("property_assistant")
        );
        assert_eq!(asked_agent(&row("row-3")), None);
        assert_eq!(asked_agent(&row("ask::P-1")), None);
        let text = Content::Text {
            body: "ask:property_assistant:P-1001".into(),
        };
        assert_eq!(asked_agent(&text), None);
    }

    #[test]
    fn a_list_reads_as_text_where_it_cannot_be_sent() {
        let rows = vec![
            ListRow {
                id: "ask:property_assistant:P-1".into(),
                title: "P-1 · 200.000 €".into(),
                description: "Ruzafa · 🛏 2 · 70 m²".into(),
            },
            ListRow {
                id: "ask:property_assistant:P-2".into(),
                title: "P-2 · 210.000 €".into(),
                description: String::new(),
            },
        ];
        assert_eq!(
            plain_list("Dos opciones:", &rows),
            "Dos opciones:\nP-1 · 200.000 € — Ruzafa · 🛏 2 · 70 m²\nP-2 · 210.000 €"
        );
        assert!(list_button(Some("de")).chars().count() <= 20);
        assert!(list_button(Some("fr")).chars().count() <= 20);
    }
}
