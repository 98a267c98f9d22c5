//! Every real payload of `tests/fixtures/pywa/` (146 bodies from a public library's test suite)
//! parses, and every message and status in it is read: none rejected, none missed.

use std::path::{Path, PathBuf};

use serde_json::Value;
use zaguan::webhook::payload;

fn fixture_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            fixture_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

/// Counts of `messages[]` and `statuses[]` in `messages` changes, read with a generic parser.
fn expected_counts(body: &Value) -> (usize, usize, usize, usize) {
    let (mut messages, mut statuses, mut other_fields, mut templates) = (0, 0, 0, 0);
    for entry in body["entry"].as_array().unwrap() {
        for change in entry["changes"].as_array().unwrap() {
            if change["field"] == "message_template_status_update"
                || change["field"] == "template_category_update"
            {
                templates += 1;
                continue;
            }
            if change["field"] != "messages" {
                other_fields += 1;
                continue;
            }
            let len = |key: &str| change["value"][key].as_array().map_or(0, Vec::len);
            messages += len("messages");
            statuses += len("statuses");
        }
    }
    (messages, statuses, other_fields, templates)
}

#[test]
fn every_pywa_payload_is_read_completely() {
    let mut files = Vec::new();
    fixture_files(Path::new("tests/fixtures/pywa"), &mut files);
    files.sort();
    let mut bodies = 0;
    let mut messages_seen = 0;
    for file in files {
        let all: serde_json::Map<String, Value> =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for (name, body) in all {
            let raw = serde_json::to_vec(&body).unwrap();
            let updates =
                payload::parse(&raw).unwrap_or_else(|e| panic!("{}:{name}: {e}", file.display()));
            let (messages, statuses, other_fields, templates) = expected_counts(&body);
            assert_eq!(
                updates.templates.len(),
                templates,
                "{}:{name}",
                file.display()
            );
            assert!(
                updates.rejected.is_empty(),
                "{}:{name}: {:?}",
                file.display(),
                updates.rejected
            );
            assert_eq!(
                updates.messages.len(),
                messages,
                "{}:{name}",
                file.display()
            );
            assert_eq!(
                updates.statuses.len(),
                statuses,
                "{}:{name}",
                file.display()
            );
            assert_eq!(
                updates.ignored.len(),
                other_fields,
                "{}:{name}",
                file.display()
            );
            for message in &updates.messages {
                assert!(!message.phone_number_id.is_empty());
                assert!(!message.kind.is_empty());
            }
            bodies += 1;
            messages_seen += updates.messages.len();
        }
    }
    assert_eq!(bodies, 146, "fixture set changed");
    assert!(messages_seen >= 90, "only {messages_seen} messages read");
}

#[test]
fn pywa_message_types_map_to_content() {
    let all: serde_json::Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/pywa/updates/message.json").unwrap(),
    )
    .unwrap();
    let read = |name: &str| {
        let updates = payload::parse(&serde_json::to_vec(&all[name]).unwrap()).unwrap();
        updates.messages.into_iter().next().unwrap()
    };
    assert_eq!(read("text").content.text().as_deref(), Some("Body Text"));
    assert_eq!(
        read("text").user_id.as_deref(),
        Some("US.13491208655302741918")
    );
    assert!(read("forwarded").context.unwrap().forwarded);
    assert!(read("forwarded_many_times").context.unwrap().forwarded);
    assert_eq!(read("order").kind, "order");
    assert!(matches!(
        read("unsupported").content,
        zaguan::domain::Content::Unsupported { .. }
    ));
    assert!(matches!(
        read("voice").content,
        zaguan::domain::Content::Media {
            kind: zaguan::domain::MediaKind::Voice,
            ..
        }
    ));
}

/// Meta's envelope holds objects: an `entry` or `changes` item that is an array (or any other
/// type) makes the notification unreadable (400, so Meta keeps it), never an empty update.
#[test]
fn entries_and_changes_that_are_not_objects_are_refused() {
    let change = serde_json::json!({"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
        "messages": [{"from": "34600111222", "id": "wamid.X", "timestamp": "1764100800",
                      "type": "text", "text": {"body": "hola"}}],
    }});
    let body = |entry: Value| {
        serde_json::to_vec(
            &serde_json::json!({"object": "whatsapp_business_account", "entry": entry}),
        )
        .unwrap()
    };
    let good = body(serde_json::json!([{"id": "1", "changes": [change.clone()]}]));
    assert_eq!(payload::parse(&good).unwrap().messages.len(), 1);
    for entry in [
        serde_json::json!([[{"id": "1", "changes": [change.clone()]}]]),
        serde_json::json!([{"id": "1", "changes": [[change.clone()]]}]),
        serde_json::json!(["entry"]),
        serde_json::json!([{"id": "1", "changes": [7]}]),
    ] {
        assert!(payload::parse(&body(entry.clone())).is_err(), "{entry}");
    }
}
