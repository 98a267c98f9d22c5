//! Business events: written through the engine exactly when the change is (never for a
//! declined confirmation), on both stores; delivered to a local receiver signed, in order per
//! conversation, once across instances, retried and failed as documented; exported as the store
//! holds them.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use chrono::Utc;
use secrecy::SecretString;
use serde_json::{Value, json};
use zaguan::admin::export::{self, ExportFormat, ExportKind};
use zaguan::crm::{EventDelivery, EventSettings};
use zaguan::domain::Role;
use zaguan::domain::WaId;
use zaguan::engine::Engine;
use zaguan::engine::handoff;
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::{
    ListingStatus, MemoryRealEstate, MongoRealEstate, Property, RealEstateStore, Visit,
};
use zaguan::store::{BusinessEvent, Event, EventQuery, EventStatus, MemoryStore, Store};

const SECRET: &str = "events-secret";

fn engine(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    llm: &Arc<ScriptedLlm>,
) -> Engine {
    common::realestate_engine(store, realestate, llm)
}

/// The types of the events of `wa_id`, oldest first.
async fn types(store: &Arc<dyn Store>, wa_id: &WaId) -> Vec<String> {
    let mut events = store
        .list_events(&EventQuery {
            wa_id: Some(wa_id.clone()),
            limit: 100,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    events.reverse();
    events.iter().map(|e| e.event.kind().to_owned()).collect()
}

/// Two free slots of one available listing, a day or more ahead.
fn two_slots(set: &zaguan::realestate::demo::DemoSet) -> (Property, String, String) {
    let soon = Utc::now() + chrono::Duration::days(1);
    for property in set
        .properties
        .iter()
        .filter(|p| p.status == ListingStatus::Available)
    {
        let slots: Vec<&str> = set
            .slots
            .iter()
            .filter(|s| s.property_id == property.id && s.starts_at > soon)
            .map(|s| s.id.as_str())
            .collect();
        if slots.len() >= 2 {
            return (property.clone(), slots[0].to_owned(), slots[1].to_owned());
        }
    }
    panic!("the demo has a listing with two slots");
}

async fn every_change_writes_its_event_and_nothing_else_does(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let (property, first, second) = two_slots(&set);
    let customer = WaId::parse("34611000931").unwrap();
    let a = "appointment_assistant";
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(a, "book_appointment", json!({"slot_id": first}))
            .says(a, "Confírmalo con el botón.")
            .says(a, "Vale, no la reservo.")
            .calls(a, "book_appointment", json!({"slot_id": first}))
            .says(a, "Confírmalo con el botón.")
            .says(a, "Reservada."),
    );
    let engine_ = engine(&store, &realestate, &llm);
    store
        .set_dialog_state(
            &customer,
            &zaguan::domain::DialogState::entered(a),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(
        &engine_,
        &store,
        &customer,
        1,
        "quiero visitarlo el primer hueco",
    )
    .await;
    assert_eq!(
        types(&store, &customer).await,
        ["lead.created"],
        "asked, not done"
    );
    let lead = store
        .list_events(&EventQuery {
            kind: Some("lead.created".into()),
            limit: 5,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert!(
        matches!(&lead[0].event, BusinessEvent::LeadCreated { assistant, .. } if assistant == a),
        "{lead:?}"
    );
    common::say(&engine_, &store, &customer, 2, "no").await;
    assert_eq!(
        types(&store, &customer).await,
        ["lead.created"],
        "declined: nothing"
    );
    common::say(&engine_, &store, &customer, 3, "bueno, sí, resérvalo").await;
    common::say(&engine_, &store, &customer, 4, "sí").await;
    assert_eq!(
        types(&store, &customer).await,
        ["lead.created", "appointment.booked"]
    );
    let booked = realestate.appointments_of(&customer).await.unwrap();
    assert_eq!(booked.len(), 1);
    // Each change leaves the notice its agent is sent (the follow-up loop's), with who shows it.
    let notice =
        |a: &zaguan::realestate::Appointment| a.follow_up.notice.clone().unwrap_or_default();
    assert!(notice(&booked[0]).starts_with("booked:"), "{booked:?}");
    assert!(booked[0].follow_up.agent.is_some(), "{booked:?}");

    // Reschedule, cancel, an offer, visit feedback, a person: each confirmed change, one event.
    let appointment = booked[0].id.clone();
    let o = "prospect_offer_assistant";
    let v = "visit_tracker_assistant";
    let visit = Visit {
        id: "V-EV1".into(),
        property_id: property.id.clone(),
        wa_id: customer.clone(),
        visited_at: Utc::now() - chrono::Duration::days(2),
        outcome: None,
        feedback: None,
        rating: None,
    };
    realestate.upsert_visits(&[visit]).await.unwrap();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(a, "reschedule_appointment", json!({"appointment_id": appointment, "slot_id": second}))
            .says(a, "¿Confirmas?")
            .says(a, "Cambiada.")
            .calls(a, "cancel_appointment", json!({"appointment_id": appointment}))
            .says(a, "¿Confirmas?")
            .says(a, "Cancelada.")
            .calls(o, "submit_offer", json!({"property_id": property.id, "amount": property.price * 9 / 10}))
            .says(o, "¿Confirmas?")
            .says(o, "Enviada.")
            .calls(v, "record_visit_feedback", json!({"visit_id": "V-EV1", "outcome": "interested", "feedback": "Luminoso, la cocina pequeña"}))
            .says(v, "¿Lo guardo?")
            .says(v, "Guardado.")
            .calls(o, "request_callback", json!({"reason": "Negociar la oferta", "preferred_time": "por la tarde"}))
            .says(o, "¿Confirmas que te llamemos?")
            .says(o, "Te llamarán.")
            .calls("primary_assistant", "request_human", json!({"reason": "Quiere hablar con su agente"}))
            .says("primary_assistant", "Un compañero te escribe."),
    );
    let engine_ = engine(&store, &realestate, &llm);
    let mut n = 10;
    let mut turn = |agent: &str, texts: &[&str]| {
        let (store, engine_, customer, agent) = (&store, &engine_, &customer, agent.to_owned());
        let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
        n += 10;
        let n = n;
        async move {
            let path = if agent == "primary_assistant" {
                zaguan::domain::DialogState::primary()
            } else {
                zaguan::domain::DialogState::entered(agent)
            };
            store
                .set_dialog_state(customer, &path, Utc::now())
                .await
                .unwrap();
            for (i, text) in texts.iter().enumerate() {
                common::say(engine_, store, customer, n + i as u32, text).await;
            }
        }
    };
    turn(a, &["¿me la pasas al otro hueco?", "sí"]).await;
    let moved = realestate.appointment(&appointment).await.unwrap().unwrap();
    assert!(notice(&moved).starts_with("moved:"), "{moved:?}");
    turn(a, &["mejor anúlala", "sí"]).await;
    let cancelled = realestate.appointment(&appointment).await.unwrap().unwrap();
    assert!(
        notice(&cancelled).starts_with("cancelled:"),
        "{cancelled:?}"
    );
    turn(o, &["ofrezco un 10 % menos", "sí"]).await;
    let offered = realestate.offers_of(&customer).await.unwrap();
    assert_eq!(
        offered[0].answer.notice.as_deref(),
        Some("received"),
        "the owner is to be told: {offered:?}"
    );
    turn(v, &["me gustó, la cocina pequeña", "sí"]).await;
    turn(o, &["¿me llamáis por la tarde?", "sí"]).await;
    turn("primary_assistant", &["quiero hablar con mi agente"]).await;
    handoff::take(
        store.as_ref(),
        &customer,
        "marta",
        Duration::from_secs(3600),
        Utc::now(),
    )
    .await
    .unwrap();
    handoff::release(store.as_ref(), &customer, "marta", Utc::now())
        .await
        .unwrap();
    assert_eq!(
        types(&store, &customer).await,
        [
            "lead.created",
            "appointment.booked",
            "appointment.rescheduled",
            "appointment.cancelled",
            "offer.submitted",
            "visit_feedback.recorded",
            "callback.requested",
            "handoff.requested",
            "handoff.taken",
            "handoff.released",
        ]
    );
    assert_eq!(llm.remaining(), 0);
    let events = store
        .list_events(&EventQuery {
            wa_id: Some(customer.clone()),
            kind: Some("offer.submitted".into()),
            limit: 5,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let BusinessEvent::OfferSubmitted {
        amount,
        property_id,
        ..
    } = &events[0].event
    else {
        panic!("{events:?}");
    };
    assert_eq!(
        (*amount, property_id.as_str()),
        (property.price * 9 / 10, property.id.as_str())
    );

    // An owner's request for a new price.
    let owner = set.owners.iter().find(|o| o.wa_id.is_some()).unwrap();
    let own = set
        .properties
        .iter()
        .find(|p| p.owner_id == owner.id)
        .unwrap();
    let owner_wa = owner.wa_id.clone().unwrap();
    store.set_user_role(&owner_wa, Role::Owner).await.unwrap();
    store
        .set_dialog_state(
            &owner_wa,
            &zaguan::domain::DialogState::entered("owner_info_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "owner_info_assistant",
                "request_listing_change",
                json!({"property_id": own.id, "change": "price", "new_price": own.price - 5_000}),
            )
            .says("owner_info_assistant", "¿Confirmas?")
            .says("owner_info_assistant", "Registrado."),
    );
    let engine_ = engine(&store, &realestate, &llm);
    common::say(&engine_, &store, &owner_wa, 1, "bájalo 5.000").await;
    assert_eq!(types(&store, &owner_wa).await, ["lead.created"]);
    common::say(&engine_, &store, &owner_wa, 2, "sí").await;
    assert_eq!(
        types(&store, &owner_wa).await,
        ["lead.created", "listing_change.requested"]
    );

    // Exports hold what the store holds.
    let since = Utc::now() - chrono::Duration::hours(1);
    let offers = export::rows(
        ExportKind::Offers,
        since,
        store.as_ref(),
        realestate.as_ref(),
    )
    .await
    .unwrap()
    .rows;
    let stored = realestate.offers_created_since(since).await.unwrap();
    assert_eq!(offers.len(), stored.len());
    assert_eq!(offers[0]["id"], stored[0].id.as_str());
    assert_eq!(offers[0]["amount"], stored[0].amount);
    let appointments = export::rows(
        ExportKind::Appointments,
        since,
        store.as_ref(),
        realestate.as_ref(),
    )
    .await
    .unwrap()
    .rows;
    assert_eq!(appointments.len(), 1);
    assert_eq!(appointments[0]["status"], "cancelled");
    let leads = export::rows(
        ExportKind::Leads,
        since,
        store.as_ref(),
        realestate.as_ref(),
    )
    .await
    .unwrap()
    .rows;
    assert_eq!(leads.len(), 2);
    let csv = String::from_utf8(export::render(
        ExportKind::Leads,
        &leads,
        ExportFormat::Csv,
        true,
    ))
    .unwrap();
    assert_eq!(csv.lines().count(), 3, "a header and two rows: {csv}");
    assert!(
        csv.starts_with(
            "\u{feff}at,wa_id,name,assistant,source,opted_out_at,marketing_opted_out_at,ctwa_clid\r\n"
        ),
        "{csv}"
    );
    // They wrote on WhatsApp first: no portal sent them.
    assert!(
        csv.lines().skip(1).all(|row| row.contains(",organic,")),
        "{csv}"
    );

    // Forgetting the customer takes their events (and so their lead) with them.
    store.forget(&customer).await.unwrap();
    assert!(types(&store, &customer).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_every_change_writes_its_event_and_nothing_else_does() {
    every_change_writes_its_event_and_nothing_else_does(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_every_change_writes_its_event_and_nothing_else_does() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    every_change_writes_its_event_and_nothing_else_does(Arc::new(db.store.clone()), realestate)
        .await;
    db.drop().await;
}

/// What the local receiver saw: headers and raw body of each request.
#[derive(Clone, Default)]
struct Receiver {
    seen: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
    /// Scripted statuses by event id, then 200; a status 0 hangs past the client's timeout
    /// after reading the body.
    answers: Arc<Mutex<HashMap<String, std::collections::VecDeque<u16>>>>,
    /// Event ids answered 200, as often as they were.
    accepted: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn script(&self, id: &str, statuses: &[u16]) {
        self.answers
            .lock()
            .unwrap()
            .insert(id.to_owned(), statuses.iter().copied().collect());
    }

    async fn serve(&self) -> String {
        let me = self.clone();
        let app = axum::Router::new().route(
            "/hook",
            post(move |headers: HeaderMap, body: Bytes| {
                let me = me.clone();
                async move {
                    let id = headers["idempotency-key"].to_str().unwrap().to_owned();
                    me.seen.lock().unwrap().push((headers, body));
                    let answer = me
                        .answers
                        .lock()
                        .unwrap()
                        .get_mut(&id)
                        .and_then(|a| a.pop_front())
                        .unwrap_or(200);
                    if answer == 0 {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        return StatusCode::OK;
                    }
                    if answer == 200 {
                        me.accepted.lock().unwrap().push(id);
                    }
                    StatusCode::from_u16(answer).unwrap()
                }
            }),
        );
        format!("{}/hook", common::serve_local(app).await)
    }

    fn ids(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(h, _)| h["idempotency-key"].to_str().unwrap().to_owned())
            .collect()
    }
}

fn settings(url: &str) -> EventSettings {
    let mut settings = EventSettings::new(
        vec![url.parse().unwrap()],
        SecretString::from(SECRET.to_owned()),
    );
    settings.timeout = Duration::from_millis(500);
    settings.base_backoff = Duration::from_millis(1);
    settings.max_backoff = Duration::from_millis(1);
    settings
}

fn lead(wa_id: &WaId, minutes_ago: i64) -> Event {
    Event::new(
        wa_id,
        BusinessEvent::LeadCreated {
            name: Some("Nuria".into()),
            assistant: "searcher_assistant".into(),
        },
        Utc::now() - chrono::Duration::minutes(minutes_ago),
    )
}

fn handoff_requested(wa_id: &WaId, minutes_ago: i64) -> Event {
    Event::new(
        wa_id,
        BusinessEvent::HandoffRequested {
            reason: "Quiere hablar con una persona".into(),
        },
        Utc::now() - chrono::Duration::minutes(minutes_ago),
    )
}

/// Ticks until nothing is due (or `rounds` run out), moving the clock past each backoff.
async fn deliver_all(delivery: &EventDelivery, rounds: usize) {
    for _ in 0..rounds {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if delivery.tick(Utc::now()).await.unwrap() == 0 {
            return;
        }
    }
}

async fn events_reach_the_receiver_signed_in_order_once(store: Arc<dyn Store>) {
    let receiver = Receiver::default();
    let url = receiver.serve().await;
    let ana = WaId::parse("34611000941").unwrap();
    let luis = WaId::parse("34611000942").unwrap();
    let events = [lead(&ana, 3), handoff_requested(&ana, 2), lead(&luis, 1)];
    receiver.script(&events[0].id, &[500, 500, 500]);
    store.insert_events(&events).await.unwrap();
    store.insert_events(&events[..1]).await.unwrap();
    // Two instances at once: each event is accepted once.
    let one = EventDelivery::new(store.clone(), settings(&url)).unwrap();
    let two = EventDelivery::new(store.clone(), settings(&url)).unwrap();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let (a, b) = tokio::join!(one.tick(Utc::now()), two.tick(Utc::now()));
        if a.unwrap() + b.unwrap() == 0 {
            break;
        }
    }
    let ids = receiver.ids();
    let mut accepted = receiver.accepted.lock().unwrap().clone();
    accepted.sort();
    let mut expected: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    expected.sort();
    assert_eq!(accepted, expected, "each accepted once: {ids:?}");
    // Ana's first event was refused three times (500) before its 200: four requests, and her
    // second only after it.
    let anas: Vec<&String> = events
        .iter()
        .filter(|e| e.wa_id == ana)
        .map(|e| &e.id)
        .collect();
    let ana_order: Vec<&String> = ids.iter().filter(|id| anas.contains(id)).collect();
    assert_eq!(ana_order.len(), 5, "{ids:?}");
    assert!(
        ana_order[..4].iter().all(|id| **id == events[0].id),
        "{ids:?}"
    );
    assert_eq!(*ana_order[4], events[1].id);
    let delivered = store
        .list_events(&EventQuery {
            status: Some(EventStatus::Delivered),
            limit: 10,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(delivered.len(), 3);

    // The signature verifies on the raw bytes; the body is what docs/events.md says.
    let (headers, body) = receiver.seen.lock().unwrap().last().unwrap().clone();
    let timestamp: i64 = headers["x-zaguan-timestamp"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((Utc::now().timestamp() - timestamp).abs() < 60);
    assert_eq!(
        headers["x-zaguan-signature-256"].to_str().unwrap(),
        zaguan::crm::sign(SECRET.as_bytes(), timestamp, &body)
    );
    assert_ne!(
        headers["x-zaguan-signature-256"].to_str().unwrap(),
        zaguan::crm::sign(b"another secret", timestamp, &body)
    );
    let json: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["type"], headers["x-zaguan-event"].to_str().unwrap());
    assert_eq!(json["id"], headers["idempotency-key"].to_str().unwrap());
    assert!(
        json["conversation"].is_string() && json["data"].is_object(),
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_events_reach_the_receiver_signed_in_order_once() {
    events_reach_the_receiver_signed_in_order_once(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_events_reach_the_receiver_signed_in_order_once() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    events_reach_the_receiver_signed_in_order_once(Arc::new(db.store.clone())).await;
    db.drop().await;
}

/// A receiver that times out after reading gets the event again under the same key; one that
/// refuses (400) fails it for good with its answer; one down for a day fails it too; failed
/// events are listed and can be sent again.
async fn refusals_timeouts_and_a_day_down(store: Arc<dyn Store>) {
    let receiver = Receiver::default();
    let url = receiver.serve().await;
    let ana = WaId::parse("34611000951").unwrap();
    let luis = WaId::parse("34611000952").unwrap();
    let first = lead(&ana, 2);
    receiver.script(&first.id, &[0, 400]);
    store
        .insert_events(std::slice::from_ref(&first))
        .await
        .unwrap();
    let delivery = EventDelivery::new(store.clone(), settings(&url)).unwrap();
    deliver_all(&delivery, 10).await;
    let ids = receiver.ids();
    assert_eq!(
        ids,
        [first.id.clone(), first.id.clone()],
        "timed out, sent again"
    );
    let failed = store
        .list_events(&EventQuery {
            status: Some(EventStatus::Failed),
            limit: 10,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].error.as_deref().unwrap().contains("HTTP 400"),
        "{failed:?}"
    );
    assert!(store.retry_event(&first.id, Utc::now()).await.unwrap());
    assert!(
        !store.retry_event(&first.id, Utc::now()).await.unwrap(),
        "pending now"
    );
    deliver_all(&delivery, 10).await;
    assert_eq!(receiver.ids().len(), 3, "sent again, accepted");

    // Down for the day: an event older than a day that is still refused fails.
    let down = EventDelivery::new(store.clone(), settings("http://127.0.0.1:9/hook")).unwrap();
    let old = lead(&luis, 24 * 60 + 5);
    store
        .insert_events(std::slice::from_ref(&old))
        .await
        .unwrap();
    deliver_all(&down, 5).await;
    let failed = store
        .list_events(&EventQuery {
            status: Some(EventStatus::Failed),
            limit: 10,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].id, old.id);
    assert!(
        failed[0]
            .error
            .as_deref()
            .unwrap()
            .contains("not accepted within 24 h"),
        "{failed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_refusals_timeouts_and_a_day_down() {
    refusals_timeouts_and_a_day_down(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_refusals_timeouts_and_a_day_down() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    refusals_timeouts_and_a_day_down(Arc::new(db.store.clone())).await;
    db.drop().await;
}
