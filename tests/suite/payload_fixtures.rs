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

/// What a generic parser finds in a body: `messages[]` and `statuses[]` of `messages`
/// changes, template changes, the signals' items, and the changes of other fields.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    messages: usize,
    statuses: usize,
    other_fields: usize,
    templates: usize,
    preferences: usize,
    accounts: usize,
}

fn expected_counts(body: &Value) -> Counts {
    let mut counts = Counts::default();
    for entry in body["entry"].as_array().unwrap() {
        for change in entry["changes"].as_array().unwrap() {
            let len = |key: &str| change["value"][key].as_array().map_or(0, Vec::len);
            match change["field"].as_str().unwrap_or_default() {
                "message_template_status_update"
                | "template_category_update"
                | "message_template_quality_update" => counts.templates += 1,
                "user_preferences" => counts.preferences += len("user_preferences"),
                "account_update" | "phone_number_quality_update" => counts.accounts += 1,
                "messages" => {
                    counts.messages += len("messages");
                    counts.statuses += len("statuses");
                }
                _ => counts.other_fields += 1,
            }
        }
    }
    counts
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
            assert!(
                updates.rejected.is_empty(),
                "{}:{name}: {:?}",
                file.display(),
                updates.rejected
            );
            let read = Counts {
                messages: updates.messages.len(),
                statuses: updates.statuses.len(),
                other_fields: updates.ignored.len(),
                templates: updates.templates.len(),
                preferences: updates.preferences.len(),
                accounts: updates.accounts.len(),
            };
            assert_eq!(read, expected_counts(&body), "{}:{name}", file.display());
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

fn fixture(file: &str, name: &str) -> payload::Updates {
    let all: serde_json::Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(format!("tests/fixtures/pywa/updates/{file}.json")).unwrap(),
    )
    .unwrap();
    payload::parse(&serde_json::to_vec(&all[name]).unwrap()).unwrap()
}

/// The signals of the library's payloads, read as Meta means them.
#[test]
fn pywa_signals_are_read_as_meta_means_them() {
    let resume = fixture("user_marketing_preferences", "resume");
    assert_eq!(resume.preferences.len(), 1);
    assert_eq!(resume.preferences[0].wa_id.as_str(), "16505551234");
    assert_eq!(resume.preferences[0].stops(), Some(false));
    assert_eq!(
        resume.preferences[0].at,
        chrono::DateTime::from_timestamp(1731705721, 0)
    );
    assert_eq!(
        fixture("user_marketing_preferences", "signup").preferences[0].stops(),
        Some(false)
    );
    // A category this service does not act on is read, and left.
    let unknown = fixture("user_preferences", "user_preferences");
    assert_eq!(unknown.preferences[0].stops(), None);

    let restriction = fixture("account_update", "account_restriction");
    let signal = &restriction.accounts[0];
    assert_eq!(signal.event, "ACCOUNT_RESTRICTION");
    assert_eq!(signal.key(), "waba:102290129340398");
    assert_eq!(signal.restrictions.len(), 2);
    assert_eq!(
        signal.restrictions[0].kind,
        "RESTRICTED_BIZ_INITIATED_MESSAGING"
    );
    assert_eq!(
        signal.restrictions[0].until,
        chrono::DateTime::from_timestamp(1641330498, 0)
    );
    let tier = fixture("account_update", "pricing_tiering_update");
    assert_eq!(
        tier.accounts[0].detail.as_deref(),
        Some("UTILITY 25000001:50000000 India 2025-11")
    );
    let ban = fixture("account_update", "account_disabled");
    assert_eq!(ban.accounts[0].detail.as_deref(), Some("REINSTATE"));

    let quality = fixture("template_quality_update", "yellow");
    assert_eq!(quality.templates[0].name, "welcome_template");
    assert_eq!(quality.templates[0].language, "en_US");
    assert_eq!(quality.templates[0].quality.as_deref(), Some("YELLOW"));
    assert_eq!(quality.templates[0].event, None);

    let ad = fixture("message", "referral");
    let referral = ad.messages[0].referral.as_ref().unwrap();
    assert_eq!(referral.ctwa_clid.as_deref(), Some("CTWA_CLID"));
    assert_eq!(referral.source_id.as_deref(), Some("ADID"));
    assert_eq!(referral.headline.as_deref(), Some("AD_TITLE"));
    assert_eq!(
        ad.messages[0].content.text().as_deref(),
        Some("BODY"),
        "answered as any text"
    );
    assert!(fixture("message", "text").messages[0].referral.is_none());

    let delivered = fixture("message_status", "delivered");
    let pricing = delivered.statuses[0].pricing.as_ref().unwrap();
    assert!(pricing.billable);
    assert_eq!(pricing.category, "service");
    assert_eq!(pricing.pricing_model, "CBP");
}

/// Payloads written from Meta's reference pages, for what the library's set lacks.
#[test]
fn meta_reference_signals_are_read() {
    let change = |field: &str, value: Value| {
        let body = serde_json::json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "time": 1764700000, "changes": [{"field": field, "value": value}]}],
        });
        payload::parse(&serde_json::to_vec(&body).unwrap()).unwrap()
    };
    // «phone_number_quality_update webhook reference» (Updated May 21, 2026): the newer
    // limit field preferred to `current_limit`, which Meta retires.
    let flagged = change(
        "phone_number_quality_update",
        serde_json::json!({"display_phone_number": "15550783881", "event": "FLAGGED",
            "current_limit": "TIER_1K", "max_daily_conversations_per_business": "TIER_2K"}),
    );
    let signal = &flagged.accounts[0];
    assert_eq!(signal.key(), "15550783881");
    assert_eq!(signal.event, "FLAGGED");
    assert_eq!(signal.messaging_limit.as_deref(), Some("TIER_2K"));
    let upgraded = change(
        "phone_number_quality_update",
        serde_json::json!({"display_phone_number": "15550783881", "event": "UPGRADE",
            "old_limit": "TIER_1K", "current_limit": "TIER_10K"}),
    );
    assert_eq!(
        upgraded.accounts[0].messaging_limit.as_deref(),
        Some("TIER_10K")
    );
    // «user_preferences webhook reference» (Updated May 21, 2026): a stop.
    let stop = change(
        "user_preferences",
        serde_json::json!({"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
            "contacts": [{"wa_id": "16505551234"}],
            "user_preferences": [{"wa_id": "16505551234", "detail": "User requested to stop marketing messages",
                "category": "marketing_messages", "value": "stop", "timestamp": 1731705721}]}),
    );
    assert_eq!(stop.preferences[0].stops(), Some(true));
    // A preference naming no one is kept for operators, not guessed.
    let nobody = change(
        "user_preferences",
        serde_json::json!({"user_preferences": [{"category": "marketing_messages", "value": "stop"}]}),
    );
    assert!(nobody.preferences.is_empty());
    assert_eq!(nobody.rejected.len(), 1);
    assert_eq!(nobody.rejected[0].what, "signal");
}
