//! A step's expectations against what the bot did. Each problem names the key, what was
//! expected and what happened, so the person reading the failure needs nothing else.

use serde_json::Value;
use unicode_normalization::UnicodeNormalization as _;

use super::spec::{Expect, ToolExpect};
use crate::domain::ToolCall;

/// What the bot did in one step.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The texts of its messages (text bodies, interactive bodies, captions), one per line.
    pub reply: String,
    /// The exact bodies the Graph API received.
    pub messages: Vec<Value>,
    /// Reply button titles.
    pub buttons: Vec<String>,
    /// List rows: (id, title).
    pub rows: Vec<(String, String)>,
    pub images: Vec<String>,
    /// Tool calls in the history this step (the model's, the fast path's, confirmed ones).
    pub tools: Vec<ToolCall>,
    /// Business events written this step, by type.
    pub events: Vec<String>,
    /// The assistant holding the conversation; `None` is the primary.
    pub dialog_state: Option<String>,
    pub lang: Option<String>,
    pub pending_action: Option<String>,
    pub handoff_requested: bool,
}

/// Lower case, without accents: «Colón» and «colon» are the same to a reader.
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .collect::<String>()
        .to_lowercase()
}

fn quote(text: &str) -> String {
    let short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        format!("«{short}…»")
    } else {
        format!("«{short}»")
    }
}

/// Every way `observed` falls short of `expect`.
pub fn check(expect: &Expect, observed: &Observed) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(wanted) = &expect.dialog_state {
        let actual = observed.dialog_state.as_deref().unwrap_or("primary");
        let wanted_primary = wanted == "primary" || wanted == "primary_assistant";
        if (wanted_primary && observed.dialog_state.is_some())
            || (!wanted_primary && actual != wanted)
        {
            problems.push(format!("dialog_state: expected {wanted}, got {actual}"));
        }
    }
    let reply = fold(&observed.reply);
    if let Some(texts) = &expect.reply_contains {
        for text in texts.to_vec() {
            if !reply.contains(&fold(&text)) {
                problems.push(format!(
                    "reply_contains: «{text}» is not in the reply {}",
                    quote(&observed.reply)
                ));
            }
        }
    }
    if let Some(texts) = &expect.reply_lacks {
        for text in texts.to_vec() {
            if reply.contains(&fold(&text)) {
                problems.push(format!(
                    "reply_lacks: «{text}» is in the reply {}",
                    quote(&observed.reply)
                ));
            }
        }
    }
    if let Some(pattern) = &expect.reply_matches {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(&observed.reply) => {}
            Ok(_) => problems.push(format!(
                "reply_matches: /{pattern}/ does not match the reply {}",
                quote(&observed.reply)
            )),
            Err(e) => problems.push(format!("reply_matches: {e}")),
        }
    }
    if let Some(lang) = &expect.lang
        && observed.lang.as_deref() != Some(lang.as_str())
    {
        problems.push(format!(
            "lang: expected {lang}, got {}",
            observed.lang.as_deref().unwrap_or("none")
        ));
    }
    if let Some(no_reply) = expect.no_reply {
        let replied = !observed.messages.is_empty();
        if no_reply && replied {
            problems.push(format!(
                "no_reply: the bot answered {}",
                quote(&observed.reply)
            ));
        }
        if !no_reply && !replied {
            problems.push("no_reply: false, but nothing was sent".to_owned());
        }
    }
    let called: Vec<String> = observed
        .tools
        .iter()
        .map(|c| format!("{} {}", c.name, c.args))
        .collect();
    if let Some(tools) = &expect.tool {
        for wanted in tools.to_vec() {
            if !observed
                .tools
                .iter()
                .any(|call| tool_matches(&wanted, call))
            {
                problems.push(format!(
                    "tool: {} was not called{}; called: {}",
                    wanted.name(),
                    match &wanted {
                        ToolExpect::WithArgs { args, .. } if !args.is_empty() =>
                            format!(" with {}", serde_json::to_string(args).unwrap_or_default()),
                        _ => String::new(),
                    },
                    if called.is_empty() {
                        "none".to_owned()
                    } else {
                        called.join(", ")
                    }
                ));
            }
        }
    }
    if let Some(tools) = &expect.no_tool {
        for name in tools.to_vec() {
            if observed.tools.iter().any(|call| call.name == name) {
                problems.push(format!(
                    "no_tool: {name} was called ({})",
                    called.join(", ")
                ));
            }
        }
    }
    if let Some(events) = &expect.event {
        for event in events.to_vec() {
            if !observed.events.contains(&event) {
                problems.push(format!(
                    "event: {event} was not written; written: {}",
                    if observed.events.is_empty() {
                        "none".to_owned()
                    } else {
                        observed.events.join(", ")
                    }
                ));
            }
        }
    }
    if expect.no_event == Some(true) && !observed.events.is_empty() {
        problems.push(format!("no_event: written {}", observed.events.join(", ")));
    }
    if let Some(buttons) = &expect.buttons {
        for button in buttons {
            if !observed.buttons.iter().any(|b| fold(b) == fold(button)) {
                problems.push(format!(
                    "buttons: «{button}» was not shown; shown: {:?}",
                    observed.buttons
                ));
            }
        }
    }
    if let Some(rows) = &expect.list_rows {
        for row in rows {
            if !observed
                .rows
                .iter()
                .any(|(id, title)| id.starts_with(row.as_str()) || fold(title).contains(&fold(row)))
            {
                problems.push(format!(
                    "list_rows: «{row}» was not in the list; rows: {:?}",
                    observed.rows.iter().map(|(id, _)| id).collect::<Vec<_>>()
                ));
            }
        }
    }
    if let Some(wanted) = &expect.pending_action {
        let actual = observed.pending_action.as_deref().unwrap_or("none");
        if actual != wanted {
            problems.push(format!("pending_action: expected {wanted}, got {actual}"));
        }
    }
    if let Some(wanted) = expect.handoff_requested
        && wanted != observed.handoff_requested
    {
        problems.push(format!(
            "handoff_requested: expected {wanted}, got {}",
            observed.handoff_requested
        ));
    }
    if let Some(payloads) = &expect.payload {
        let actual: Vec<Value> = observed.messages.iter().map(comparable).collect();
        let wanted: Vec<Value> = payloads.iter().map(comparable).collect();
        if actual != wanted {
            problems.push(format!(
                "payload: expected {}, got {}",
                serde_json::to_string(&wanted).unwrap_or_default(),
                serde_json::to_string(&actual).unwrap_or_default()
            ));
        }
    }
    problems
}

/// A message body without what differs per run or per customer: the recipient and the outbox
/// id in `biz_opaque_callback_data`.
fn comparable(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(object) = body.as_object_mut() {
        object.remove("to");
        object.remove("recipient");
        object.remove("biz_opaque_callback_data");
    }
    body
}

fn tool_matches(wanted: &ToolExpect, call: &ToolCall) -> bool {
    match wanted {
        ToolExpect::Name(name) => call.name == *name,
        ToolExpect::WithArgs { name, args } => {
            call.name == *name
                && args.iter().all(|(key, value)| {
                    let actual = &call.args[key];
                    actual == value
                        || match (actual.as_str(), value.as_str()) {
                            (Some(a), Some(v)) => fold(a).contains(&fold(v)),
                            _ => false,
                        }
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation_tests::spec::OneOrMany;

    #[test]
    fn each_problem_names_the_key_the_wish_and_the_fact() {
        let observed = Observed {
            reply: "La visita queda reservada para el jueves en la calle Colón".into(),
            dialog_state: Some("appointment_assistant".into()),
            tools: vec![ToolCall {
                id: "c".into(),
                name: "book_appointment".into(),
                args: serde_json::json!({"slot_id": "S-P1001-202603051000"}).into(),
            }],
            events: vec!["appointment.booked".into()],
            ..Observed::default()
        };
        let expect = Expect {
            dialog_state: Some("appointment_assistant".into()),
            reply_contains: Some(OneOrMany::Many(vec!["colon".into(), "jueves".into()])),
            tool: Some(OneOrMany::One(ToolExpect::WithArgs {
                name: "book_appointment".into(),
                args: [("slot_id".to_owned(), serde_json::json!("P1001"))].into(),
            })),
            event: Some(OneOrMany::One("appointment.booked".into())),
            ..Expect::default()
        };
        assert!(
            check(&expect, &observed).is_empty(),
            "{:?}",
            check(&expect, &observed)
        );
        let wrong = Expect {
            dialog_state: Some("primary".into()),
            event: Some(OneOrMany::One("offer.submitted".into())),
            no_reply: Some(false),
            ..Expect::default()
        };
        assert_eq!(
            check(&wrong, &observed),
            [
                "dialog_state: expected primary, got appointment_assistant",
                "no_reply: false, but nothing was sent",
                "event: offer.submitted was not written; written: appointment.booked",
            ]
        );
    }
}
