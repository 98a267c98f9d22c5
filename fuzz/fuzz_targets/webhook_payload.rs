//! `zaguan::webhook::payload::parse` on arbitrary bodies.
//!
//! Besides "never panics", checks what the module docs promise:
//! - a body whose first non-whitespace byte is not `{` is refused as `NotAnObject`, and only such
//!   a body is;
//! - when the envelope is accepted, every message and every status of every `messages` change is
//!   either read or recorded as rejected ("never silently dropped"), every change of another
//!   field is listed in `ignored` (template status and category changes are read or rejected
//!   like messages; Meta's signals — a template's quality, an account's or a number's standing,
//!   a customer's marketing preference — are read or rejected as `signal`), and the raw JSON
//!   kept for a message is exactly as received (a verbatim slice of the body).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use zaguan::webhook::payload::{PayloadError, parse};

fuzz_target!(|body: &[u8]| {
    let result = parse(body);
    let starts_with_brace = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let updates = match result {
        Err(PayloadError::NotAnObject) => {
            assert!(
                !starts_with_brace,
                "a body starting with `{{` refused as not an object"
            );
            return;
        }
        Err(PayloadError::Malformed(_)) => {
            assert!(
                starts_with_brace,
                "a body not starting with `{{` must be NotAnObject"
            );
            return;
        }
        Ok(updates) => updates,
    };
    assert!(starts_with_brace, "accepted a body that is not an object");

    let finder = |raw: &str| memchr::memmem::find(body, raw.as_bytes()).is_some();
    for message in &updates.messages {
        assert!(
            finder(&message.raw),
            "message raw is not a slice of the body: {:?}",
            message.raw
        );
    }
    for rejected in &updates.rejected {
        assert!(
            finder(&rejected.raw),
            "rejected raw is not a slice of the body: {:?}",
            rejected.raw
        );
        assert!(
            matches!(rejected.what, "message" | "status" | "template" | "signal"),
            "{:?}",
            rejected.what
        );
    }

    // The same body read independently as a JSON tree. serde_json's tree and its typed structs
    // can disagree on edge cases (recursion depth); only compare when both read it.
    let Ok(tree) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let (mut messages, mut statuses, mut templates, mut ignored) = (0usize, 0usize, 0usize, 0usize);
    let (mut accounts, mut preferences) = (0usize, 0usize);
    for entry in array(&tree, "entry") {
        for change in array(entry, "changes") {
            let field = change.get("field").and_then(Value::as_str).unwrap_or("");
            if matches!(
                field,
                "message_template_status_update"
                    | "template_category_update"
                    | "message_template_quality_update"
            ) {
                templates += 1;
                continue;
            }
            if matches!(field, "account_update" | "phone_number_quality_update") {
                accounts += 1;
                continue;
            }
            if field == "user_preferences" {
                preferences += 1;
                continue;
            }
            if field != "messages" {
                ignored += 1;
                continue;
            }
            let value = &change["value"];
            messages += array(value, "messages").len();
            statuses += array(value, "statuses").len();
        }
    }
    let rejected = |what: &str| updates.rejected.iter().filter(|r| r.what == what).count();
    let rejected_signal = |fields: &[&str]| {
        updates
            .rejected
            .iter()
            .filter(|r| {
                r.what == "signal"
                    && fields
                        .iter()
                        .any(|f| r.reason.starts_with(&format!("{f}:")))
            })
            .count()
    };
    let (rejected_messages, rejected_statuses) = (rejected("message"), rejected("status"));
    assert_eq!(
        updates.messages.len() + rejected_messages,
        messages,
        "a message was neither read nor rejected"
    );
    assert_eq!(
        updates.statuses.len() + rejected_statuses,
        statuses,
        "a status was neither read nor rejected"
    );
    assert_eq!(
        updates.templates.len()
            + rejected("template")
            + rejected_signal(&["message_template_quality_update"]),
        templates,
        "a template change was neither read nor rejected"
    );
    assert_eq!(
        updates.accounts.len()
            + rejected_signal(&["account_update", "phone_number_quality_update"]),
        accounts,
        "an account or number signal was neither read nor rejected"
    );
    // A preferences change holds any number of customers' choices: it is read, or rejected.
    assert!(
        rejected_signal(&["user_preferences"]) <= preferences,
        "a preference rejected that was not sent"
    );
    assert_eq!(
        updates.ignored.len(),
        ignored,
        "a change of another field was not listed"
    );
});

/// `value[key]` as a slice; missing → empty (the typed parse defaults it; `null` would not parse).
fn array<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}
