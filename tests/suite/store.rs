//! The store suite: the same behaviour from `MemoryStore` and from `MongoStore` over the wire
//! (FerretDB in CI, any MongoDB at `MONGODB_URI`).

use crate::common;

use std::sync::Arc;
use zaguan::domain::{Content, MediaKind};
use zaguan::domain::{MessageRole, OutboxId, PendingAction, Role, ToolCall};

use chrono::{DateTime, TimeZone, Utc};
use zaguan::domain::{GraphError, StatusUpdate, WaId, WaMessageId};
use zaguan::store::*;

/// BSON dates hold milliseconds; test times are whole seconds so both stores compare equal.
fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_764_100_000 + secs, 0).unwrap()
}

fn wa(id: &str) -> WaId {
    WaId::parse(id).unwrap()
}

fn entry(wamid: &str, wa_id: &str, received: i64) -> InboxEntry {
    InboxEntry {
        wamid: WaMessageId::parse(wamid).unwrap(),
        wa_id: wa(wa_id),
        phone_number_id: "109876543210".into(),
        kind: "text".into(),
        text: Some("¿Está libre el piso de Gràcia? 🏡".into()),
        payload: format!(
            r#"{{"from":"{wa_id}","id":"{wamid}","type":"text","text":{{"body":"¿Está libre el piso de Gràcia? 🏡"}},"future":{{"n":[1,2]}}}}"#
        ),
        content: Content::Text {
            body: "¿Está libre el piso de Gràcia? 🏡".into(),
        },
        context_id: Some("wamid.PREVIOUS".into()),
        sent_at: Some(at(-5)),
        status: InboxStatus::Pending,
        received_at: at(received),
        attempts: 0,
    }
}

fn contact(wa_id: &str, name: Option<&str>, seen: i64) -> ContactSeen {
    ContactSeen {
        wa_id: wa(wa_id),
        phone: Some(wa_id.into()),
        user_id: Some("ES.1502576394655843".into()),
        name: name.map(Into::into),
        username: None,
        seen_at: at(seen),
    }
}

fn status(wamid: &str, status: &str) -> StatusUpdate {
    StatusUpdate {
        wamid: WaMessageId::parse(wamid).unwrap(),
        status: status.into(),
        at: Some(at(60)),
        recipient_id: Some("34600111222".into()),
        errors: if status == "failed" {
            vec![GraphError {
                code: Some(131047),
                title: Some("Re-engagement message".into()),
                message: None,
                error_data: None,
            }]
        } else {
            Vec::new()
        },
        callback_data: None,
        pricing: None,
    }
}

async fn ping_answers(store: Arc<dyn Store>) {
    store.ping().await.unwrap();
}

async fn an_inbox_entry_round_trips(store: Arc<dyn Store>) {
    let original = entry("wamid.RT1", "34600111222", 0);
    let outcome = store
        .insert_inbox(std::slice::from_ref(&original))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        InboxInsert {
            inserted: 1,
            duplicates: 0,
            known: Vec::new(),
        }
    );
    let stored = store.inbox_entry(&original.wamid).await.unwrap().unwrap();
    let payload = |e: &InboxEntry| serde_json::from_str::<serde_json::Value>(&e.payload).unwrap();
    assert_eq!(payload(&stored), payload(&original));
    assert_eq!(
        InboxEntry {
            payload: String::new(),
            ..stored
        },
        InboxEntry {
            payload: String::new(),
            ..original
        }
    );
    // What the webhook parsed survives the store as it was: a tapped row, a place, a voice note.
    for (n, content) in [
        Content::ListReply {
            id: "ask:property_assistant:P-1001".into(),
            title: "P-1001 · 245.000 €".into(),
            description: Some("Ruzafa".into()),
        },
        Content::Location {
            latitude: 39.4623,
            longitude: -0.3712,
            name: None,
            address: Some("Calle de Cádiz 20".into()),
            url: None,
        },
        Content::Media {
            kind: MediaKind::Voice,
            id: Some("media-1".into()),
            mime_type: Some("audio/ogg".into()),
            caption: None,
            filename: None,
            animated: false,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let entry = InboxEntry {
            content,
            ..entry(&format!("wamid.RTC{n}"), "34600111222", 0)
        };
        store
            .insert_inbox(std::slice::from_ref(&entry))
            .await
            .unwrap();
        let stored = store.inbox_entry(&entry.wamid).await.unwrap().unwrap();
        assert_eq!(stored.content, entry.content);
    }
    let missing = WaMessageId::parse("wamid.NOPE").unwrap();
    assert!(store.inbox_entry(&missing).await.unwrap().is_none());
}

async fn a_redelivered_message_is_stored_once(store: Arc<dyn Store>) {
    let first = entry("wamid.DUP", "34600111222", 0);
    let mut again = entry("wamid.DUP", "34600111222", 9);
    again.text = Some("changed".into());
    store
        .insert_inbox(std::slice::from_ref(&first))
        .await
        .unwrap();
    let outcome = store.insert_inbox(&[again]).await.unwrap();
    assert_eq!(
        outcome,
        InboxInsert {
            inserted: 0,
            duplicates: 1,
            known: vec![first.wamid.clone()],
        }
    );
    let stored = store.inbox_entry(&first.wamid).await.unwrap().unwrap();
    assert_eq!(stored.text, first.text, "the first copy is kept untouched");
    assert_eq!(store.pending_inbox(10).await.unwrap().len(), 1);
}

async fn concurrent_inserts_of_one_message_store_it_once(store: Arc<dyn Store>) {
    let tasks: Vec<_> = (0..5)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .insert_inbox(&[entry("wamid.RACE", "34600111222", i)])
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut inserted = 0;
    for task in tasks {
        inserted += task.await.unwrap().inserted;
    }
    assert_eq!(inserted, 1);
    assert_eq!(store.pending_inbox(10).await.unwrap().len(), 1);
}

async fn a_batch_with_some_known_ids_inserts_the_rest(store: Arc<dyn Store>) {
    let known: Vec<InboxEntry> = (0..10)
        .map(|i| entry(&format!("wamid.B{i}"), "34600111222", i))
        .collect();
    store.insert_inbox(&known).await.unwrap();
    let batch: Vec<InboxEntry> = (0..1000)
        .map(|i| entry(&format!("wamid.B{i}"), &format!("34600{i:06}"), i))
        .collect();
    let mut outcome = store.insert_inbox(&batch).await.unwrap();
    outcome.known.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let mut known_ids: Vec<WaMessageId> = known.iter().map(|e| e.wamid.clone()).collect();
    known_ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(
        outcome,
        InboxInsert {
            inserted: 990,
            duplicates: 10,
            known: known_ids,
        }
    );
    assert_eq!(store.pending_inbox(5000).await.unwrap().len(), 1000);
}

async fn pending_entries_come_oldest_first(store: Arc<dyn Store>) {
    store
        .insert_inbox(&[
            entry("wamid.P3", "34600111222", 30),
            entry("wamid.P1", "34600111222", 10),
            entry("wamid.P2", "34622333444", 20),
        ])
        .await
        .unwrap();
    let ids: Vec<String> = store
        .pending_inbox(2)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.wamid.to_string())
        .collect();
    assert_eq!(ids, ["wamid.P1", "wamid.P2"]);
}

async fn a_contact_becomes_a_prospect_with_a_conversation(store: Arc<dyn Store>) {
    let key = wa("34600111222");
    assert!(store.user(&key).await.unwrap().is_none());
    store
        .record_contact(&contact("34600111222", Some("Lucía"), 10))
        .await
        .unwrap();
    let user = store.user(&key).await.unwrap().unwrap();
    assert_eq!(user.name.as_deref(), Some("Lucía"));
    assert_eq!(user.role, Role::Prospect);
    let conversation = store.conversation(&key).await.unwrap().unwrap();
    assert!(conversation.dialog_state.is_primary());
    assert_eq!(conversation.phone.as_deref(), Some("34600111222"));
    assert_eq!(conversation.user_id.as_deref(), Some("ES.1502576394655843"));
    assert_eq!(conversation.last_inbound_at, Some(at(10)));

    // A later profile name wins; an update without a name keeps it; an older message does not
    // move the 24-hour window back.
    store
        .record_contact(&contact("34600111222", Some("Lucía Fernández"), 20))
        .await
        .unwrap();
    store
        .record_contact(&contact("34600111222", None, 5))
        .await
        .unwrap();
    let user = store.user(&key).await.unwrap().unwrap();
    assert_eq!(user.name.as_deref(), Some("Lucía Fernández"));
    let conversation = store.conversation(&key).await.unwrap().unwrap();
    assert_eq!(conversation.last_inbound_at, Some(at(20)));
    store.set_user_role(&key, Role::Owner).await.unwrap();
    store
        .record_contact(&contact("34600111222", Some("Lucía F."), 30))
        .await
        .unwrap();
    let user = store.user(&key).await.unwrap().unwrap();
    assert_eq!(user.role, Role::Owner, "a new profile name keeps the role");
}

/// What operators and the health monitor list: filtered, ordered by last activity and paged by
/// the store, whichever order the writes came in.
async fn conversations_are_listed_by_last_activity_a_page_at_a_time(store: Arc<dyn Store>) {
    use zaguan::domain::DialogState;
    let appointment = DialogState::entered("appointment_assistant");
    let seen = |id: &str, secs| ContactSeen {
        user_id: None,
        ..contact(id, None, secs)
    };
    // A: its older message recorded last. B: moved to an assistant after writing.
    store
        .record_contact(&seen("34600000001", 45))
        .await
        .unwrap();
    store.record_contact(&seen("34600000001", 8)).await.unwrap();
    store
        .record_contact(&seen("34600000002", 20))
        .await
        .unwrap();
    store
        .set_dialog_state(&wa("34600000002"), &appointment, at(30))
        .await
        .unwrap();
    // C: never wrote (an outreach); D: asked for a person.
    store
        .set_dialog_state(
            &wa("34600000003"),
            &DialogState::entered("visit_assistant"),
            at(50),
        )
        .await
        .unwrap();
    store
        .record_contact(&seen("34600000004", 60))
        .await
        .unwrap();
    let reason = HandoffReason {
        at: at(61),
        reason: "Quiere hablar con una persona".into(),
        key: String::new(),
    };
    store
        .request_handoff(&wa("34600000004"), &reason, None)
        .await
        .unwrap();
    // E: a turn that began before its latest message was recorded.
    store
        .record_contact(&seen("34600000005", 70))
        .await
        .unwrap();
    store
        .set_dialog_state(&wa("34600000005"), &appointment, at(25))
        .await
        .unwrap();

    // `updated_at` only rises, so it is each one's last activity.
    for (id, last) in [("34600000001", 45), ("34600000005", 70)] {
        let c = store.conversation(&wa(id)).await.unwrap().unwrap();
        assert_eq!(
            (c.updated_at, c.last_activity()),
            (Some(at(last)), Some(at(last)))
        );
    }

    let list = |query: ConversationQuery| {
        let store = store.clone();
        async move {
            let listed = store.list_conversations(&query).await.unwrap();
            listed
                .into_iter()
                .map(|c| c.wa_id.as_str()[8..].to_owned())
                .collect::<Vec<_>>()
        }
    };
    let all = ConversationQuery {
        limit: 10,
        ..ConversationQuery::default()
    };
    assert_eq!(list(all.clone()).await, ["002", "001", "003", "004", "005"]);
    let page = ConversationQuery {
        skip: 1,
        limit: 2,
        ..all.clone()
    };
    assert_eq!(list(page).await, ["001", "003"]);
    let idle = ConversationQuery {
        idle_since: Some(at(45)),
        ..all.clone()
    };
    assert_eq!(list(idle.clone()).await, ["002", "001"]);
    // The monitor's stuck conversations: the limit counts only those in an assistant.
    let stuck = ConversationQuery {
        idle_since: Some(at(100)),
        in_assistant: true,
        limit: 2,
        ..all.clone()
    };
    assert_eq!(list(stuck).await, ["002", "003"]);
    let requested = ConversationQuery {
        handoff: Some(HandoffFilter::Requested),
        ..all.clone()
    };
    assert_eq!(list(requested).await, ["004"]);
    let in_appointments = ConversationQuery {
        agent: Some("appointment_assistant".into()),
        ..all.clone()
    };
    assert_eq!(list(in_appointments).await, ["002", "005"]);
    let none = ConversationQuery { limit: 0, ..all };
    assert_eq!(list(none).await, Vec::<String>::new());
}

/// The handoff escalation's due notices: due from their time, until the last one is sent or a
/// person takes the conversation.
async fn handoff_notices_are_due_until_all_are_told_or_one_takes_it(store: Arc<dyn Store>) {
    let (first, second) = (wa("34600000011"), wa("34600000012"));
    let reason = |secs| HandoffReason {
        at: at(secs),
        reason: "Quiere hablar con una persona".into(),
        key: String::new(),
    };
    store
        .request_handoff(&first, &reason(0), Some(at(100)))
        .await
        .unwrap();
    store
        .request_handoff(&second, &reason(1), Some(at(150)))
        .await
        .unwrap();
    let due = |secs| {
        let store = store.clone();
        async move {
            let due = store.due_handoffs(at(secs), 10).await.unwrap();
            due.into_iter()
                .map(|(wa_id, _)| wa_id.as_str()[9..].to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(due(99).await, Vec::<String>::new());
    assert_eq!(due(200).await, ["11", "12"]);
    let step = |level, next: Option<i64>| HandoffStep {
        level,
        told: vec!["lucia".into()],
        failed: Vec::new(),
        next_notice_at: next.map(at),
    };
    assert!(
        store
            .advance_handoff(&first, at(0), 0, &step(1, Some(300)))
            .await
            .unwrap()
    );
    assert_eq!(due(200).await, ["12"]);
    assert_eq!(due(300).await, ["12", "11"]);
    // A notice refused at 250 makes the request due at once, with the failure kept.
    let refused = zaguan::store::NoticeFailure {
        member: wa("34699000001"),
        reason: "WhatsApp refused it (131026: Message undeliverable)".into(),
        at: at(250),
    };
    assert!(store.handoff_notice_failed(&first, &refused).await.unwrap());
    assert_eq!(due(250).await, ["12", "11"]);
    let request = store
        .conversation(&first)
        .await
        .unwrap()
        .unwrap()
        .handoff_requested
        .unwrap();
    assert_eq!(request.failures, std::slice::from_ref(&refused));
    assert!(request.failed_for(&wa("34699000001")));
    assert_eq!(request.notified, ["lucia"]);
    assert!(
        !store
            .handoff_notice_failed(&wa("34600000099"), &refused)
            .await
            .unwrap(),
        "no request, nothing recorded"
    );
    // A step's own failures are kept with it.
    let skipped = HandoffStep {
        failed: vec![zaguan::store::NoticeFailure {
            member: wa("34699000002"),
            reason: "not sent".into(),
            at: at(260),
        }],
        ..step(1, Some(300))
    };
    assert!(
        store
            .advance_handoff(&first, at(0), 1, &skipped)
            .await
            .unwrap()
    );
    let request = store
        .conversation(&first)
        .await
        .unwrap()
        .unwrap()
        .handoff_requested
        .unwrap();
    assert_eq!(request.failures.len(), 2);
    assert!(request.failed_for(&wa("34699000002")));
    assert!(
        store
            .advance_handoff(&first, at(0), 1, &step(2, None))
            .await
            .unwrap()
    );
    assert!(
        !store
            .advance_handoff(&first, at(0), 1, &step(2, None))
            .await
            .unwrap(),
        "a step already recorded by another instance"
    );
    let taken = zaguan::domain::Handoff {
        operator: "marta".into(),
        since: at(310),
        until: at(4000),
    };
    assert!(store.set_handoff(&second, Some(&taken)).await.unwrap());
    assert_eq!(due(1000).await, Vec::<String>::new());

    // The person's handoff is active until it ends or is released.
    let active = |secs| {
        let store = store.clone();
        async move {
            let query = ConversationQuery {
                handoff: Some(HandoffFilter::ActiveAt(at(secs))),
                limit: 10,
                ..ConversationQuery::default()
            };
            let listed = store.list_conversations(&query).await.unwrap();
            listed
                .into_iter()
                .map(|c| c.wa_id.as_str()[9..].to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(active(400).await, ["12"]);
    assert_eq!(active(5000).await, Vec::<String>::new());
    assert!(store.set_handoff(&second, None).await.unwrap());
    assert_eq!(active(400).await, Vec::<String>::new());
}

async fn messages_get_increasing_seq_per_conversation(store: Arc<dyn Store>) {
    let message = |wa_id: &str, role: MessageRole, content: &str, seconds: i64| NewMessage {
        wa_id: wa(wa_id),
        role,
        content: content.into(),
        agent: Some("primary_assistant".into()),
        tool_calls: Vec::new(),
        tool_call_id: None,
        wamids: Vec::new(),
        attachments: Vec::new(),
        at: at(seconds),
    };
    let mut ai = message("34600111222", MessageRole::Ai, "", 2);
    ai.tool_calls = vec![ToolCall {
        id: "call_01".into(),
        name: "ToAppointmentAssistant".into(),
        args: serde_json::json!({"query": "visitar el ático el sábado"}).into(),
    }];
    let mut human = message("34600111222", MessageRole::Human, "hola", 1);
    human.wamids = vec![WaMessageId::parse("wamid.H1").unwrap()];
    let mut tool = message("34600111222", MessageRole::Tool, "entered", 3);
    tool.tool_call_id = Some("call_01".into());

    let seqs = [
        store.append_message(human.clone()).await.unwrap().seq,
        store.append_message(ai.clone()).await.unwrap().seq,
        store
            .append_message(message("34622333444", MessageRole::Human, "otra", 1))
            .await
            .unwrap()
            .seq,
        store.append_message(tool.clone()).await.unwrap().seq,
    ];
    assert!(seqs[0] < seqs[1] && seqs[1] < seqs[3], "{seqs:?}");

    let recent = store.recent_messages(&wa("34600111222"), 2).await.unwrap();
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0].message, ai, "oldest of the window first");
    assert_eq!(recent[1].message, tool);
    let all = store.recent_messages(&wa("34600111222"), 50).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].message, human, "wamids round-trip");
    assert!(
        store
            .recent_messages(&wa("34699999999"), 50)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn statuses_move_an_outbox_entry_forward_only(store: Arc<dyn Store>) {
    let id = store
        .insert_outbox(&[NewOutbox::text(
            wa("34600111222"),
            Some(WaMessageId::parse("wamid.IN1").unwrap()),
            "¡Claro! Te reservo el sábado a las 10:00.",
            at(50),
        )])
        .await
        .unwrap()
        .remove(0);
    let wamid = WaMessageId::parse("wamid.OUT1").unwrap();
    assert_eq!(
        store
            .apply_status(&status("wamid.OUT1", "delivered"))
            .await
            .unwrap(),
        StatusOutcome::Unknown,
        "not sent yet, so the wamid is not ours"
    );
    store.mark_outbox_sent(&id, &wamid).await.unwrap();
    let sent = store.outbox_by_wamid(&wamid).await.unwrap().unwrap();
    assert_eq!(sent.status, OutboxStatus::Sent);
    assert_eq!(sent.id, id);
    assert_eq!(sent.body, "¡Claro! Te reservo el sábado a las 10:00.");
    assert_eq!(sent.in_reply_to.unwrap().as_str(), "wamid.IN1");
    assert_eq!(sent.attempts, 0, "attempts are counted by `Sending`");

    let apply = |s: &'static str| {
        let store = store.clone();
        async move { store.apply_status(&status("wamid.OUT1", s)).await.unwrap() }
    };
    assert_eq!(apply("read").await, StatusOutcome::Applied);
    assert_eq!(
        apply("delivered").await,
        StatusOutcome::Stale,
        "read before delivered"
    );
    assert_eq!(apply("failed").await, StatusOutcome::Stale, "it was read");
    assert_eq!(apply("played").await, StatusOutcome::Applied);
    assert_eq!(apply("deleted").await, StatusOutcome::Unrecognised);
    let entry = store.outbox_by_wamid(&wamid).await.unwrap().unwrap();
    assert_eq!(entry.status, OutboxStatus::Played);
    assert_eq!(entry.status_at, Some(at(60)));
}

async fn a_failed_status_records_the_graph_error(store: Arc<dyn Store>) {
    let id = store
        .insert_outbox(&[NewOutbox::text(wa("34600111222"), None, "Hola", at(50))])
        .await
        .unwrap()
        .remove(0);
    let wamid = WaMessageId::parse("wamid.OUT2").unwrap();
    store.mark_outbox_sent(&id, &wamid).await.unwrap();
    assert_eq!(
        store
            .apply_status(&status("wamid.OUT2", "failed"))
            .await
            .unwrap(),
        StatusOutcome::Applied
    );
    let entry = store.outbox_by_wamid(&wamid).await.unwrap().unwrap();
    assert_eq!(entry.status, OutboxStatus::Failed);
    assert_eq!(entry.error.unwrap().code, Some(131047));
}

/// A part whose wamid was never recorded (its sender died after the Graph API's answer) is
/// found by the callback data it was sent with; a status naming a part that already has its
/// wamid, or no part of ours, changes nothing.
async fn a_status_finds_an_unrecorded_part_by_its_callback_data(store: Arc<dyn Store>) {
    let ids = store
        .insert_outbox(&[
            NewOutbox::text(wa("34600111222"), None, "uno", at(50)),
            NewOutbox::text(wa("34600111222"), None, "dos", at(51)),
        ])
        .await
        .unwrap();
    let sending = sending(52);
    assert!(store.update_outbox(&ids[0], &sending).await.unwrap());
    let named = |wamid: &str, status_: &str, data: Option<String>| StatusUpdate {
        callback_data: data,
        ..status(wamid, status_)
    };
    assert_eq!(
        store
            .apply_status(&named("wamid.X", "sent", Some("zaguan:outbox:zzz".into())))
            .await
            .unwrap(),
        StatusOutcome::Unknown,
        "not one of our ids"
    );
    assert_eq!(
        store
            .apply_status(&named("wamid.A", "delivered", Some(ids[0].callback_data())))
            .await
            .unwrap(),
        StatusOutcome::Reconciled
    );
    let entry = store
        .outbox_by_wamid(&WaMessageId::parse("wamid.A").unwrap())
        .await
        .unwrap()
        .expect("found by the wamid the status carried");
    assert_eq!(entry.id, ids[0]);
    assert_eq!(entry.status, OutboxStatus::Delivered);
    assert_eq!(entry.sending_at, Some(at(52)));
    assert!(store.unsent_outbox(&wa("34600111222")).await.unwrap().len() == 1);
    // Later statuses find it by its wamid.
    assert_eq!(
        store
            .apply_status(&named("wamid.A", "read", Some(ids[0].callback_data())))
            .await
            .unwrap(),
        StatusOutcome::Applied
    );
    // Another wamid naming the same part does not take it over.
    assert_eq!(
        store
            .apply_status(&named("wamid.B", "sent", Some(ids[0].callback_data())))
            .await
            .unwrap(),
        StatusOutcome::Unknown
    );
    // Nor does a `sending` apply to a part a status confirmed.
    assert!(!store.update_outbox(&ids[0], &sending).await.unwrap());
}

/// `sending` at `t`, to be sent again at `t + 30` unless confirmed.
fn sending(t: i64) -> OutboxUpdate {
    OutboxUpdate::Sending {
        at: at(t),
        resend_at: at(t + 30),
    }
}

/// A part `sending` is not due while its status may still confirm it, and due once the grace
/// has run out without one.
async fn a_part_sending_is_due_again_only_when_its_grace_ends(store: Arc<dyn Store>) {
    let id = store
        .insert_outbox(&[NewOutbox::text(wa("34600111222"), None, "uno", at(5))])
        .await
        .unwrap()
        .remove(0);
    assert!(store.update_outbox(&id, &sending(10)).await.unwrap());
    for (now, due) in [(20, false), (39, false), (40, true)] {
        let listed = store
            .conversations_with_unsent_outbox(at(now), 10)
            .await
            .unwrap();
        assert_eq!(!listed.is_empty(), due, "at {now}");
    }
    let entry = &store.unsent_outbox(&wa("34600111222")).await.unwrap()[0];
    assert_eq!(entry.sending_at, Some(at(10)));
    assert_eq!(entry.next_attempt_at, Some(at(40)));
}

async fn rejected_updates_are_kept_for_operators(store: Arc<dyn Store>) {
    for i in 0..3 {
        store
            .record_rejected(&RejectedEntry {
                what: "message".into(),
                reason: format!("reason {i}"),
                raw: format!("{{\"id\":{i}}}"),
                at: at(i),
            })
            .await
            .unwrap();
    }
    let kept = store.rejected(2).await.unwrap();
    let reasons: Vec<&str> = kept.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons, ["reason 1", "reason 2"]);
    assert_eq!(kept[1].raw, "{\"id\":2}");
    assert_eq!(kept[1].at, at(2));
}

async fn an_outbox_id_that_does_not_exist_is_an_error(store: Arc<dyn Store>) {
    let wamid = WaMessageId::parse("wamid.X").unwrap();
    let missing = OutboxId(bson::oid::ObjectId::new().to_hex());
    assert!(store.mark_outbox_sent(&missing, &wamid).await.is_err());
}

async fn a_lease_is_held_by_one_owner_until_it_expires(store: Arc<dyn Store>) {
    let key = wa("34600111222");
    assert!(
        store
            .claim_conversation(&key, "a", at(0), at(30), &[])
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_conversation(&key, "a", at(10), at(40), &[])
            .await
            .unwrap(),
        "renewal"
    );
    assert!(
        !store
            .claim_conversation(&key, "b", at(20), at(50), &[])
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_conversation(&key, "b", at(40), at(70), &[])
            .await
            .unwrap(),
        "expired"
    );
    assert!(
        !store
            .claim_conversation(&key, "a", at(41), at(71), &[])
            .await
            .unwrap()
    );
    store.release_conversation(&key, "a").await.unwrap(); // not a's: no effect
    assert!(
        !store
            .claim_conversation(&key, "c", at(42), at(72), &[])
            .await
            .unwrap()
    );
    store.release_conversation(&key, "b").await.unwrap();
    assert!(
        store
            .claim_conversation(&key, "c", at(43), at(73), &[])
            .await
            .unwrap()
    );
}

async fn concurrent_claims_give_the_lease_to_exactly_one(store: Arc<dyn Store>) {
    let key = wa("34699000111");
    let claims: Vec<_> = (0..8)
        .map(|i| {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move {
                store
                    .claim_conversation(&key, &format!("worker-{i}"), at(0), at(30), &[])
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut winners = 0;
    for claim in claims {
        winners += usize::from(claim.await.unwrap());
    }
    assert_eq!(winners, 1);
}

async fn open_inbox_entries_are_found_per_conversation_and_closed(store: Arc<dyn Store>) {
    store
        .insert_inbox(&[
            entry("wamid.O2", "34600111222", 20),
            entry("wamid.O1", "34600111222", 10),
            entry("wamid.O3", "34622333444", 5),
        ])
        .await
        .unwrap();
    let keys = store.conversations_with_open_inbox(10).await.unwrap();
    assert_eq!(keys, [wa("34622333444"), wa("34600111222")]);
    // Held by an instance of an older version until `at(60)`.
    assert!(
        store
            .claim_conversation(
                &wa("34600111222"),
                "old",
                at(0),
                at(60),
                &["old".to_owned()]
            )
            .await
            .unwrap()
    );
    let open = store.open_inbox(&wa("34600111222")).await.unwrap();
    let ids: Vec<&str> = open.iter().map(|e| e.wamid.as_str()).collect();
    assert_eq!(ids, ["wamid.O1", "wamid.O2"]);

    let o1 = WaMessageId::parse("wamid.O1").unwrap();
    store
        .set_inbox_status(std::slice::from_ref(&o1), InboxStatus::Processing)
        .await
        .unwrap();
    let taken = store.inbox_entry(&o1).await.unwrap().unwrap();
    assert_eq!((taken.status, taken.attempts), (InboxStatus::Processing, 1));
    // `processing` is an older version's: whoever takes the conversation over reads it.
    assert!(
        store
            .claim_conversation(
                &wa("34600111222"),
                "me",
                at(120),
                at(180),
                &["me".to_owned()]
            )
            .await
            .unwrap()
    );
    assert_eq!(store.open_inbox(&wa("34600111222")).await.unwrap().len(), 2);
    let o2 = WaMessageId::parse("wamid.O2").unwrap();
    store
        .set_inbox_status(&[o1, o2], InboxStatus::Done)
        .await
        .unwrap();
    assert!(
        store
            .open_inbox(&wa("34600111222"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.conversations_with_open_inbox(10).await.unwrap(),
        [wa("34622333444")]
    );
}

async fn dialog_state_is_persisted_with_its_entry_time(store: Arc<dyn Store>) {
    let key = wa("34600111222");
    let state = zaguan::domain::DialogState::entered("appointment_assistant");
    store.set_dialog_state(&key, &state, at(5)).await.unwrap();
    let conversation = store.conversation(&key).await.unwrap().unwrap();
    assert_eq!(conversation.dialog_state, state);
    assert_eq!(conversation.state_entered_at, Some(at(5)));
    store
        .set_dialog_state(&key, &zaguan::domain::DialogState::primary(), at(9))
        .await
        .unwrap();
    let conversation = store.conversation(&key).await.unwrap().unwrap();
    assert!(conversation.dialog_state.is_primary());
}

async fn replies_are_found_by_the_message_they_answer(store: Arc<dyn Store>) {
    let inbound = WaMessageId::parse("wamid.Q").unwrap();
    for body in ["uno", "dos"] {
        store
            .insert_outbox(&[NewOutbox::text(
                wa("34600111222"),
                Some(inbound.clone()),
                body,
                at(1),
            )])
            .await
            .unwrap()
            .remove(0);
    }
    let replies = store.outbox_in_reply_to(&inbound).await.unwrap();
    let bodies: Vec<&str> = replies.iter().map(|r| r.body.as_str()).collect();
    assert_eq!(bodies, ["uno", "dos"]);
    let other = WaMessageId::parse("wamid.R").unwrap();
    assert!(store.outbox_in_reply_to(&other).await.unwrap().is_empty());
}

async fn llm_calls_are_kept_per_conversation_newest_last(store: Arc<dyn Store>) {
    use std::time::Duration;
    use zaguan::domain::{CallOutcome, LlmCall};
    let call = |conversation: Option<&str>, secs: i64, outcome: CallOutcome| LlmCall {
        conversation: conversation.map(str::to_owned),
        agent: "primary_assistant".into(),
        provider: "openai".into(),
        model: "gpt-4.1-mini".into(),
        outcome,
        input_tokens: 1_850,
        output_tokens: 31,
        latency: Duration::from_millis(912),
        error: (outcome != CallOutcome::Ok).then(|| "HTTP 503: overloaded".to_owned()),
        at: at(secs),
    };
    let calls = [
        call(Some("34600000001"), 1, CallOutcome::Unavailable),
        call(Some("34600000001"), 2, CallOutcome::Ok),
        call(Some("34600000002"), 3, CallOutcome::Ok),
        call(None, 4, CallOutcome::Timeout),
        call(Some("34600000001"), 5, CallOutcome::Empty),
    ];
    store.insert_llm_calls(&calls).await.unwrap();
    store.insert_llm_calls(&[]).await.unwrap();
    let first = store.llm_calls("34600000001", 10).await.unwrap();
    assert_eq!(
        first,
        [calls[0].clone(), calls[1].clone(), calls[4].clone()]
    );
    let last_two = store.llm_calls("34600000001", 2).await.unwrap();
    assert_eq!(last_two, [calls[1].clone(), calls[4].clone()]);
    assert!(store.llm_calls("34600000009", 10).await.unwrap().is_empty());
}

async fn the_sender_walks_a_part_through_its_states(store: Arc<dyn Store>) {
    use zaguan::domain::GraphError;
    let conversation = wa("34600111222");
    let parts: Vec<NewOutbox> = (0..3)
        .map(|i| NewOutbox {
            phone_number_id: Some("109876543210".into()),
            buttons: if i == 2 {
                vec![
                    ReplyButton::new("confirm:a1", "Sí"),
                    ReplyButton::new("cancel:a1", "No"),
                ]
            } else {
                Vec::new()
            },
            part: i,
            parts: 3,
            ..NewOutbox::text(
                conversation.clone(),
                Some(WaMessageId::parse("wamid.IN9").unwrap()),
                format!("parte {i}"),
                at(10),
            )
        })
        .collect();
    let ids = store.insert_outbox(&parts).await.unwrap();
    let other = store
        .insert_outbox(&[NewOutbox::text(wa("34600999888"), None, "otra", at(5))])
        .await
        .unwrap();
    let unsent = store.unsent_outbox(&conversation).await.unwrap();
    assert_eq!(unsent.iter().map(|e| e.part).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(
        unsent[2].buttons,
        [
            ReplyButton::new("confirm:a1", "Sí"),
            ReplyButton::new("cancel:a1", "No")
        ]
    );
    assert_eq!(unsent[0].phone_number_id.as_deref(), Some("109876543210"));
    assert_eq!(
        store
            .conversations_with_unsent_outbox(at(20), 10)
            .await
            .unwrap(),
        [wa("34600999888"), conversation.clone()],
        "oldest first"
    );

    // Part 0: sending, then sent.
    store.update_outbox(&ids[0], &sending(10)).await.unwrap();
    let first = &store.unsent_outbox(&conversation).await.unwrap()[0];
    assert_eq!((first.status, first.attempts), (OutboxStatus::Sending, 1));
    let wamid = WaMessageId::parse("wamid.OUT9").unwrap();
    store
        .update_outbox(
            &ids[0],
            &OutboxUpdate::Sent {
                wamid: Some(wamid.clone()),
            },
        )
        .await
        .unwrap();
    // Part 1: a retry later; not due now, so the conversation is not listed for it.
    let error = GraphError {
        code: Some(131056),
        title: None,
        message: Some("pair rate limit".into()),
        error_data: None,
    };
    store.update_outbox(&ids[1], &sending(10)).await.unwrap();
    store
        .update_outbox(
            &ids[1],
            &OutboxUpdate::Retry {
                at: at(100),
                error: Some(error.clone()),
            },
        )
        .await
        .unwrap();
    // Part 2: refused for good.
    store
        .update_outbox(
            &ids[2],
            &OutboxUpdate::Failed {
                error: error.clone(),
            },
        )
        .await
        .unwrap();
    store
        .update_outbox(&other[0], &OutboxUpdate::Sent { wamid: None })
        .await
        .unwrap();
    assert!(
        store
            .conversations_with_unsent_outbox(at(50), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .conversations_with_unsent_outbox(at(100), 10)
            .await
            .unwrap(),
        std::slice::from_ref(&conversation)
    );
    let unsent = store.unsent_outbox(&conversation).await.unwrap();
    assert_eq!(unsent.len(), 1);
    assert_eq!(
        (
            unsent[0].part,
            unsent[0].status,
            unsent[0].attempts,
            unsent[0].next_attempt_at
        ),
        (1, OutboxStatus::Queued, 1, Some(at(100)))
    );
    assert_eq!(unsent[0].error, Some(error));
    let replies = store
        .outbox_in_reply_to(&WaMessageId::parse("wamid.IN9").unwrap())
        .await
        .unwrap();
    assert_eq!(
        replies.iter().map(|e| e.status).collect::<Vec<_>>(),
        [
            OutboxStatus::Sent,
            OutboxStatus::Queued,
            OutboxStatus::Failed
        ]
    );
    // A sent part is never taken back by a late `Sending` or `Retry`.
    store.update_outbox(&ids[0], &sending(10)).await.unwrap();
    let sent = store.outbox_by_wamid(&wamid).await.unwrap().unwrap();
    assert_eq!((sent.status, sent.attempts), (OutboxStatus::Sent, 1));
    let missing = OutboxId("5f0000000000000000000000".into());
    assert!(store.update_outbox(&missing, &sending(10)).await.is_err());
}

async fn the_backlog_and_the_leases_are_counted(store: Arc<dyn Store>) {
    assert_eq!(
        store.inbox_backlog().await.unwrap(),
        InboxBacklog::default()
    );
    store
        .insert_inbox(&[
            entry("wamid.B1", "34600111222", 10),
            entry("wamid.B2", "34600111222", 20),
            entry("wamid.B3", "34600333444", 30),
        ])
        .await
        .unwrap();
    store
        .set_inbox_status(
            &[WaMessageId::parse("wamid.B1").unwrap()],
            InboxStatus::Failed,
        )
        .await
        .unwrap();
    // Left `processing` by an older version: open too, and here the oldest open.
    store
        .set_inbox_status(
            &[WaMessageId::parse("wamid.B2").unwrap()],
            InboxStatus::Processing,
        )
        .await
        .unwrap();
    let backlog = store.inbox_backlog().await.unwrap();
    assert_eq!(
        (backlog.open, backlog.failed, backlog.oldest_received_at),
        (2, 1, Some(at(20)))
    );
    assert_eq!(
        store.conversations_with_open_inbox(10).await.unwrap(),
        [wa("34600111222"), wa("34600333444")],
        "oldest open first, whatever its status"
    );
    assert_eq!(store.active_leases(at(100), &[]).await.unwrap(), 0);
    assert!(
        store
            .claim_conversation(&wa("34600111222"), "a", at(100), at(400), &[])
            .await
            .unwrap()
    );
    assert_eq!(store.active_leases(at(200), &[]).await.unwrap(), 1);
    assert_eq!(
        store.active_leases(at(500), &[]).await.unwrap(),
        0,
        "expired"
    );
}

/// Meta's status of a reply part arrives before its sender recorded the part (it records a
/// reply once sent): the status is kept under the part's id, and the record completes it
/// without moving its status back.
async fn an_early_status_is_completed_by_the_record_of_its_part(store: Arc<dyn Store>) {
    let inbound = WaMessageId::parse("wamid.IN.EARLY").unwrap();
    let part = NewOutbox::text(wa("34600111222"), Some(inbound.clone()), "Hola", at(10));
    let mut parts = reply_parts(&[part], at(9));
    let status = StatusUpdate {
        wamid: WaMessageId::parse("wamid.OUT.EARLY").unwrap(),
        status: "delivered".into(),
        at: Some(at(11)),
        recipient_id: Some("34600111222".into()),
        errors: Vec::new(),
        callback_data: Some(parts[0].id.callback_data()),
        pricing: None,
    };
    assert_eq!(
        store.apply_status(&status).await.unwrap(),
        StatusOutcome::Early
    );
    parts[0].status = OutboxStatus::Sent;
    parts[0].wamid = Some(status.wamid.clone());
    parts[0].attempts = 1;
    store.record_reply(&parts).await.unwrap();
    let stored = store.outbox_in_reply_to(&inbound).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].body, "Hola");
    assert_eq!(stored[0].status, OutboxStatus::Delivered, "not moved back");
    assert_eq!(stored[0].wamid, Some(status.wamid.clone()));
    assert!(
        store
            .unsent_outbox(&wa("34600111222"))
            .await
            .unwrap()
            .is_empty()
    );
    // A later status lands on it as on any part.
    let read = StatusUpdate {
        status: "read".into(),
        ..status
    };
    assert_eq!(
        store.apply_status(&read).await.unwrap(),
        StatusOutcome::Applied
    );
}

/// A reply recorded, then recorded again (its turn resumed after a crash that came after the
/// record): one record, as the first left it.
async fn a_reply_recorded_twice_is_recorded_once(store: Arc<dyn Store>) {
    let inbound = WaMessageId::parse("wamid.IN.TWICE").unwrap();
    let parts: Vec<NewOutbox> = (0..2)
        .map(|i| NewOutbox {
            part: i,
            parts: 2,
            ..NewOutbox::text(
                wa("34600111222"),
                Some(inbound.clone()),
                format!("parte {i}"),
                at(10),
            )
        })
        .collect();
    let mut sent = reply_parts(&parts, at(9));
    for (i, part) in sent.iter_mut().enumerate() {
        part.status = OutboxStatus::Sent;
        part.wamid = Some(WaMessageId::parse(&format!("wamid.OUT.TWICE.{i}")).unwrap());
    }
    store.record_reply(&sent).await.unwrap();
    let mut again = reply_parts(&parts, at(9));
    assert_eq!(again[0].id, sent[0].id, "the same ids every time");
    for part in &mut again {
        part.status = OutboxStatus::Sending;
        part.next_attempt_at = Some(at(40));
    }
    store.record_reply(&again).await.unwrap();
    let stored = store.outbox_in_reply_to(&inbound).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|p| p.status == OutboxStatus::Sent));
    assert_eq!(
        stored[1].wamid.as_ref().map(|w| w.as_str()),
        Some("wamid.OUT.TWICE.1")
    );
}

/// A reply part recorded once sent (the turn's own send) is found by its wamid: a status
/// Meta posts for it later applies.
async fn a_status_finds_a_part_recorded_as_sent(store: Arc<dyn Store>) {
    let inbound = WaMessageId::parse("wamid.IN.RECORDED").unwrap();
    let part = NewOutbox::text(wa("34600111222"), Some(inbound.clone()), "Hola", at(10));
    let mut sent = reply_parts(&[part], at(9));
    sent[0].status = OutboxStatus::Sent;
    sent[0].wamid = Some(WaMessageId::parse("wamid.OUT.RECORDED").unwrap());
    store.record_reply(&sent).await.unwrap();
    let delivered = StatusUpdate {
        wamid: WaMessageId::parse("wamid.OUT.RECORDED").unwrap(),
        status: "delivered".into(),
        at: Some(at(11)),
        recipient_id: Some("34600111222".into()),
        errors: Vec::new(),
        callback_data: None,
        pricing: None,
    };
    assert_eq!(
        store.apply_status(&delivered).await.unwrap(),
        StatusOutcome::Applied
    );
    let found = store
        .outbox_by_wamid(&delivered.wamid)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.status, OutboxStatus::Delivered);
}

fn portal_lead(
    portal_id: &str,
    who: Option<&str>,
    received: chrono::DateTime<chrono::Utc>,
) -> zaguan::store::PortalLead {
    let mut lead = zaguan::store::PortalLead {
        id: String::new(),
        source: "idealista".into(),
        portal_lead_id: Some(portal_id.into()),
        name: Some("Marta Giménez".into()),
        phone: who.map(str::to_owned),
        wa_id: who.map(wa),
        email: Some("marta@example.com".into()),
        listing_ref: Some("P-1001".into()),
        listing_id: Some("P-1001".into()),
        message: Some("¿Sigue disponible?".into()),
        lang: Some("es".into()),
        received_at: received,
        stored_at: received,
        status: zaguan::store::LeadStatus::New,
        why: None,
        first_contact_at: None,
        answered_at: None,
        raw_email: None,
    };
    lead.id = lead.derived_id();
    lead
}

/// A lead pushed twice is stored once; the first writer moves it on, the second finds it
/// moved; lists are newest first and filter by status and contact.
async fn a_lead_is_stored_once_and_moved_on_by_one_writer(store: Arc<dyn Store>) {
    use zaguan::store::{LeadFilter, LeadStatus};
    let first = portal_lead("98765", Some("34612345678"), at(10));
    let (stored, new) = store.insert_lead(&first).await.unwrap();
    assert!(new);
    assert_eq!(stored, first);
    let mut again = first.clone();
    again.message = Some("otra vez".into());
    let (stored, new) = store.insert_lead(&again).await.unwrap();
    assert!(!new, "the same portal id is the same lead");
    assert_eq!(stored.message.as_deref(), Some("¿Sigue disponible?"));
    // Without a portal id: the number, the listing and the day.
    let mut no_id = portal_lead("x", Some("34612345678"), at(20));
    no_id.portal_lead_id = None;
    no_id.id = no_id.derived_id();
    assert_ne!(no_id.id, first.id);
    assert!(store.insert_lead(&no_id).await.unwrap().1);
    let mut contacted = first.clone();
    contacted.status = LeadStatus::Contacted;
    contacted.first_contact_at = Some(at(11));
    assert!(
        store
            .update_lead(&contacted, LeadStatus::New)
            .await
            .unwrap()
    );
    assert!(
        !store
            .update_lead(&contacted, LeadStatus::New)
            .await
            .unwrap(),
        "the second writer finds it moved"
    );
    assert_eq!(
        store.lead(&first.id).await.unwrap(),
        Some(contacted.clone())
    );
    let listed = store
        .leads(&LeadFilter {
            limit: 10,
            ..LeadFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|l| l.id.clone()).collect::<Vec<_>>(),
        [no_id.id.clone(), first.id.clone()],
        "newest received first"
    );
    let oldest = store
        .leads(&LeadFilter {
            limit: 1,
            oldest_first: true,
            ..LeadFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        oldest[0].id, first.id,
        "an export's pages read the oldest first"
    );
    let new_ones = store
        .leads(&LeadFilter {
            status: Some(LeadStatus::New),
            wa_id: Some(wa("34612345678")),
            since: Some(at(15)),
            limit: 10,
            oldest_first: false,
        })
        .await
        .unwrap();
    assert_eq!(new_ones.len(), 1);
    assert_eq!(new_ones[0].id, no_id.id);
}

/// Everything about one contact goes; the other contact's data stays whole and usable.
async fn forgetting_a_contact_deletes_all_of_theirs_and_nothing_else(store: Arc<dyn Store>) {
    let (gone, kept) = ("34600111222", "34622333444");
    for (n, who) in [gone, kept].into_iter().enumerate() {
        store
            .insert_lead(&portal_lead(&format!("ID-{n}"), Some(who), at(2)))
            .await
            .unwrap();
        let lead = zaguan::store::BusinessEvent::LeadCreated {
            name: Some("Lucía".into()),
            assistant: "primary_assistant".into(),
        };
        store
            .insert_events(&[zaguan::store::Event::new(&wa(who), lead, at(3))])
            .await
            .unwrap();
        store
            .record_contact(&contact(who, Some("Lucía"), 10))
            .await
            .unwrap();
        store
            .insert_inbox(&[
                entry(&format!("wamid.F{n}a"), who, 1),
                entry(&format!("wamid.F{n}b"), who, 2),
            ])
            .await
            .unwrap();
        store
            .append_message(NewMessage {
                wa_id: wa(who),
                role: MessageRole::Human,
                content: "hola".into(),
                agent: None,
                tool_calls: Vec::new(),
                tool_call_id: None,
                wamids: vec![WaMessageId::parse(&format!("wamid.F{n}a")).unwrap()],
                attachments: Vec::new(),
                at: at(3),
            })
            .await
            .unwrap();
        let ids = store
            .insert_outbox(&[
                NewOutbox::text(
                    wa(who),
                    Some(WaMessageId::parse(&format!("wamid.F{n}a")).unwrap()),
                    "hola",
                    at(4),
                ),
                NewOutbox::text(wa(who), None, "más", at(5)),
            ])
            .await
            .unwrap();
        store
            .mark_outbox_sent(
                &ids[0],
                &WaMessageId::parse(&format!("wamid.OUT{n}")).unwrap(),
            )
            .await
            .unwrap();
        store
            .insert_llm_calls(&[zaguan::domain::LlmCall {
                conversation: Some(who.into()),
                agent: "primary_assistant".into(),
                provider: "openai".into(),
                model: "gpt-4.1-mini".into(),
                outcome: zaguan::domain::CallOutcome::Ok,
                input_tokens: 100,
                output_tokens: 20,
                latency: std::time::Duration::from_millis(300),
                error: None,
                at: at(6),
            }])
            .await
            .unwrap();
        store
            .record_rejected(&RejectedEntry {
                what: "message".into(),
                reason: "unknown type".into(),
                raw: format!(r#"{{"from":"{who}","type":"hologram"}}"#),
                at: at(7),
            })
            .await
            .unwrap();
        assert!(
            store
                .claim_conversation(&wa(who), "w1", at(8), at(100), &[])
                .await
                .unwrap()
        );
    }
    let counts = store.forget(&wa(gone)).await.unwrap();
    assert_eq!(
        counts,
        ForgetCounts {
            conversations: 1,
            users: 1,
            messages: 1,
            inbox: 2,
            outbox: 2,
            llm_calls: 1,
            leases: 1,
            webhook_rejects: 1,
            events: 1,
            leads: 1,
        }
    );
    let leads = store
        .leads(&zaguan::store::LeadFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(leads.len(), 1, "the other contact's lead stays");
    assert_eq!(leads[0].wa_id, Some(wa(kept)));
    let left = store
        .list_events(&zaguan::store::EventQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "the other contact's event stays");
    assert_eq!(left[0].wa_id, wa(kept));
    assert!(store.user(&wa(gone)).await.unwrap().is_none());
    assert!(store.conversation(&wa(gone)).await.unwrap().is_none());
    assert!(
        store
            .recent_messages(&wa(gone), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.open_inbox(&wa(gone)).await.unwrap().is_empty());
    assert!(
        store
            .inbox_entry(&WaMessageId::parse("wamid.F0a").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.unsent_outbox(&wa(gone)).await.unwrap().is_empty());
    assert!(
        store
            .outbox_by_wamid(&WaMessageId::parse("wamid.OUT0").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.llm_calls(gone, 10).await.unwrap().is_empty());
    assert!(
        store
            .rejected(10)
            .await
            .unwrap()
            .iter()
            .all(|r| !r.raw.contains(gone))
    );
    assert!(
        !store
            .conversations_with_open_inbox(10)
            .await
            .unwrap()
            .contains(&wa(gone))
    );
    // Forgetting again finds nothing.
    assert_eq!(
        store.forget(&wa(gone)).await.unwrap(),
        ForgetCounts::default()
    );

    // The other contact is untouched, and its outbox indexes still work.
    assert!(store.user(&wa(kept)).await.unwrap().is_some());
    assert_eq!(store.open_inbox(&wa(kept)).await.unwrap().len(), 2);
    assert_eq!(store.recent_messages(&wa(kept), 10).await.unwrap().len(), 1);
    let reply = store
        .outbox_in_reply_to(&WaMessageId::parse("wamid.F1a").unwrap())
        .await
        .unwrap();
    assert_eq!(reply.len(), 1);
    assert_eq!(reply[0].body, "hola");
    assert!(
        store
            .outbox_by_wamid(&WaMessageId::parse("wamid.OUT1").unwrap())
            .await
            .unwrap()
            .is_some()
    );
    let unsent = store.unsent_outbox(&wa(kept)).await.unwrap();
    assert_eq!(unsent.len(), 1);
    assert_eq!(unsent[0].body, "más");
    assert_eq!(store.llm_calls(kept, 10).await.unwrap().len(), 1);
    assert_eq!(store.rejected(10).await.unwrap().len(), 1);
    assert!(
        !store
            .claim_conversation(&wa(kept), "w2", at(9), at(100), &[])
            .await
            .unwrap(),
        "lease kept"
    );
}

/// What Meta signals, through the webhook's own parse and store: a marketing stop kept and a
/// resume older than it ignored, the first ad referral kept and a later one not, a status's
/// pricing on its part (a late `sent` after `delivered` too), and a restriction and a flag
/// folded into the account's and number's standing.
async fn metas_signals_are_kept_on_the_contact_the_part_and_the_account(store: Arc<dyn Store>) {
    use serde_json::json;
    use zaguan::webhook::{RecentContacts, payload, store_updates};
    let customer = "34611000777";
    let change = |field: &str, value: serde_json::Value| {
        serde_json::to_vec(&json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"field": field, "value": value}]}],
        }))
        .unwrap()
    };
    let apply = |body: Vec<u8>| {
        let store = store.clone();
        async move {
            let updates = payload::parse(&body).unwrap();
            assert!(updates.rejected.is_empty(), "{:?}", updates.rejected);
            store_updates(store.as_ref(), &RecentContacts::new(), &updates, at(1000))
                .await
                .unwrap()
        }
    };
    let preference = |value: &str, ts: i64| {
        change(
            "user_preferences",
            json!({
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "34910000000", "phone_number_id": "1065"},
                "contacts": [{"wa_id": customer}],
                "user_preferences": [{"wa_id": customer, "detail": "User requested", "category": "marketing_messages", "value": value, "timestamp": at(ts).timestamp()}],
            }),
        )
    };
    apply(preference("stop", 200)).await;
    let user = store.user(&wa(customer)).await.unwrap().unwrap();
    assert_eq!(user.marketing_opted_out_at, Some(at(200)));
    // A resume made before the stop, delivered after it: the stop stands.
    apply(preference("resume", 150)).await;
    let user = store.user(&wa(customer)).await.unwrap().unwrap();
    assert_eq!(user.marketing_opted_out_at, Some(at(200)));
    apply(preference("resume", 300)).await;
    let user = store.user(&wa(customer)).await.unwrap().unwrap();
    assert_eq!(user.marketing_opted_out_at, None);
    assert!(user.opted_out_at.is_none(), "a marketing stop is not BAJA");

    let from_ad = |wamid: &str, clid: &str| {
        change(
            "messages",
            json!({
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "34910000000", "phone_number_id": "1065"},
                "contacts": [{"profile": {"name": "Inés"}, "wa_id": customer}],
                "messages": [{"from": customer, "id": wamid, "timestamp": at(400).timestamp().to_string(), "type": "text", "text": {"body": "Hola, vi el anuncio"},
                    "referral": {"source_url": "https://fb.me/ad1", "source_id": "120210000001", "source_type": "ad", "headline": "Ático en Chamberí", "body": "3 dormitorios", "media_type": "image", "ctwa_clid": clid}}],
            }),
        )
    };
    let stored = apply(from_ad("wamid.AD1", "ARAkLkA8r")).await;
    assert_eq!(stored.messages.len(), 1, "answered as usual");
    apply(from_ad("wamid.AD2", "ARAkOther")).await;
    let user = store.user(&wa(customer)).await.unwrap().unwrap();
    let referral = user.referral.clone().expect("the first referral");
    assert_eq!(referral.ctwa_clid.as_deref(), Some("ARAkLkA8r"));
    assert_eq!(referral.headline.as_deref(), Some("Ático en Chamberí"));
    assert_eq!(user.referral_at, Some(at(400)));
    assert_eq!(user.source(), zaguan::store::AD_SOURCE);

    let ids = store
        .insert_outbox(&[NewOutbox::text(wa(customer), None, "hola", at(500))])
        .await
        .unwrap();
    store
        .update_outbox(
            &ids[0],
            &OutboxUpdate::Sent {
                wamid: Some(WaMessageId::parse("wamid.PRICED").unwrap()),
            },
        )
        .await
        .unwrap();
    let priced = |status: &str| {
        change(
            "messages",
            json!({
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "34910000000", "phone_number_id": "1065"},
                "statuses": [{"id": "wamid.PRICED", "status": status, "timestamp": at(510).timestamp().to_string(), "recipient_id": customer,
                    "pricing": {"billable": true, "pricing_model": "PMP", "category": "service"}}],
            }),
        )
    };
    apply(priced("delivered")).await;
    apply(priced("sent")).await;
    let part = store.outbox_entry(&ids[0]).await.unwrap().unwrap();
    let pricing = part.pricing.expect("outbox.pricing");
    assert!(pricing.billable);
    assert_eq!(pricing.category, "service");
    assert_eq!(pricing.pricing_model, "PMP");

    apply(change(
        "account_update",
        json!({"event": "ACCOUNT_RESTRICTION", "restriction_info": [{"restriction_type": "RESTRICTED_BIZ_INITIATED_MESSAGING", "expiration": at(5000).timestamp()}]}),
    ))
    .await;
    apply(change(
        "phone_number_quality_update",
        json!({"display_phone_number": "34910000000", "event": "FLAGGED", "current_limit": "TIER_1K"}),
    ))
    .await;
    let mut standing = store.account_health().await.unwrap();
    standing.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(standing.len(), 2, "{standing:?}");
    assert_eq!(standing[0].key, "34910000000");
    assert!(standing[0].flagged);
    assert_eq!(standing[0].messaging_limit.as_deref(), Some("TIER_1K"));
    assert_eq!(standing[1].key, "waba:102290129340398");
    assert_eq!(
        standing[1].restrictions[0].until,
        Some(at(5000)),
        "{standing:?}"
    );
    assert!(standing[1].holds_marketing(at(1000)).is_some());
    assert!(standing[1].holds_marketing(at(6000)).is_none(), "expired");
    // Lifted: an empty restriction list, and the flag cleared.
    apply(change(
        "account_update",
        json!({"event": "ACCOUNT_RESTRICTION", "restriction_info": []}),
    ))
    .await;
    apply(change(
        "phone_number_quality_update",
        json!({"display_phone_number": "34910000000", "event": "UNFLAGGED", "current_limit": "TIER_1K"}),
    ))
    .await;
    let standing = store.account_health().await.unwrap();
    assert!(
        standing
            .iter()
            .all(|h| h.holds_marketing(at(1000)).is_none()),
        "{standing:?}"
    );
}

crate::both_stores!(
    ping_answers,
    metas_signals_are_kept_on_the_contact_the_part_and_the_account,
    an_early_status_is_completed_by_the_record_of_its_part,
    a_reply_recorded_twice_is_recorded_once,
    a_status_finds_a_part_recorded_as_sent,
    forgetting_a_contact_deletes_all_of_theirs_and_nothing_else,
    a_lead_is_stored_once_and_moved_on_by_one_writer,
    an_inbox_entry_round_trips,
    a_redelivered_message_is_stored_once,
    concurrent_inserts_of_one_message_store_it_once,
    a_batch_with_some_known_ids_inserts_the_rest,
    pending_entries_come_oldest_first,
    a_contact_becomes_a_prospect_with_a_conversation,
    conversations_are_listed_by_last_activity_a_page_at_a_time,
    handoff_notices_are_due_until_all_are_told_or_one_takes_it,
    messages_get_increasing_seq_per_conversation,
    statuses_move_an_outbox_entry_forward_only,
    a_failed_status_records_the_graph_error,
    a_status_finds_an_unrecorded_part_by_its_callback_data,
    a_part_sending_is_due_again_only_when_its_grace_ends,
    rejected_updates_are_kept_for_operators,
    an_outbox_id_that_does_not_exist_is_an_error,
    a_lease_is_held_by_one_owner_until_it_expires,
    concurrent_claims_give_the_lease_to_exactly_one,
    open_inbox_entries_are_found_per_conversation_and_closed,
    dialog_state_is_persisted_with_its_entry_time,
    replies_are_found_by_the_message_they_answer,
    llm_calls_are_kept_per_conversation_newest_last,
    the_sender_walks_a_part_through_its_states,
    the_backlog_and_the_leases_are_counted,
    a_pending_action_comes_back_with_its_id,
    operators_see_a_conversations_lease_and_the_inbox_by_outcome,
    a_staff_pager_sends_at_most_one_message_per_quiet_time,
);

/// A staff member's pager: the first page may go at once, the ones within the quiet time wait
/// and go together; a claimed batch is claimed by one caller, and one left by a crash comes
/// back; a page paged twice is kept once, and a page paged again after it went is not sent again.
async fn a_staff_pager_sends_at_most_one_message_per_quiet_time(store: Arc<dyn Store>) {
    use zaguan::store::Page;
    let member = wa("34699000001");
    let quiet = chrono::Duration::seconds(120);
    let page = |n: u32, secs: i64| Page {
        key: format!("handoff:{n}"),
        customer: wa(&format!("3461100000{n}")),
        label: format!("Cliente {n} (+3461100000{n})"),
        reason: "Quiere hablar con una persona".into(),
        text: format!("🔔 Un cliente quiere hablar con una persona\nCliente: {n}"),
        link: format!("https://zaguan.example/console/conversations/3461100000{n}"),
        staff_id: "A-01".into(),
        phone_number_id: Some("PN-1".into()),
        at: at(secs),
    };
    assert_eq!(
        store.claim_pages(&member, at(0), quiet).await.unwrap(),
        None
    );
    assert!(store.due_pagers(at(0), quiet, 10).await.unwrap().is_empty());
    store.page(&member, &page(1, 0)).await.unwrap();
    store.page(&member, &page(1, 0)).await.unwrap();
    assert_eq!(
        store.due_pagers(at(0), quiet, 10).await.unwrap(),
        std::slice::from_ref(&member)
    );
    let first = store
        .claim_pages(&member, at(1), quiet)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.pages, [page(1, 0)], "one page, kept once");
    // Claimed and not sent (a crash): it comes back, whatever the time.
    let again = store
        .claim_pages(&member, at(2), quiet)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.at.timestamp_millis(), first.at.timestamp_millis());
    assert_eq!(again.pages, first.pages);
    store.pages_sent(&member, &first).await.unwrap();
    // Written again once sent (a step replayed by another instance, an escalation pass racing
    // the turn): it was sent, and is not sent again.
    store.page(&member, &page(1, 0)).await.unwrap();
    assert!(store.due_pagers(at(3), quiet, 10).await.unwrap().is_empty());
    // Within the quiet time, pages wait.
    store.page(&member, &page(2, 10)).await.unwrap();
    store.page(&member, &page(3, 20)).await.unwrap();
    assert_eq!(
        store.claim_pages(&member, at(60), quiet).await.unwrap(),
        None
    );
    assert!(
        store
            .due_pagers(at(60), quiet, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.due_pagers(at(121), quiet, 10).await.unwrap(),
        std::slice::from_ref(&member)
    );
    let digest = store
        .claim_pages(&member, at(121), quiet)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(digest.pages, [page(2, 10), page(3, 20)]);
    assert_eq!(
        store
            .claim_pages(&member, at(121), quiet)
            .await
            .unwrap()
            .map(|b| b.at),
        Some(digest.at),
        "the same batch, not a second one"
    );
    // A page that came after the claim stays for the next message.
    store.page(&member, &page(4, 125)).await.unwrap();
    store.pages_sent(&member, &digest).await.unwrap();
    assert!(
        store
            .due_pagers(at(200), quiet, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.due_pagers(at(242), quiet, 10).await.unwrap(),
        std::slice::from_ref(&member)
    );
    let last = store
        .claim_pages(&member, at(242), quiet)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last.pages, [page(4, 125)]);
    store.pages_sent(&member, &last).await.unwrap();

    // Forty customers at once, from many workers: every page is kept; then five instances
    // claim at the same moment, and all of them get the one batch with all forty.
    let other = wa("34699000002");
    let writes: Vec<_> = (0..40)
        .map(|n| {
            let store = store.clone();
            let other = other.clone();
            let page = Page {
                key: format!("burst:{n}"),
                ..page(1, 300)
            };
            tokio::spawn(async move { store.page(&other, &page).await.unwrap() })
        })
        .collect();
    for write in writes {
        write.await.unwrap();
    }
    let claims: Vec<_> = (0..5)
        .map(|_| {
            let store = store.clone();
            let other = other.clone();
            tokio::spawn(async move { store.claim_pages(&other, at(301), quiet).await.unwrap() })
        })
        .collect();
    let mut batches = Vec::new();
    for claim in claims {
        batches.push(claim.await.unwrap().expect("the batch"));
    }
    assert!(batches.iter().all(|b| b.at == batches[0].at), "one claim");
    assert!(
        batches.iter().all(|b| b.pages.len() == 40),
        "with every page"
    );
}

/// What the console shows: who serves a conversation until when, and the inbox of a period by
/// outcome.
async fn operators_see_a_conversations_lease_and_the_inbox_by_outcome(store: Arc<dyn Store>) {
    assert_eq!(store.lease_of(&wa("34600111222")).await.unwrap(), None);
    assert!(
        store
            .claim_conversation(&wa("34600111222"), "zaguan-7f3", at(0), at(30), &[])
            .await
            .unwrap()
    );
    let lease = store.lease_of(&wa("34600111222")).await.unwrap().unwrap();
    assert_eq!(
        (lease.owner.as_str(), lease.until, lease.released),
        ("zaguan-7f3", at(30), false)
    );
    store
        .release_conversation(&wa("34600111222"), "zaguan-7f3")
        .await
        .unwrap();
    assert!(
        store
            .lease_of(&wa("34600111222"))
            .await
            .unwrap()
            .unwrap()
            .released
    );

    store
        .insert_inbox(&[
            entry("wamid.O1", "34600111222", -7200),
            entry("wamid.O2", "34600111222", 10),
            entry("wamid.O3", "34600111222", 20),
            entry("wamid.O4", "34622333444", 30),
        ])
        .await
        .unwrap();
    for (wamid, status) in [
        ("wamid.O1", InboxStatus::Done),
        ("wamid.O2", InboxStatus::Done),
        ("wamid.O3", InboxStatus::Failed),
    ] {
        store
            .set_inbox_status(&[WaMessageId::parse(wamid).unwrap()], status)
            .await
            .unwrap();
    }
    let outcomes = store.inbox_outcomes_since(at(-3600)).await.unwrap();
    assert_eq!(
        (outcomes.answered, outcomes.failed, outcomes.open),
        (1, 1, 1),
        "the older answered one is outside the hour"
    );
}

#[tokio::test]
async fn an_unreachable_mongodb_is_reported_as_unavailable() {
    let store = common::unreachable_mongo().await;
    assert!(matches!(
        store.ping().await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store
            .insert_inbox(&[entry("wamid.U", "34600111222", 0)])
            .await,
        Err(StoreError::Unavailable(_))
    ));
}

/// A confirmation waits with the id its buttons carry, and comes back with it.
async fn a_pending_action_comes_back_with_its_id(store: Arc<dyn Store>) {
    let wa_id = wa("34600111777");
    let action = PendingAction {
        id: "a1b2c3d4e5f6".into(),
        tool: "book_appointment".into(),
        args: serde_json::json!({"slot_id": "S-1"}),
        summary: "Visita el lunes a las 10:00".into(),
        agent: "appointment_assistant".into(),
        created_at: at(0),
    };
    store
        .set_pending_action(&wa_id, Some(&action))
        .await
        .unwrap();
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(conversation.pending_action, Some(action));
    store.set_pending_action(&wa_id, None).await.unwrap();
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(conversation.pending_action, None);
}

/// Buttons written before they had ids (titles only) read back as `btn_<i>`, which the engine
/// treats as stale; an action written before ids reads back with an empty one.
#[tokio::test]
async fn buttons_and_actions_written_before_ids_still_read() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let database = db.store.database();
    database
        .collection::<bson::Document>("outbox")
        .insert_one(
            bson::doc! {"wa_id": "34600111778", "body": "¿Confirmo la visita?",
            "buttons": ["Confirmar", "Cancelar"], "status": "queued", "part": 0, "parts": 1,
            "attempts": 0, "at": bson::DateTime::now()},
        )
        .await
        .unwrap();
    database
        .collection::<bson::Document>("conversations")
        .insert_one(bson::doc! {"_id": "34600111778", "dialog_state": [],
        "pending_action": {"tool": "book_appointment", "args": {"slot_id": "S-1"},
            "summary": "Visita", "agent": "appointment_assistant",
            "created_at": bson::DateTime::now()}})
        .await
        .unwrap();
    let wa_id = wa("34600111778");
    let unsent = db.store.unsent_outbox(&wa_id).await.unwrap();
    assert_eq!(
        unsent[0].buttons,
        [
            ReplyButton::new("btn_0", "Confirmar"),
            ReplyButton::new("btn_1", "Cancelar")
        ]
    );
    let conversation = db.store.conversation(&wa_id).await.unwrap().unwrap();
    let action = conversation.pending_action.unwrap();
    assert_eq!(
        (action.id.as_str(), action.tool.as_str()),
        ("", "book_appointment")
    );
    db.drop().await;
}

#[tokio::test]
async fn a_status_lands_on_an_outbox_document_written_by_hand() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    // As an operator or another system would write it with mongosh: no status, no attempts.
    db.store
        .database()
        .collection::<bson::Document>("outbox")
        .insert_one(bson::doc! {"wa_id": "34600111222", "body": "hola", "wamid": "wamid.HAND"})
        .await
        .unwrap();
    let outcome = db
        .store
        .apply_status(&status("wamid.HAND", "delivered"))
        .await
        .unwrap();
    assert_eq!(outcome, StatusOutcome::Applied);
    let wamid = WaMessageId::parse("wamid.HAND").unwrap();
    let entry = db.store.outbox_by_wamid(&wamid).await.unwrap().unwrap();
    assert_eq!(entry.status, OutboxStatus::Delivered);
    db.drop().await;
}

/// What the workers' concurrency follows: a database answering every call 300 ms late shows
/// as calls in flight for that long before any has finished, then as a mean of 300 ms; a fast
/// one as a mean well under the strained mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_pressure_shows_calls_in_flight_and_their_mean_time() {
    use common::proxy::Mode;
    use std::time::Duration;

    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let (proxy, store) = db.behind_proxy().await;
    let missing = WaMessageId::parse("wamid.NOT_THERE").unwrap();
    store.pressure(); // what connecting asked
    store.inbox_entry(&missing).await.unwrap();
    let fast = store.pressure().unwrap();
    assert_eq!(fast.calls, 1);
    assert!(fast.mean < STRAINED_MEAN / 2, "{fast:?}");
    assert_eq!(fast.in_flight, 0);

    proxy.set(Mode::Slow(Duration::from_millis(300)));
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (store, missing) = (store.clone(), missing.clone());
            tokio::spawn(async move { store.inbox_entry(&missing).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = store.pressure().unwrap();
    assert_eq!(waiting.calls, 0, "{waiting:?}");
    assert_eq!(waiting.in_flight, 4, "{waiting:?}");
    assert!(
        waiting.in_flight_age >= Duration::from_millis(150),
        "{waiting:?}"
    );
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let slow = store.pressure().unwrap();
    assert_eq!((slow.calls, slow.in_flight), (4, 0), "{slow:?}");
    assert!(slow.mean >= Duration::from_millis(290), "{slow:?}");
    assert_eq!(slow.in_flight_age, Duration::ZERO);
    proxy.set(Mode::Pass);
    db.drop().await;
}

/// The wedge of a slow database: a burst of calls far beyond the client's connections while
/// every answer is slow, then the database is fast again. The client must serve again within
/// seconds — before the fix, calls that gave up left their places in the driver's wait queue,
/// which serves one place per event, and every later call waited behind them until it gave up
/// too: the process never recovered without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_slow_database_never_wedges_the_client() {
    use common::proxy::Mode;
    use std::time::{Duration, Instant};

    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let (proxy, store) = db.behind_proxy().await;
    store.ping().await.unwrap();
    let missing = WaMessageId::parse("wamid.NOT_THERE").unwrap();

    // Slow answers, and a burst of 600 reads at once.
    proxy.set(Mode::Slow(Duration::from_millis(300)));
    let burst: Vec<_> = (0..600)
        .map(|_| {
            let (store, missing) = (store.clone(), missing.clone());
            tokio::spawn(async move { store.inbox_entry(&missing).await })
        })
        .collect();
    let mut unexpected = 0;
    for call in burst {
        // Unavailable is allowed while the database is slow; anything else is not.
        if let Err(StoreError::Unexpected(error)) = call.await.unwrap() {
            eprintln!("{error:#}");
            unexpected += 1;
        }
    }
    assert_eq!(unexpected, 0);

    // The database is fast again: within 10 s, calls answer.
    proxy.set(Mode::Pass);
    let recovered = Instant::now();
    loop {
        let answered = tokio::time::timeout(Duration::from_secs(2), async {
            store.ping().await?;
            store.inbox_entry(&missing).await
        })
        .await;
        if let Ok(Ok(None)) = answered {
            break;
        }
        assert!(
            recovered.elapsed() < Duration::from_secs(10),
            "the client still does not answer {:?} after the database recovered: {answered:?}",
            recovered.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    db.drop().await;
}

/// A client whose connections went dead while the database still answers (half-open sockets
/// after a failover, with no timeout to notice them): its calls hang, a fresh client's are
/// answered. The doctor rebuilds the client in place, the store answers again without a
/// restart, and the process stays healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_client_stuck_on_dead_connections_is_rebuilt_without_a_restart() {
    use common::proxy::{Mode, MongoProxy};
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    use zaguan::health::{DoctorSettings, StoreDoctor};

    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let upstream = MongoProxy::host_of(&std::env::var("MONGODB_URI").unwrap());
    let proxy = MongoProxy::start(upstream).await;
    // No socket timeout and a monitor that looks once a minute: the driver cannot tell a
    // dead connection from a slow one by itself. A pool it keeps full, so no call gets a
    // new connection past the dead ones.
    let pool =
        MongoPool::connect(
            &zaguan::store::pool::MongoConfig {
                uri: secrecy::SecretString::from(proxy.uri(
                    "connectTimeoutMS=0&heartbeatFrequencyMS=60000&maxPoolSize=3&minPoolSize=3",
                )),
                database: db.store.database().name().to_owned(),
            },
            None,
        )
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(MongoStore::over(pool.clone()));
    store.ping().await.unwrap();
    // The pool fills itself in the background.
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.set(Mode::FreezeExisting);
    let stuck = tokio::time::timeout(Duration::from_secs(8), store.ping()).await;
    assert!(
        !matches!(stuck, Ok(Ok(()))),
        "the frozen client should not answer"
    );
    assert!(pool.fresh_client_answers(Duration::from_secs(2)).await);

    let state = zaguan::app::AppState::new(store.clone(), None, None);
    let doctor = StoreDoctor::new(
        pool.clone(),
        <zaguan::health::HealthState as axum::extract::FromRef<_>>::from_ref(&state),
    )
    .with_settings(DoctorSettings {
        every: Duration::from_millis(200),
        ping_timeout: Duration::from_millis(500),
        stuck_after: Duration::from_secs(2),
    })
    .spawn();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !matches!(
        tokio::time::timeout(Duration::from_secs(1), store.ping()).await,
        Ok(Ok(()))
    ) {
        assert!(Instant::now() < deadline, "the client was not mended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pool.rebuilds(), 1);
    assert!(state.healthy.load(Ordering::SeqCst));
    // A real call works too, on the rebuilt client.
    store.inbox_backlog().await.unwrap();
    doctor.abort();
    proxy.set(Mode::Pass);
    db.drop().await;
}

/// Whatever write first creates a conversation creates it with `dialog_state: []`, so an
/// operator's `{dialog_state: []}` finds every conversation with the primary assistant (on
/// FerretDB a conversation created by another upsert used to have no field at all).
/// A `dialog_state` of several names (a hand edit in mongosh, or a version before the type
/// allowed one at most) reads as its last name, as the seed's `dialog_state[-1]`; the next
/// write stores one.
#[tokio::test]
async fn mongo_a_dialog_state_of_several_names_reads_as_its_last() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = &db.store;
    let key = wa("34600999200");
    store.set_conversation_lang(&key, "es").await.unwrap();
    store
        .database()
        .collection::<bson::Document>("conversations")
        .update_one(
            bson::doc! {"_id": key.as_str()},
            bson::doc! {"$set": {"dialog_state": ["property_assistant", "appointment_assistant"]}},
        )
        .await
        .unwrap();
    let conversation = store.conversation(&key).await.unwrap().unwrap();
    assert_eq!(
        conversation.dialog_state.current(),
        Some("appointment_assistant")
    );
    store
        .set_dialog_state(&key, &conversation.dialog_state, at(1))
        .await
        .unwrap();
    let stored = store
        .database()
        .collection::<bson::Document>("conversations")
        .find_one(bson::doc! {"_id": key.as_str()})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.get_array("dialog_state").unwrap(),
        &vec![bson::Bson::String("appointment_assistant".into())]
    );
    db.drop().await;
}

#[tokio::test]
async fn mongo_every_new_conversation_has_an_empty_dialog_state() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = &db.store;
    let ids: Vec<WaId> = (0..9).map(|i| wa(&format!("3460099900{i}"))).collect();
    store
        .record_contact(&contact(ids[0].as_str(), Some("Ana"), 0))
        .await
        .unwrap();
    store.set_conversation_lang(&ids[1], "es").await.unwrap();
    let action = PendingAction {
        id: "a1b2c3".into(),
        tool: "book_appointment".into(),
        args: serde_json::json!({"slot_id": "S-1"}),
        summary: "Visita el lunes".into(),
        agent: "appointment_assistant".into(),
        created_at: at(0),
    };
    store
        .set_pending_action(&ids[2], Some(&action))
        .await
        .unwrap();
    store
        .set_conversation_location(
            &ids[3],
            zaguan::domain::GeoPoint {
                lat: 40.4,
                lon: -3.7,
            },
        )
        .await
        .unwrap();
    store
        .request_handoff(
            &ids[4],
            &HandoffReason {
                at: at(0),
                reason: "quiere hablar con alguien".into(),
                key: "call_1".into(),
            },
            None,
        )
        .await
        .unwrap();
    store.set_user_role(&ids[5], Role::Owner).await.unwrap();
    store.note_history_written(&ids[6], at(0)).await.unwrap();
    assert!(
        store
            .claim_conversation(&ids[7], "w1", at(0), at(30), &[])
            .await
            .unwrap()
    );
    // Two writers at once on a conversation nobody wrote before.
    let seen = contact(ids[8].as_str(), None, 0);
    let (contact_seen, lang) = tokio::join!(
        store.record_contact(&seen),
        store.set_conversation_lang(&ids[8], "en"),
    );
    contact_seen.unwrap();
    lang.unwrap();
    let conversations = store
        .database()
        .collection::<bson::Document>("conversations");
    let with_primary = conversations
        .count_documents(bson::doc! {"dialog_state": []})
        .await
        .unwrap();
    assert_eq!(with_primary, 9);
    db.drop().await;
}

/// A conversation's turns read its pending entries by equality (what FerretDB can hand to its
/// database); an entry an older version left `processing` is pending again once the
/// conversation is taken over, so its new holder's next turn reads it.
#[tokio::test]
async fn an_entry_left_processing_by_an_older_version_is_served_again() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let wa_id = wa("34600111779");
    // An instance of an older version held the conversation, then went away.
    let long_ago = Utc::now() - chrono::Duration::minutes(5);
    assert!(
        db.store
            .claim_conversation(&wa_id, "old", long_ago, long_ago, &["old".to_owned()])
            .await
            .unwrap()
    );
    let entry = common::inbox_entry("wamid.OLDPROC", &wa_id, "Hola", InboxStatus::Pending);
    db.store
        .insert_inbox(std::slice::from_ref(&entry))
        .await
        .unwrap();
    db.store
        .database()
        .collection::<bson::Document>("inbox")
        .update_one(
            bson::doc! {"_id": "wamid.OLDPROC"},
            bson::doc! {"$set": {"status": "processing"}},
        )
        .await
        .unwrap();
    assert!(db.store.open_inbox(&wa_id).await.unwrap().is_empty());
    assert!(
        db.store
            .claim_conversation(&wa_id, "me", Utc::now(), Utc::now(), &["me".to_owned()])
            .await
            .unwrap()
    );
    let open = db.store.open_inbox(&wa_id).await.unwrap();
    assert_eq!(open.len(), 1, "pending again once claimed");
    assert_eq!(open[0].wamid, entry.wamid);
    assert_eq!(open[0].status, InboxStatus::Pending);
    db.drop().await;
}

/// A conversation an older version wrote may have `updated_at` before `last_inbound_at` (it set
/// the former from each message as it came); it is idle only once both are old enough.
#[tokio::test]
async fn a_conversation_written_by_an_older_version_is_idle_by_its_latest_message() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    db.store
        .database()
        .collection::<bson::Document>("conversations")
        .insert_one(bson::doc! {
            "_id": "34600111780",
            "wa_id": "34600111780",
            "dialog_state": ["appointment_assistant"],
            "updated_at": bson::DateTime::from_chrono(at(10)),
            "last_inbound_at": bson::DateTime::from_chrono(at(60)),
        })
        .await
        .unwrap();
    let stuck = |since| ConversationQuery {
        idle_since: Some(since),
        in_assistant: true,
        limit: 10,
        ..ConversationQuery::default()
    };
    let listed = db.store.list_conversations(&stuck(at(30))).await.unwrap();
    assert!(listed.is_empty(), "it wrote at 60: {listed:?}");
    let listed = db.store.list_conversations(&stuck(at(60))).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].last_activity(), Some(at(60)));
    db.drop().await;
}

/// A handoff an older version wrote lacks the mark the escalation and the lists now ask for by
/// equality; starting the service adds it, so the customer is still escalated and listed.
#[tokio::test]
async fn a_handoff_written_by_an_older_version_is_still_escalated_and_listed() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let conversations = db
        .store
        .database()
        .collection::<bson::Document>("conversations");
    conversations
        .insert_one(bson::doc! {
            "_id": "34600111781",
            "dialog_state": [],
            "handoff_requested": {
                "at": bson::DateTime::from_chrono(at(0)),
                "reason": "Quiere una persona",
                "level": 0,
                "next_notice_at": bson::DateTime::from_chrono(at(50)),
            },
        })
        .await
        .unwrap();
    let handed = wa("34600111782");
    conversations
        .insert_one(bson::doc! {
            "_id": handed.as_str(),
            "dialog_state": [],
            "handoff": {
                "operator": "lucia",
                "since": bson::DateTime::from_chrono(at(0)),
                "until": bson::DateTime::from_chrono(at(4000)),
            },
        })
        .await
        .unwrap();
    let active = ConversationQuery {
        handoff: Some(HandoffFilter::ActiveAt(at(60))),
        limit: 10,
        ..ConversationQuery::default()
    };
    assert!(db.store.due_handoffs(at(60), 10).await.unwrap().is_empty());
    assert!(
        db.store
            .list_conversations(&active)
            .await
            .unwrap()
            .is_empty()
    );
    db.store.ensure_indexes().await.unwrap();
    assert_eq!(db.store.list_conversations(&active).await.unwrap().len(), 1);
    let due = db.store.due_handoffs(at(60), 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].1.next_notice_at, Some(at(50)));
    let waiting = ConversationQuery {
        handoff: Some(HandoffFilter::Requested),
        limit: 10,
        ..ConversationQuery::default()
    };
    assert_eq!(
        db.store.list_conversations(&waiting).await.unwrap().len(),
        1
    );

    // Taken by a person, it is no longer marked as waiting.
    let taken = zaguan::domain::Handoff {
        operator: "marta".into(),
        since: at(70),
        until: at(4000),
    };
    let key = wa("34600111781");
    assert!(db.store.set_handoff(&key, Some(&taken)).await.unwrap());
    let raw = conversations
        .find_one(bson::doc! {"_id": "34600111781"})
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.contains_key("handoff_waiting"), "{raw}");
    assert!(
        db.store
            .list_conversations(&waiting)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(db.store.list_conversations(&active).await.unwrap().len(), 2);
    assert!(db.store.set_handoff(&handed, None).await.unwrap());
    let raw = conversations
        .find_one(bson::doc! {"_id": handed.as_str()})
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.contains_key("handoff_taken"), "{raw}");
    assert_eq!(db.store.list_conversations(&active).await.unwrap().len(), 1);
    db.drop().await;
}
