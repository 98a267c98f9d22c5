//! Every change has its event, exactly once, wherever the process dies. A customer books,
//! cancels, makes an offer or asks for a person; the turn that makes the change is cut at its
//! first write, then at its second, and so on until it runs through, each time on new data;
//! after each cut a restarted engine resumes the turn on the real stores. Then the change is
//! there once, its event is there once and names it, the customer got one reply, and the staff
//! one notice (the cut may fall between paging a staff member and queuing the message).

use crate::common;
use crate::common::crash::{self, Crash};

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::json;
use zaguan::agents::AgentRegistry;
use zaguan::domain::{DialogState, ToolCall, WaId};
use zaguan::engine::handoff::{HandoffDesk, HandoffSettings, RequestHuman};
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::realestate::roles::DataRoles;
use zaguan::realestate::{AppointmentStatus, RealEstateStore};
use zaguan::store::{BusinessEvent, EventQuery, InboxStatus, Store};

/// Enough of a model to make each change, from the history alone (a resumed turn gets the
/// same answers): the customer's words name what to do and with which ids.
struct RuleLlm;

#[async_trait]
impl Llm for RuleLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let say = |text: &str| LlmResponse {
            content: text.to_owned(),
            ..LlmResponse::default()
        };
        let call = |name: &str, args: serde_json::Value| LlmResponse {
            tool_calls: vec![ToolCall {
                id: format!("call_{}", request.messages.len()),
                name: name.into(),
                args: args.into(),
            }],
            ..LlmResponse::default()
        };
        Ok(match request.messages.last() {
            Some(ChatMessage::Human { content }) => {
                let words: Vec<&str> = content.split_whitespace().collect();
                let id = |prefix: &str| {
                    words
                        .iter()
                        .find(|w| w.starts_with(prefix))
                        .map(|w| (*w).to_owned())
                        .unwrap_or_default()
                };
                match words.first().copied() {
                    Some("reserva") => call("book_appointment", json!({"slot_id": id("S-")})),
                    Some("anula") => {
                        call("cancel_appointment", json!({"appointment_id": id("A-")}))
                    }
                    Some("ofrezco") => call(
                        "submit_offer",
                        json!({"property_id": id("P-"), "amount": words[1].parse::<u64>().unwrap()}),
                    ),
                    Some("necesito") => call(
                        "request_human",
                        json!({"reason": format!("Quiere que le atiendan por {}", id("P-"))}),
                    ),
                    _ => say("¿En qué te ayudo?"),
                }
            }
            Some(ChatMessage::Tool { content, .. })
                if content.starts_with("Waiting for the user's confirmation") =>
            {
                say("¿Lo confirmas?")
            }
            _ => say("Hecho."),
        })
    }
}

/// The shipped prompts without the business file: the office always open, so the staff are
/// told at once whatever the hour the test runs.
fn prompts() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    for entry in std::fs::read_dir(source).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != zaguan::business::BUSINESS_FILE {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let path = dir.path().to_owned();
    (dir, path)
}

fn engine(
    prompts: &Arc<AgentRegistry>,
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) -> Engine {
    let desk = Arc::new(HandoffDesk::new(
        store.clone(),
        Some(Arc::new(DataRoles(realestate.clone()))),
        // Each request its own notice (no digest gathering them): one notice per customer.
        HandoffSettings {
            digest: std::time::Duration::ZERO,
            ..HandoffSettings::default()
        },
    ));
    let tools =
        zaguan::realestate::tools::registry(realestate).with(RequestHuman::new(desk.clone()));
    Engine::new(
        store,
        Arc::new(RuleLlm),
        prompts.clone(),
        Arc::new(tools),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    )
    .with_handoffs(desk)
}

/// One change and how to see it done.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    Booked,
    Cancelled,
    Offered,
    HandedOff,
}

async fn every_change_has_its_event_exactly_once_wherever_the_process_dies(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let (_keep, dir) = prompts();
    let prompts = Arc::new(AgentRegistry::load(&dir, &zaguan::startup::known_tools()).unwrap());
    let lucia = set.staff[0].wa_id.clone().unwrap();
    let available: Vec<&zaguan::realestate::Property> = set
        .properties
        .iter()
        .filter(|p| p.status == zaguan::realestate::ListingStatus::Available)
        .collect();
    let mut slots = set
        .slots
        .iter()
        .filter(|s| available.iter().any(|p| p.id == s.property_id));
    let mut customers = 0;
    let mut cuts = 0;
    for change in [
        Change::Booked,
        Change::Cancelled,
        Change::Offered,
        Change::HandedOff,
    ] {
        for crash_at in 1.. {
            customers += 1;
            let customer = WaId::parse(&format!("3461190{customers:04}")).unwrap();
            let real = engine(&prompts, store.clone(), realestate.clone());
            let say = |n: u32, text: String| {
                let (real, customer) = (&real, &customer);
                let store = &store;
                async move { common::say(real, store, customer, n, &text).await }
            };
            let agent = match change {
                Change::HandedOff => DialogState::primary(),
                Change::Offered => DialogState::entered("prospect_offer_assistant"),
                _ => DialogState::entered("appointment_assistant"),
            };
            store
                .set_dialog_state(&customer, &agent, Utc::now())
                .await
                .unwrap();
            // What the cut turn answers: the customer's yes, or their request for a person.
            let last = match change {
                Change::Booked => {
                    let slot = slots.next().unwrap();
                    say(1, format!("reserva {}", slot.id)).await;
                    "sí"
                }
                Change::Cancelled => {
                    let slot = slots.next().unwrap();
                    say(1, format!("reserva {}", slot.id)).await;
                    say(2, "sí".into()).await;
                    let booked = realestate.appointments_of(&customer).await.unwrap();
                    say(3, format!("anula {}", booked[0].id)).await;
                    "sí"
                }
                Change::Offered => {
                    let property = available[customers % available.len()];
                    say(
                        1,
                        format!("ofrezco {} por {}", property.price * 95 / 100, property.id),
                    )
                    .await;
                    "sí"
                }
                Change::HandedOff => "necesito que me atienda alguien por lo del P-1001",
            };
            // The turn making the change, cut at its `crash_at`-th write.
            let crash = Crash::at(crash_at);
            let cut = engine(
                &prompts,
                crash::store(store.clone(), crash.clone()),
                crash::realestate(realestate.clone(), crash.clone()),
            );
            let wamid = format!("wamid.{customer}.9");
            let entry = common::inbox_entry(&wamid, &customer, last, InboxStatus::Pending);
            store.insert_inbox(&[entry]).await.unwrap();
            let open = store.open_inbox(&customer).await.unwrap();
            let _ = cut.run_turn(&customer, &open).await;
            let died = crash.happened();
            // The process restarts: the message is still open, and its turn is resumed.
            let open = store.open_inbox(&customer).await.unwrap();
            if !open.is_empty() {
                let outcome = real.run_turn(&customer, &open).await.unwrap();
                store
                    .set_inbox_status(&outcome.answered, InboxStatus::Done)
                    .await
                    .unwrap();
            }
            let history: Vec<String> = store
                .recent_messages(&customer, 30)
                .await
                .unwrap()
                .iter()
                .map(|m| {
                    format!(
                        "{:?} {:?} {} {:?}",
                        m.message.role,
                        m.message.agent,
                        m.message.content.chars().take(120).collect::<String>(),
                        m.message.tool_calls
                    )
                })
                .collect();
            let why = format!(
                "{change:?}, died at write {crash_at}\n{}",
                history.join("\n")
            );
            let replies = store
                .outbox_in_reply_to(&zaguan::domain::WaMessageId::parse(&wamid).unwrap())
                .await
                .unwrap();
            assert_eq!(replies.len(), 1, "one reply: {why}");
            let events = store
                .list_events(&EventQuery {
                    wa_id: Some(customer.clone()),
                    limit: 50,
                    ..EventQuery::default()
                })
                .await
                .unwrap();
            let of = |kind: &str| -> Vec<BusinessEvent> {
                events
                    .iter()
                    .filter(|e| e.event.kind() == kind)
                    .map(|e| e.event.clone())
                    .collect()
            };
            let appointments = realestate.appointments_of(&customer).await.unwrap();
            match change {
                Change::Booked => {
                    assert_eq!(appointments.len(), 1, "{why}: {appointments:?}");
                    assert_eq!(appointments[0].status, AppointmentStatus::Booked, "{why}");
                    assert!(
                        matches!(&of("appointment.booked")[..], [BusinessEvent::AppointmentBooked { appointment_id, .. }] if *appointment_id == appointments[0].id),
                        "{why}: {events:?}"
                    );
                    let claimed = realestate
                        .claimed_slots(std::slice::from_ref(&appointments[0].slot_id))
                        .await
                        .unwrap();
                    assert_eq!(claimed.len(), 1, "{why}");
                }
                Change::Cancelled => {
                    assert_eq!(appointments.len(), 1, "{why}");
                    assert_eq!(
                        appointments[0].status,
                        AppointmentStatus::Cancelled,
                        "{why}"
                    );
                    assert_eq!(of("appointment.booked").len(), 1, "{why}");
                    assert!(
                        matches!(&of("appointment.cancelled")[..], [BusinessEvent::AppointmentCancelled { appointment_id, .. }] if *appointment_id == appointments[0].id),
                        "{why}: {events:?}"
                    );
                    let claimed = realestate
                        .claimed_slots(std::slice::from_ref(&appointments[0].slot_id))
                        .await
                        .unwrap();
                    assert!(claimed.is_empty(), "the slot is free again: {why}");
                }
                Change::Offered => {
                    let offers = realestate.offers_of(&customer).await.unwrap();
                    assert_eq!(offers.len(), 1, "{why}: {offers:?}");
                    assert!(
                        matches!(&of("offer.submitted")[..], [BusinessEvent::OfferSubmitted { offer_id, .. }] if *offer_id == offers[0].id),
                        "{why}: {events:?}"
                    );
                }
                Change::HandedOff => {
                    assert_eq!(of("handoff.requested").len(), 1, "{why}: {events:?}");
                    let request = store
                        .conversation(&customer)
                        .await
                        .unwrap()
                        .unwrap()
                        .handoff_requested
                        .expect("flagged for a person");
                    assert_eq!(request.reasons.len(), 1, "{why}: {request:?}");
                    let notices: Vec<_> = store
                        .unsent_outbox(&lucia)
                        .await
                        .unwrap()
                        .into_iter()
                        .filter(|n| n.body.contains(customer.as_str()))
                        .collect();
                    assert_eq!(notices.len(), 1, "one notice to Lucía: {why}");
                }
            }
            if !died {
                // The turn ran through: every write of it has been cut once.
                assert!(crash_at > 3, "{why}: the turn writes more than that");
                break;
            }
            cuts += 1;
        }
    }
    eprintln!("durable_events: {customers} changes made, {cuts} of them cut by a crash");
    assert!(cuts >= 20, "only {cuts} cuts");
}

crate::both_stores!(|s| (s.store.clone(), s.realestate.clone()) =>
    every_change_has_its_event_exactly_once_wherever_the_process_dies,
);
