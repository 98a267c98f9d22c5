//! Saved-search alerts through the engine on both stores: a customer saves a search (confirmed
//! with the usual buttons), staff add and update listings (`realestate::listings`, what
//! `zaguan listings` and the admin API run), and the alert loop tells the customer of a new or
//! cheaper match once — as text inside the 24-hour window, as the template outside it — however
//! many instances look at once. Cancelled searches, older news and other roles hear nothing.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::{Map, Value, json};
use zaguan::domain::WaId;
use zaguan::domain::{MessageRole, Role};
use zaguan::engine::Engine;
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::alerts::{ALERT_AGENT, AlertSettings, Alerts};
use zaguan::realestate::listings::{self, ListingsError};
use zaguan::realestate::{MemoryRealEstate, MongoRealEstate, Property, RealEstateStore};
use zaguan::store::{ContactSeen, MemoryStore, Store};

fn settings() -> AlertSettings {
    AlertSettings {
        phone_number_id: "109876543210".into(),
        every: Duration::from_secs(60),
    }
}

fn engine(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    llm: &Arc<ScriptedLlm>,
) -> Arc<Engine> {
    Arc::new(common::realestate_engine(store, realestate, llm))
}

/// A listing as staff would write it in a file: a copy of `like` under a new id.
fn new_listing(
    like: &Property,
    id: &str,
    city: &str,
    price: u64,
    bedrooms: u32,
) -> Map<String, Value> {
    let mut value = serde_json::to_value(like).unwrap();
    let map = value.as_object_mut().unwrap();
    map.insert("id".into(), json!(id));
    map.insert("city".into(), json!(city));
    map.insert("price".into(), json!(price));
    map.insert("bedrooms".into(), json!(bedrooms));
    map.insert("status".into(), json!("available"));
    map.insert("operation".into(), json!("sale"));
    map.remove("listed_at");
    map.clone()
}

async fn seen_hours_ago(store: &Arc<dyn Store>, wa_id: &WaId, hours: i64) {
    store
        .record_contact(&ContactSeen {
            wa_id: wa_id.clone(),
            phone: Some(wa_id.as_str().to_owned()),
            user_id: None,
            name: None,
            username: None,
            seen_at: Utc::now() - chrono::Duration::hours(hours),
        })
        .await
        .unwrap();
}

async fn a_saved_search_hears_of_new_and_cheaper_listings_once(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let like = &set.properties[0];
    let search =
        json!({"city": "Valencia", "operation": "sale", "max_price": 300000, "min_bedrooms": 2});
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls("searcher_assistant", "create_search_alert", search.clone())
            .says("searcher_assistant", "Confírmalo con el botón.")
            .says("searcher_assistant", "Listo, te aviso.")
            .calls(
                "searcher_assistant",
                "create_search_alert",
                json!({"city": "Madrid"}),
            )
            .says("searcher_assistant", "Confírmalo con el botón.")
            .says("searcher_assistant", "Listo.")
            .calls("searcher_assistant", "create_search_alert", search.clone())
            .says("searcher_assistant", "Eso no lo puedo hacer."),
    );
    let engine = engine(&store, &realestate, &llm);
    let customer = WaId::parse("34611000901").unwrap();
    let silent = WaId::parse("34611000902").unwrap();
    for wa_id in [&customer, &silent] {
        store
            .set_dialog_state(
                wa_id,
                &zaguan::domain::DialogState::entered("searcher_assistant"),
                Utc::now(),
            )
            .await
            .unwrap();
    }

    common::say(
        &engine,
        &store,
        &customer,
        1,
        "avisadme si sale algo en valencia de 2 hab por menos de 300 mil",
    )
    .await;
    assert!(
        realestate.alerts_of(&customer).await.unwrap().is_empty(),
        "nothing saved before the yes"
    );
    assert_eq!(
        common::say(&engine, &store, &customer, 2, "sí")
            .await
            .as_deref(),
        Some("Listo, te aviso.")
    );
    let saved = realestate.alerts_of(&customer).await.unwrap();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].criteria.city.as_deref(), Some("Valencia"));
    assert_eq!(saved[0].criteria.max_price, Some(300_000));
    // A second customer saves a search for Madrid, and is not in the 24-hour window.
    common::say(&engine, &store, &silent, 1, "avisadme de pisos en Madrid").await;
    common::say(&engine, &store, &silent, 2, "vale").await;
    assert_eq!(realestate.alerts_of(&silent).await.unwrap().len(), 1);
    seen_hours_ago(&store, &customer, 1).await;
    seen_hours_ago(&store, &silent, 48).await;

    // An owner is not offered saved searches, whatever the model tries.
    let owner = set.owners.iter().find_map(|o| o.wa_id.clone()).unwrap();
    store.set_user_role(&owner, Role::Owner).await.unwrap();
    store
        .set_dialog_state(
            &owner,
            &zaguan::domain::DialogState::entered("searcher_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(&engine, &store, &owner, 1, "avisadme de pisos en Valencia").await;
    assert!(realestate.alerts_of(&owner).await.unwrap().is_empty());
    assert!(
        store
            .conversation(&owner)
            .await
            .unwrap()
            .unwrap()
            .pending_action
            .is_none()
    );
    let refused = store.recent_messages(&owner, 10).await.unwrap();
    assert!(
        refused.iter().any(|m| m.message.role == MessageRole::Tool
            && m.message.content.contains("not available for this user")),
        "the role check answered the call"
    );

    // Staff add a match for each search and a listing nobody looks for; a bad batch writes
    // nothing.
    let now = Utc::now();
    let bad = vec![
        new_listing(like, "P-9001", "Valencia", 250_000, 3),
        new_listing(like, "P-9002", "Valencia", 0, 3),
    ];
    let error = listings::add(realestate.as_ref(), bad, now)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ListingsError::Invalid(why) if why.contains("P-9002")),
        "{error}"
    );
    assert!(realestate.property("P-9001").await.unwrap().is_none());
    let applied = listings::add(
        realestate.as_ref(),
        vec![
            new_listing(like, "P-9001", "Valencia", 250_000, 3),
            new_listing(like, "P-9003", "Valencia", 450_000, 3),
            new_listing(like, "P-9004", "Madrid", 300_000, 2),
            new_listing(like, "P-9005", "Sevilla", 200_000, 2),
        ],
        now,
    )
    .await
    .unwrap();
    assert_eq!(applied.added.len(), 4);
    let error = listings::add(
        realestate.as_ref(),
        vec![new_listing(like, "P-9001", "Valencia", 1, 1)],
        now,
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");

    // Two instances look at once: each customer hears of their match once.
    let first = Alerts::new(realestate.clone(), engine.clone(), settings());
    let second = Alerts::new(realestate.clone(), engine.clone(), settings());
    let at = Utc::now();
    let (a, b) = tokio::join!(first.tick(at), second.tick(at));
    assert_eq!(a.unwrap() + b.unwrap(), 2);
    assert_eq!(first.tick(Utc::now()).await.unwrap(), 0, "once");

    let notices = store.unsent_outbox(&customer).await.unwrap();
    let notice = notices.last().unwrap();
    assert!(notice.template.is_none(), "inside the window: text");
    assert!(notice.body.contains("P-9001"), "{}", notice.body);
    assert!(notice.body.contains("acaba de entrar"), "{}", notice.body);
    assert!(
        !notices.iter().any(|n| n.body.contains("P-9003")),
        "above the budget"
    );
    let outside = store.unsent_outbox(&silent).await.unwrap();
    let template = outside
        .last()
        .unwrap()
        .template
        .as_ref()
        .expect("outside the window: the template");
    assert_eq!(template.name, "listing_alert");
    assert_eq!(template.parameters[2], "P-9004");
    let history = store.recent_messages(&customer, 20).await.unwrap();
    let said = &history.last().unwrap().message;
    assert_eq!(said.role, MessageRole::Ai);
    assert_eq!(said.agent.as_deref(), Some(ALERT_AGENT));

    // The listing above the budget gets cheaper: news again; cheaper still: not twice.
    let patch = |price: u64| {
        let mut map = Map::new();
        map.insert("id".into(), json!("P-9003"));
        map.insert("price".into(), json!(price));
        vec![map]
    };
    let applied = listings::update(realestate.as_ref(), patch(289_000), Utc::now())
        .await
        .unwrap();
    assert_eq!(applied.price_drops, ["P-9003"]);
    assert_eq!(first.tick(Utc::now()).await.unwrap(), 1);
    let notices = store.unsent_outbox(&customer).await.unwrap();
    assert!(
        notices.last().unwrap().body.contains("ha bajado de precio"),
        "{}",
        notices.last().unwrap().body
    );
    listings::update(realestate.as_ref(), patch(279_000), Utc::now())
        .await
        .unwrap();
    assert_eq!(first.tick(Utc::now()).await.unwrap(), 0, "once per listing");
    // A raise is not news.
    let applied = listings::update(realestate.as_ref(), patch(400_000), Utc::now())
        .await
        .unwrap();
    assert!(applied.price_drops.is_empty());
    let error = listings::update(
        realestate.as_ref(),
        vec![Map::from_iter([("id".to_owned(), json!("P-0000"))])],
        Utc::now(),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");

    // The customer cancels: the next match is not announced.
    let alert_id = saved[0].id.clone();
    let mut alert = realestate.alerts_of(&customer).await.unwrap().remove(0);
    alert.cancelled_at = Some(Utc::now());
    realestate.save_alert(&alert).await.unwrap();
    listings::add(
        realestate.as_ref(),
        vec![new_listing(like, "P-9006", "Valencia", 199_000, 2)],
        Utc::now(),
    )
    .await
    .unwrap();
    assert_eq!(
        first.tick(Utc::now()).await.unwrap(),
        0,
        "{alert_id} was cancelled"
    );
    assert_eq!(llm.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_a_saved_search_hears_of_new_and_cheaper_listings_once() {
    a_saved_search_hears_of_new_and_cheaper_listings_once(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_saved_search_hears_of_new_and_cheaper_listings_once() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    a_saved_search_hears_of_new_and_cheaper_listings_once(Arc::new(db.store.clone()), realestate)
        .await;
    db.drop().await;
}

/// Listing and cancelling go through the tools, the caller's own only.
async fn a_customer_lists_and_cancels_their_searches(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "searcher_assistant",
                "create_search_alert",
                json!({"city": "Sevilla", "type": "flat"}),
            )
            .says("searcher_assistant", "¿Confirmas?")
            .says("searcher_assistant", "Guardada.")
            .calls("searcher_assistant", "list_my_alerts", json!({}))
            .says("searcher_assistant", "Tienes una.")
            .calls(
                "searcher_assistant",
                "cancel_search_alert",
                json!({"alert_id": "S-nope"}),
            )
            .says("searcher_assistant", "No encuentro esa."),
    );
    let engine = engine(&store, &realestate, &llm);
    let customer = WaId::parse("34611000911").unwrap();
    store
        .set_dialog_state(
            &customer,
            &zaguan::domain::DialogState::entered("searcher_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(&engine, &store, &customer, 1, "avisame de pisos en sevilla").await;
    common::say(&engine, &store, &customer, 2, "sí").await;
    common::say(&engine, &store, &customer, 3, "¿qué avisos tengo?").await;
    common::say(&engine, &store, &customer, 4, "quita el S-nope").await;
    assert!(
        store
            .conversation(&customer)
            .await
            .unwrap()
            .unwrap()
            .pending_action
            .is_none()
    );
    let listed = store
        .recent_messages(&customer, 20)
        .await
        .unwrap()
        .into_iter()
        .find(|m| {
            m.message.role == MessageRole::Tool
                && m.message.content.contains("búsqueda(s) guardada(s)")
        })
        .expect("list_my_alerts answered");
    let id = listed
        .message
        .content
        .split_whitespace()
        .find(|w| w.starts_with("S-"))
        .unwrap()
        .to_owned();
    assert_eq!(id, realestate.alerts_of(&customer).await.unwrap()[0].id);
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "searcher_assistant",
                "cancel_search_alert",
                json!({"alert_id": id}),
            )
            .says("searcher_assistant", "¿Confirmas?")
            .says("searcher_assistant", "Cancelada."),
    );
    let engine = self::engine(&store, &realestate, &llm);
    common::say(&engine, &store, &customer, 5, "cancela el de sevilla").await;
    assert_eq!(
        common::say(&engine, &store, &customer, 6, "sí")
            .await
            .as_deref(),
        Some("Cancelada.")
    );
    let alerts = realestate.alerts_of(&customer).await.unwrap();
    assert_eq!(alerts.len(), 1);
    assert!(alerts[0].cancelled_at.is_some());
    assert_eq!(llm.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_a_customer_lists_and_cancels_their_searches() {
    a_customer_lists_and_cancels_their_searches(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_customer_lists_and_cancels_their_searches() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    a_customer_lists_and_cancels_their_searches(Arc::new(db.store.clone()), realestate).await;
    db.drop().await;
}
