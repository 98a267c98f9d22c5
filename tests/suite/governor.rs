//! The send governor at send time, on both stores: a part the service wrote first is checked
//! again just before it goes (an opt-out or a marketing stop since it was queued stops it; a
//! reply to the customer is never stopped), and Meta's pauses (130429, 131056) reach every
//! instance through the store.

use crate::common;

use common::graph::{FakeGraph, graph_error};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use chrono::Utc;
use secrecy::SecretString;
use serde_json::json;
use zaguan::domain::WaId;
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::store::{ContactSeen, MemoryStore, NewOutbox, OptOut, OutboxStatus, Store, Template};
use zaguan::templates::Purpose;

const PHONE_NUMBER_ID: &str = "109876543210";

/// A channel over `store` to `graph`, as one instance of the service has.
async fn outbound_on(store: &Arc<dyn Store>, graph: &Arc<FakeGraph>) -> Outbound {
    let base = common::graph::serve(graph.clone()).await;
    let client = GraphClient::new(
        format!("{base}/v21.0").parse().unwrap(),
        Some(SecretString::from("EAAG-test-token".to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let settings = OutboundSettings {
        base_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        wait_in_place: Duration::from_secs(5),
        ..OutboundSettings::default()
    };
    Outbound::new(
        store.clone(),
        client,
        Limiters::new(&SendLimits::default()),
        settings,
    )
}

async fn contact(store: &dyn Store, wa_id: &WaId) {
    contact_seen(store, wa_id, Utc::now() - chrono::Duration::hours(2)).await;
}

/// `wa_id` last wrote at `seen_at`.
async fn contact_seen(store: &dyn Store, wa_id: &WaId, seen_at: chrono::DateTime<Utc>) {
    store
        .record_contact(&ContactSeen {
            wa_id: wa_id.clone(),
            phone: Some(wa_id.as_str().to_owned()),
            user_id: None,
            name: Some("Marta".into()),
            username: None,
            seen_at,
        })
        .await
        .unwrap();
}

/// A part written first for `purpose`: a text, or `template` when given.
fn written_first(
    to: &WaId,
    purpose: Option<Purpose>,
    body: &str,
    template: Option<Template>,
) -> NewOutbox {
    let mut part = NewOutbox::text(to.clone(), None, body, Utc::now());
    part.phone_number_id = Some(PHONE_NUMBER_ID.into());
    part.purpose = purpose;
    part.template = template;
    part
}

fn listing_alert() -> Template {
    Template {
        name: "listing_alert".into(),
        language: "es".into(),
        parameters: vec!["Marta".into(), "P-1031".into()],
        category: Some("marketing".into()),
        buttons: Vec::new(),
    }
}

async fn what_changed_since_queueing_is_asked_again_at_send(store: Arc<dyn Store>) {
    let graph = Arc::new(FakeGraph::default());
    let outbound = outbound_on(&store, &graph).await;
    let (leaving, choosy, writing) = (
        WaId::parse("34611500001").unwrap(),
        WaId::parse("34611500002").unwrap(),
        WaId::parse("34611500003").unwrap(),
    );
    for wa_id in [&leaving, &choosy, &writing] {
        contact(store.as_ref(), wa_id).await;
    }
    // Queued while everyone could be written to.
    let queued = store
        .insert_outbox(&[
            written_first(
                &leaving,
                Some(Purpose::VisitReminder),
                "Mañana a las 10:00 tienes la visita a P-1031.",
                None,
            ),
            written_first(
                &choosy,
                Some(Purpose::ListingAlert),
                "Hay un piso nuevo que encaja con tu búsqueda: P-1031.",
                Some(listing_alert()),
            ),
            written_first(
                &choosy,
                Some(Purpose::VisitReminder),
                "Mañana a las 12:00 tienes la visita a P-1032.",
                None,
            ),
            written_first(&writing, None, "Claro, te lo miro ahora.", None),
        ])
        .await
        .unwrap();
    // Then, before the sender gets to them: one opts out, one stops marketing in WhatsApp,
    // one opts out but has just written (the reply to them is theirs).
    let opt_out = OptOut {
        at: Utc::now(),
        source: "keyword:BAJA".into(),
    };
    store.set_opt_out(&leaving, Some(&opt_out)).await.unwrap();
    store.set_opt_out(&writing, Some(&opt_out)).await.unwrap();
    assert!(
        store
            .set_marketing_preference(&choosy, true, Utc::now())
            .await
            .unwrap()
    );
    for wa_id in [&leaving, &choosy, &writing] {
        outbound.flush(wa_id).await.unwrap();
    }

    let sent: Vec<(String, String)> = graph
        .received()
        .iter()
        .map(|r| {
            (
                r.body["to"].as_str().unwrap_or_default().to_owned(),
                r.body["type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            (choosy.as_str().to_owned(), "text".to_owned()),
            (writing.as_str().to_owned(), "text".to_owned()),
        ],
        "the utility reminder and the reply went; the opted-out reminder and the alert did not"
    );
    let entry = |i: usize| {
        let (store, id) = (store.clone(), queued[i].clone());
        async move { store.outbox_entry(&id).await.unwrap().unwrap() }
    };
    let reminder = entry(0).await;
    assert_eq!(reminder.status, OutboxStatus::Skipped);
    let why = reminder.error.unwrap().message.unwrap();
    assert!(why.contains("opted out"), "{why}");
    let alert = entry(1).await;
    assert_eq!(alert.status, OutboxStatus::Skipped);
    let why = alert.error.unwrap().message.unwrap();
    assert!(why.contains("stopped marketing"), "{why}");
    assert_eq!(entry(2).await.status, OutboxStatus::Sent);
    assert_eq!(entry(3).await.status, OutboxStatus::Sent);
    assert!(store.unsent_outbox(&leaving).await.unwrap().is_empty());

    // Resuming marketing in WhatsApp lets the next alert go.
    assert!(
        store
            .set_marketing_preference(&choosy, false, Utc::now() + chrono::Duration::seconds(1))
            .await
            .unwrap()
    );
    store
        .insert_outbox(&[written_first(
            &choosy,
            Some(Purpose::ListingAlert),
            "Hay otro piso nuevo: P-1033.",
            Some(listing_alert()),
        )])
        .await
        .unwrap();
    outbound.flush(&choosy).await.unwrap();
    let last = graph.received().last().unwrap().body.clone();
    assert_eq!(last["to"], json!(choosy.as_str()));
    assert_eq!(last["template"]["name"], json!("listing_alert"));
}

#[tokio::test]
async fn memory_what_changed_since_queueing_is_asked_again_at_send() {
    what_changed_since_queueing_is_asked_again_at_send(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn mongo_what_changed_since_queueing_is_asked_again_at_send() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    what_changed_since_queueing_is_asked_again_at_send(Arc::new(db.store.clone())).await;
    db.drop().await;
}

/// Meta tells one instance to slow the number down (130429, Retry-After 1 s): the other
/// instance, sending to someone else from the same number, waits out the same pause.
async fn a_pause_meta_asks_of_one_instance_holds_the_other(store: Arc<dyn Store>) {
    let graph = Arc::new(FakeGraph {
        answers: Mutex::new(
            vec![(
                StatusCode::BAD_REQUEST,
                graph_error(130429, "Rate limit hit"),
                Some(1),
            )]
            .into(),
        ),
        ..FakeGraph::default()
    });
    let (one, other) = (
        outbound_on(&store, &graph).await,
        outbound_on(&store, &graph).await,
    );
    let (first, second) = (
        WaId::parse("34611500011").unwrap(),
        WaId::parse("34611500012").unwrap(),
    );
    store
        .insert_outbox(&[
            written_first(&first, None, "Te lo miro ahora.", None),
            written_first(&second, None, "Aquí tienes los huecos.", None),
        ])
        .await
        .unwrap();
    let refused_and_resent = tokio::spawn(async move {
        one.flush(&first).await.unwrap();
    });
    // The refusal is in, and its pause in the store.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let pauses = loop {
        let pauses = store.send_pauses(Utc::now(), 10).await.unwrap();
        if !pauses.is_empty() {
            break pauses;
        }
        assert!(std::time::Instant::now() < deadline, "no pause was kept");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(pauses[0].0, format!("number:{PHONE_NUMBER_ID}"));
    let refused_at = graph.received()[0].at;
    other.keep_shared_pauses().await;
    other.flush(&second).await.unwrap();
    refused_and_resent.await.unwrap();
    let to_second = graph
        .received()
        .into_iter()
        .find(|r| r.body["to"] == json!(second.as_str()))
        .expect("the other instance's part went");
    assert!(
        to_second.at - refused_at >= Duration::from_millis(800),
        "the other instance waited for the number's pause: {:?}",
        to_second.at - refused_at
    );
    assert_eq!(graph.received().len(), 3, "refused, then both sent once");
}

#[tokio::test]
async fn memory_a_pause_meta_asks_of_one_instance_holds_the_other() {
    a_pause_meta_asks_of_one_instance_holds_the_other(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn mongo_a_pause_meta_asks_of_one_instance_holds_the_other() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    a_pause_meta_asks_of_one_instance_holds_the_other(Arc::new(db.store.clone())).await;
    db.drop().await;
}

/// Meta's messaging limit (here `max_daily_conversations_per_business` at 2): with two contacts
/// reached by templates in the last 24 hours, a third outside her window gets nothing, with why;
/// one of the two may get another; once Meta raises the limit, the third goes.
async fn the_messaging_limit_bounds_the_conversations_the_business_starts(store: Arc<dyn Store>) {
    use zaguan::outbound::governor::{Form, Skip, form};
    use zaguan::templates::{Category, TemplateSpec, Templates};
    let templates = Templates::default().with_default(
        Purpose::VisitReminder,
        "es",
        TemplateSpec::new(
            "visit_reminder",
            "es",
            Category::Utility,
            vec!["name".into()],
        ),
    );
    store
        .record_account_health(&zaguan::domain::AccountHealth {
            key: "34910000000".into(),
            messaging_limit: Some("2".into()),
            last_event: "UPGRADE".into(),
            ..zaguan::domain::AccountHealth::default()
        })
        .await
        .unwrap();
    let now = Utc::now();
    let wa = |n: u32| WaId::parse(&format!("3461150010{n}")).unwrap();
    for n in 1..=3 {
        // Their last message, a day and more ago: outside the window.
        contact_seen(store.as_ref(), &wa(n), now - chrono::Duration::hours(30)).await;
    }
    let reminder = |n: u32| {
        let mut template = listing_alert();
        template.name = "visit_reminder".into();
        template.category = Some("utility".into());
        written_first(
            &wa(n),
            Some(Purpose::VisitReminder),
            "Recordatorio",
            Some(template),
        )
    };
    store
        .insert_outbox(&[reminder(1), reminder(2)])
        .await
        .unwrap();
    let form_for = |n: u32| {
        let (store, templates) = (store.clone(), templates.clone());
        async move {
            form(
                store.as_ref(),
                &templates,
                &wa(n),
                Purpose::VisitReminder,
                Some("es"),
                &[("name", "Marta".into())],
                now,
            )
            .await
            .unwrap()
        }
    };
    let third = form_for(3).await;
    assert_eq!(third, Form::Skip(Skip::MessagingLimit));
    assert!(Skip::MessagingLimit.reason().contains("messaging limit"));
    assert!(
        matches!(form_for(1).await, Form::Template(_)),
        "a contact already reached costs nothing more"
    );
    // The limit raised: the third goes.
    store
        .record_account_health(&zaguan::domain::AccountHealth {
            key: "34910000000".into(),
            messaging_limit: Some("TIER_2K".into()),
            last_event: "UPGRADE".into(),
            ..zaguan::domain::AccountHealth::default()
        })
        .await
        .unwrap();
    assert!(matches!(form_for(3).await, Form::Template(_)));
}

#[tokio::test]
async fn memory_the_messaging_limit_bounds_the_conversations_the_business_starts() {
    the_messaging_limit_bounds_the_conversations_the_business_starts(Arc::new(MemoryStore::new()))
        .await;
}

#[tokio::test]
async fn mongo_the_messaging_limit_bounds_the_conversations_the_business_starts() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    the_messaging_limit_bounds_the_conversations_the_business_starts(Arc::new(db.store.clone()))
        .await;
    db.drop().await;
}
