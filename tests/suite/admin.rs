//! The admin API through the real router: auth cases, listing stuck conversations, showing one,
//! resetting it (history kept) — on the in-memory store and on MongoDB.

use crate::common;

use std::sync::Arc;
use zaguan::store::{
    ConversationStore, EventStore, HistoryStore, InboxStore, LeaseStore, OutboxStore, UserStore,
};

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use common::TestApp;
use serde_json::{Value, json};
use zaguan::domain::MessageRole;
use zaguan::domain::WaId;
use zaguan::store::{InboxStatus, NewMessage, Store};

const TOKEN: &str = common::ADMIN_TOKEN;
use common::bearer;
use zaguan::admin::team::OperatorRole;

/// The real binary against the test's MongoDB database, logging errors only.
fn cli_on(database: &str) -> std::process::Command {
    let mut command = common::zaguan();
    command
        .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
        .env("MONGODB_DATABASE", database)
        .env("RUST_LOG", "error");
    command
}

fn app(store: Arc<dyn Store>, token: Option<&str>) -> TestApp {
    TestApp::with_store(store).with_admin(token)
}

async fn call(
    app: &TestApp,
    method: &str,
    uri: &str,
    auth: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Value) {
    app.admin(method, uri, auth, body).await
}

async fn every_route_needs_the_token(store: Arc<dyn Store>) {
    let routes = [
        ("GET", "/admin/conversations"),
        ("GET", "/admin/conversations/34600111222"),
        ("POST", "/admin/conversations/34600111222/reset"),
        ("POST", "/admin/conversations/34600111222/handoff"),
        ("POST", "/admin/conversations/34600111222/release"),
        ("POST", "/admin/conversations/34600111222/messages"),
        ("GET", "/admin/prompts"),
        ("POST", "/admin/prompts/reload"),
    ];
    let closed = app(store.clone(), None);
    for (method, uri) in routes {
        let (status, _) = call(&closed, method, uri, Some(&bearer()), None).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{method} {uri} without a token configured"
        );
    }
    let open = app(store, Some(TOKEN));
    for (method, uri) in routes {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Basic YWRtaW46eA=="),
            Some(TOKEN),
        ] {
            let (status, body) = call(&open, method, uri, auth, None).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} {auth:?}");
            assert_eq!(body["error"], "missing or wrong bearer token");
        }
    }
}

async fn a_stuck_conversation_is_found_shown_and_reset(store: Arc<dyn Store>) {
    let now = Utc::now();
    let stuck = WaId::parse("34600000101").unwrap();
    let busy = WaId::parse("34600000102").unwrap();
    let idle_primary = WaId::parse("34600000103").unwrap();
    let appointment = zaguan::domain::DialogState::entered("appointment_assistant");
    store
        .set_dialog_state(&stuck, &appointment, now - Duration::hours(3))
        .await
        .unwrap();
    store
        .set_dialog_state(&busy, &appointment, now - Duration::minutes(10))
        .await
        .unwrap();
    store
        .set_dialog_state(
            &idle_primary,
            &zaguan::domain::DialogState::primary(),
            now - Duration::hours(5),
        )
        .await
        .unwrap();
    for (i, (role, content)) in [
        (MessageRole::Human, "Quiero ver el piso"),
        (MessageRole::Ai, "¿Qué día?"),
    ]
    .into_iter()
    .enumerate()
    {
        store
            .append_message(NewMessage {
                wa_id: stuck.clone(),
                role,
                content: content.into(),
                agent: (role == MessageRole::Ai).then(|| "appointment_assistant".into()),
                tool_calls: Vec::new(),
                tool_call_id: None,
                wamids: Vec::new(),
                attachments: Vec::new(),
                at: now - Duration::hours(3) + Duration::seconds(i as i64),
            })
            .await
            .unwrap();
    }
    let app = app(store.clone(), Some(TOKEN));
    let auth = bearer();

    let (status, body) = call(
        &app,
        "GET",
        "/admin/conversations?state=appointment_assistant&idle_for=2h",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["conversations"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{body}");
    assert_eq!(listed[0]["wa_id"], "34600000101");
    assert_eq!(
        listed[0]["dialog_state"],
        serde_json::json!(["appointment_assistant"])
    );
    assert!(listed[0]["idle_seconds"].as_i64().unwrap() >= 3 * 3600 - 5);

    // In any assistant: the older conversation back with the primary one does not take the
    // only place on the page.
    let (status, body) = call(
        &app,
        "GET",
        "/admin/conversations?idle_for=2h&in_assistant=true&limit=1",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["conversations"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{body}");
    assert_eq!(listed[0]["wa_id"], "34600000101");

    let (_, body) = call(
        &app,
        "GET",
        "/admin/conversations?state=appointment_assistant",
        Some(&auth),
        None,
    )
    .await;
    let ids: Vec<&str> = body["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["wa_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["34600000101", "34600000102"], "longest idle first");
    let (_, body) = call(
        &app,
        "GET",
        "/admin/conversations?limit=2&page=2",
        Some(&auth),
        None,
    )
    .await;
    let ids: Vec<&str> = body["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["wa_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["34600000102"], "page 2 of all three by idleness");
    let (status, body) = call(
        &app,
        "GET",
        "/admin/conversations?idle_for=soon",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, body) = call(
        &app,
        "GET",
        "/admin/conversations/34600000101",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["conversation"]["dialog_state"],
        serde_json::json!(["appointment_assistant"])
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        (messages[1]["role"].as_str(), messages[1]["agent"].as_str()),
        (Some("ai"), Some("appointment_assistant"))
    );
    let (status, _) = call(
        &app,
        "GET",
        "/admin/conversations/34600999999",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, body) = call(
        &app,
        "POST",
        "/admin/conversations/34600000101/reset",
        Some(&common::operator_token(&app, "lucia").await),
        Some(r#"{"operator": "someone else"}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["reset_by"], "lucia");
    let conversation = store.conversation(&stuck).await.unwrap().unwrap();
    assert!(conversation.dialog_state.is_primary());
    assert_eq!(conversation.reset_by.as_deref(), Some("lucia"));
    assert_eq!(
        store.recent_messages(&stuck, 10).await.unwrap().len(),
        2,
        "history kept"
    );
    let (_, body) = call(
        &app,
        "GET",
        "/admin/conversations?state=appointment_assistant",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(
        body["conversations"].as_array().unwrap().len(),
        1,
        "only the busy one left"
    );
    let (status, _) = call(
        &app,
        "POST",
        "/admin/conversations/34600999999/reset",
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

crate::both_stores!(
    every_route_needs_the_token,
    a_stuck_conversation_is_found_shown_and_reset
);

/// `zaguan conversations list|show|reset` against the MongoDB an operator would point it at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_finds_shows_and_resets_a_stuck_conversation() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = db.store.clone();
    let now = Utc::now();
    let stuck = WaId::parse("34600000201").unwrap();
    store
        .set_dialog_state(
            &stuck,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            now - Duration::hours(3),
        )
        .await
        .unwrap();
    store
        .set_dialog_state(
            &WaId::parse("34600000202").unwrap(),
            &zaguan::domain::DialogState::primary(),
            now - Duration::hours(4),
        )
        .await
        .unwrap();
    let database = store.database().name().to_owned();
    let zaguan = |args: &[&str]| {
        let output = cli_on(&database)
            .arg("conversations")
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let table = zaguan(&[
        "list",
        "--state",
        "appointment_assistant",
        "--idle-for",
        "2h",
    ]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("WA_ID") && lines[0].contains("STATE"),
        "{table}"
    );
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[1].starts_with("34600000201")
            && lines[1].contains("appointment_assistant")
            && lines[1].contains("3h"),
        "{table}"
    );
    let json: Value = serde_json::from_str(&zaguan(&["list", "--json"])).unwrap();
    assert_eq!(json["conversations"].as_array().unwrap().len(), 2);
    let shown = zaguan(&["show", "34600000201"]);
    assert!(
        shown.starts_with("34600000201  state: appointment_assistant"),
        "{shown}"
    );
    let reset = zaguan(&["reset", "34600000201", "--operator", "ana"]);
    assert!(reset.contains("reset by ana"), "{reset}");
    let conversation = store.conversation(&stuck).await.unwrap().unwrap();
    assert!(conversation.dialog_state.is_primary());
    assert_eq!(conversation.reset_by.as_deref(), Some("ana"));
    assert_eq!(
        zaguan(&["list", "--state", "appointment_assistant"]).trim(),
        "no conversation matches"
    );

    // Handoff: the customer wrote; an operator takes the conversation, answers, gives it back.
    store
        .insert_inbox(&[common::inbox_entry(
            "wamid.CLI1",
            &stuck,
            "¿Puedo hablar con alguien?",
            InboxStatus::Done,
        )])
        .await
        .unwrap();
    let taken = zaguan(&["take", "34600000201", "--operator", "ana", "--for", "30m"]);
    assert!(
        taken.starts_with("34600000201 taken by ana until"),
        "{taken}"
    );
    let table = zaguan(&["list", "--handoff", "active"]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("34600000201") && l.contains("ana until")),
        "{table}"
    );
    let replied = zaguan(&[
        "reply",
        "34600000201",
        "--operator",
        "ana",
        "Hola, soy **Ana**.",
    ]);
    assert_eq!(replied.trim(), "queued for 34600000201 in 1 message(s)");
    let queued = store.unsent_outbox(&stuck).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].body, "Hola, soy *Ana*.");
    assert_eq!(queued[0].phone_number_id.as_deref(), Some("109876543210"));
    let released = zaguan(&["release", "34600000201", "--operator", "ana"]);
    assert_eq!(released.trim(), "34600000201: back to the bot");
    assert_eq!(
        zaguan(&["list", "--handoff", "active"]).trim(),
        "no conversation matches"
    );
    db.drop().await;
}

/// The mongosh recipe of docs/operators.md, as the driver sends it: the `find` finds the
/// conversation stuck in appointments for 3 hours and only it; the `updateOne` leaves it exactly
/// as `zaguan conversations reset` would (the engine then routes to the primary).
#[tokio::test]
async fn the_documented_mongosh_recipe_finds_and_resets_a_stuck_conversation() {
    use mongodb::bson::{Document, doc};
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = db.store.clone();
    let now = Utc::now();
    let stuck = WaId::parse("34600111222").unwrap();
    let appointment = zaguan::domain::DialogState::entered("appointment_assistant");
    store
        .set_dialog_state(&stuck, &appointment, now - Duration::hours(3))
        .await
        .unwrap();
    store
        .set_dialog_state(
            &WaId::parse("34600111223").unwrap(),
            &appointment,
            now - Duration::minutes(5),
        )
        .await
        .unwrap();
    let conversations = store.database().collection::<Document>("conversations");
    let two_hours_ago =
        mongodb::bson::DateTime::from_millis((now - Duration::hours(2)).timestamp_millis());
    let found: Vec<Document> = futures::TryStreamExt::try_collect(
        conversations
            .find(doc! {"dialog_state": "appointment_assistant",
            "updated_at": {"$lt": two_hours_ago}})
            .projection(
                doc! {"dialog_state": 1, "updated_at": 1, "last_inbound_at": 1,
                "pending_action": 1},
            )
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let ids: Vec<&str> = found.iter().map(|d| d.get_str("_id").unwrap()).collect();
    assert_eq!(ids, ["34600111222"]);

    let at = mongodb::bson::DateTime::now();
    conversations
        .update_one(
            doc! {"_id": "34600111222"},
            doc! {"$set": {"dialog_state": [], "state_entered_at": at, "updated_at": at,
                     "reset_by": "lucia", "reset_at": at},
            "$unset": {"pending_action": ""}},
        )
        .await
        .unwrap();
    let conversation = store.conversation(&stuck).await.unwrap().unwrap();
    assert!(conversation.dialog_state.is_primary());
    assert_eq!(conversation.reset_by.as_deref(), Some("lucia"));
    assert!(conversation.pending_action.is_none());
    db.drop().await;
}

/// `zaguan users forget` against FerretDB: refused while a turn holds the conversation, then
/// deletes the contact's documents and reports the business records it keeps.
#[tokio::test]
async fn the_cli_forgets_a_user_on_mongodb() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = db.store.clone();
    let now = Utc::now();
    let wa_id = WaId::parse("34600000301").unwrap();
    store
        .set_dialog_state(
            &wa_id,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            now,
        )
        .await
        .unwrap();
    store
        .append_message(zaguan::store::NewMessage {
            wa_id: wa_id.clone(),
            role: zaguan::domain::MessageRole::Human,
            content: "Soy Ana, mi DNI es 12345678Z".into(),
            agent: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            wamids: Vec::new(),
            attachments: Vec::new(),
            at: now,
        })
        .await
        .unwrap();
    // A business record: kept, and counted in the output.
    let realestate = zaguan::realestate::MongoRealEstate::new(store.pool().clone());
    use zaguan::realestate::OfferStore as _;
    realestate
        .upsert_offers(&[zaguan::realestate::Offer {
            id: "F-301".into(),
            property_id: "P-001".into(),
            wa_id: wa_id.clone(),
            amount: 250_000,
            currency: "EUR".into(),
            conditions: None,
            status: zaguan::realestate::OfferStatus::Submitted,
            created_at: now,
            answer: Default::default(),
        }])
        .await
        .unwrap();
    assert!(
        store
            .claim_conversation(&wa_id, "worker-1", now, now + Duration::seconds(30), &[])
            .await
            .unwrap()
    );
    let database = store.database().name().to_owned();
    let zaguan = |args: &[&str]| {
        cli_on(&database)
            .args(["users", "forget"])
            .args(args)
            .output()
            .unwrap()
    };
    let refused = zaguan(&["34600000301"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("being answered right now"), "{stderr}");
    assert_eq!(store.recent_messages(&wa_id, 10).await.unwrap().len(), 1);

    store
        .release_conversation(&wa_id, "worker-1")
        .await
        .unwrap();
    let done = zaguan(&["34600000301", "--json"]);
    assert!(done.status.success(), "{done:?}");
    let json: Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(json["deleted"]["messages"], 1);
    assert_eq!(json["deleted"]["conversations"], 1);
    assert_eq!(json["kept"]["appointments"], 0);
    assert_eq!(json["kept"]["offers"], 1);
    assert_eq!(realestate.offers_of(&wa_id).await.unwrap().len(), 1, "kept");
    assert!(store.recent_messages(&wa_id, 10).await.unwrap().is_empty());
    assert!(store.conversation(&wa_id).await.unwrap().is_none());
    let again: Value = serde_json::from_slice(&zaguan(&["34600000301", "--json"]).stdout).unwrap();
    assert_eq!(again["deleted"]["messages"], 0, "nothing left to forget");
    assert!(!zaguan(&[""]).status.success(), "an empty key is refused");
    db.drop().await;
}

/// `POST /admin/users/{wa_id}/role`: recorded with who and when; the business data no longer
/// moves it; `auto` hands it back; bad input is a 400 and changes nothing.
async fn an_admin_sets_a_role_through_the_api(store: Arc<dyn Store>) {
    let app = TestApp::with_store(store.clone()).with_admin(Some(common::ADMIN_TOKEN));
    let auth = common::bearer();
    let wa_id = WaId::parse("34600111999").unwrap();
    let uri = "/admin/users/34600111999/role";
    let (status, _) = app
        .admin("POST", uri, None, Some(r#"{"role": "owner"}"#))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A viewer reads the console only; the API refuses them whatever they ask.
    let (_, viewer) = app.operator("pablo", OperatorRole::Viewer).await;
    let (status, _) = app
        .admin("POST", uri, Some(&viewer), Some(r#"{"role": "owner"}"#))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(store.user(&wa_id).await.unwrap().is_none(), "nothing set");
    // Nor an operator: a number made an agent would see every customer's appointments.
    let (_, luis) = app.operator("luis", OperatorRole::Operator).await;
    let (status, _) = app
        .admin("POST", uri, Some(&luis), Some(r#"{"role": "agent"}"#))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(store.user(&wa_id).await.unwrap().is_none(), "nothing set");
    // The record names the token's admin, never a name typed in the body.
    let (_, ana) = app.operator("ana", OperatorRole::Admin).await;
    let (status, body) = app
        .admin(
            "POST",
            uri,
            Some(&ana),
            Some(r#"{"role": "owner", "operator": "Someone Else"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["role"], "owner");
    assert_eq!(body["source"], "operator");
    assert_eq!(body["set_by"], "ana");
    let user = store.user(&wa_id).await.unwrap().unwrap();
    assert_eq!(user.role, zaguan::domain::Role::Owner);
    assert_eq!(user.role_set_by.as_deref(), Some("ana"));
    assert!(user.role_set_at.is_some());
    assert!(!user.role_follows_data());
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(conversation.role, Some(zaguan::domain::Role::Owner));

    for bad in [r#"{"role": "admin"}"#, r#"{}"#, "not json"] {
        let (status, body) = app.admin("POST", uri, Some(&auth), Some(bad)).await;
        assert!(status.is_client_error(), "{bad}: {status} {body}");
    }
    let long = format!("/admin/users/{}/role", "3".repeat(300));
    let (status, _) = app
        .admin("POST", &long, Some(&auth), Some(r#"{"role": "agent"}"#))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        store.user(&wa_id).await.unwrap().unwrap().role,
        zaguan::domain::Role::Owner,
        "unchanged by bad requests"
    );

    let (status, body) = app
        .admin("POST", uri, Some(&auth), Some(r#"{"role": "auto"}"#))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["role"].as_str(), body["source"].as_str()),
        (Some("prospect"), Some("data"))
    );
    assert!(
        store
            .user(&wa_id)
            .await
            .unwrap()
            .unwrap()
            .role_follows_data()
    );
}

#[tokio::test]
async fn memory_an_admin_sets_a_role_through_the_api() {
    an_admin_sets_a_role_through_the_api(Arc::new(zaguan::store::MemoryStore::new())).await;
}

#[tokio::test]
async fn mongo_an_admin_sets_a_role_through_the_api() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    an_admin_sets_a_role_through_the_api(Arc::new(db.store.clone())).await;
    db.drop().await;
}

/// `zaguan users set-role` against FerretDB.
#[tokio::test]
async fn the_cli_sets_a_role_on_mongodb() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let database = db.store.database().name().to_owned();
    let zaguan = |args: &[&str]| {
        cli_on(&database)
            .args(["users", "set-role"])
            .args(args)
            .output()
            .unwrap()
    };
    let done = zaguan(&["34600000302", "agent", "--operator", "Luis"]);
    assert!(done.status.success(), "{done:?}");
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        stdout.starts_with("34600000302: role agent (operator, set by Luis at "),
        "{stdout}"
    );
    let wa_id = WaId::parse("34600000302").unwrap();
    let user = db.store.user(&wa_id).await.unwrap().unwrap();
    assert_eq!(user.role, zaguan::domain::Role::Agent);
    assert_eq!(user.role_set_by.as_deref(), Some("Luis"));
    let conversation = db.store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(conversation.role, Some(zaguan::domain::Role::Agent));
    assert!(
        !zaguan(&["34600000302", "boss", "--operator", "Luis"])
            .status
            .success()
    );
    assert!(
        !zaguan(&["34600000302", "owner"]).status.success(),
        "--operator is required"
    );
    db.drop().await;
}

/// A listing as staff write it, under `id`.
fn listing_json(id: &str, price: u64) -> Value {
    json!({
        "id": id, "title": "Piso reformado con balcón", "description": "Luminoso, exterior.",
        "operation": "sale", "kind": "flat", "city": "Valencia", "neighbourhood": "Ruzafa",
        "address": "Calle de Cádiz 20, 3º B", "location": {"lat": 39.4623, "lon": -0.3712},
        "price": price, "currency": "EUR", "bedrooms": 3, "bathrooms": 1, "area_m2": 85,
        "amenities": ["ascensor"], "status": "available", "owner_id": "O-01",
        "photos": ["https://media.example.es/P-7001/1-salon.jpg"]
    })
}

/// `POST /admin/listings` and `PATCH /admin/listings/{id}`: the token, a bad batch that writes
/// nothing (400), an id taken (400), an unknown listing (404), a lower price noted as news.
async fn staff_add_and_update_listings_through_the_api(
    realestate: Arc<dyn zaguan::realestate::RealEstateStore>,
) {
    let app = TestApp::memory()
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_realestate(realestate.clone()));
    let auth = common::bearer();
    let body = json!([
        listing_json("P-7001", 240_000),
        listing_json("P-7002", 310_000)
    ])
    .to_string();
    let (status, _) = app
        .admin("POST", "/admin/listings", None, Some(&body))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let bad = json!([listing_json("P-7001", 240_000), {"id": "P-7003"}]).to_string();
    let (status, answer) = app
        .admin("POST", "/admin/listings", Some(&auth), Some(&bad))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("item 2 (P-7003)"),
        "{answer}"
    );
    assert!(
        realestate.property("P-7001").await.unwrap().is_none(),
        "nothing written"
    );
    let (status, answer) = app
        .admin("POST", "/admin/listings", Some(&auth), Some("not json"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");

    let (status, answer) = app
        .admin("POST", "/admin/listings", Some(&auth), Some(&body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["added"], json!(["P-7001", "P-7002"]));
    let stored = realestate.property("P-7001").await.unwrap().unwrap();
    assert_eq!(stored.photos.len(), 1);
    let (status, _) = app
        .admin("POST", "/admin/listings", Some(&auth), Some(&body))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an id taken");

    let (status, answer) = app
        .admin(
            "PATCH",
            "/admin/listings/P-7002",
            Some(&auth),
            Some(r#"{"price": 295000}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["price_drops"], json!(["P-7002"]));
    let cheaper = realestate.property("P-7002").await.unwrap().unwrap();
    assert_eq!(cheaper.price, 295_000);
    assert!(cheaper.price_dropped_at.is_some());
    assert_eq!(cheaper.title, "Piso reformado con balcón", "the rest kept");
    let (status, _) = app
        .admin(
            "PATCH",
            "/admin/listings/P-7002",
            Some(&auth),
            Some(r#"{"id": "P-7001"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an id cannot change");
    let (status, _) = app
        .admin(
            "PATCH",
            "/admin/listings/P-7002",
            Some(&auth),
            Some(r#"{"photos": ["http://x/1.jpg"]}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "photos are https");
    let (status, _) = app
        .admin(
            "PATCH",
            "/admin/listings/P-0404",
            Some(&auth),
            Some(r#"{"price": 1}"#),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn memory_staff_add_and_update_listings_through_the_api() {
    staff_add_and_update_listings_through_the_api(Arc::new(
        zaguan::realestate::MemoryRealEstate::new(),
    ))
    .await;
}

#[tokio::test]
async fn mongo_staff_add_and_update_listings_through_the_api() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(zaguan::realestate::MongoRealEstate::new(
        db.store.pool().clone(),
    ));
    staff_add_and_update_listings_through_the_api(realestate).await;
    db.drop().await;
}

/// `zaguan listings add|update FILE` on MongoDB: a bad file exits non-zero, says why and writes
/// nothing; a good one is stored and summed up.
#[tokio::test]
async fn the_cli_adds_and_updates_listings_on_mongodb() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    use zaguan::realestate::PropertyStore as _;
    let database = db.store.database().name().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let zaguan = |args: &[&str], content: &str| {
        let file = dir.path().join("listings.json");
        std::fs::write(&file, content).unwrap();
        cli_on(&database)
            .arg("listings")
            .args(args)
            .arg(&file)
            .output()
            .unwrap()
    };
    let bad = zaguan(
        &["add"],
        &json!([listing_json("P-7101", 200_000), listing_json("P-7102", 0)]).to_string(),
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("P-7102") && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert!(realestate.property("P-7101").await.unwrap().is_none());

    let added = zaguan(&["add"], &listing_json("P-7101", 200_000).to_string());
    assert!(added.status.success(), "{added:?}");
    let stdout = String::from_utf8_lossy(&added.stdout);
    assert!(stdout.contains("1 added (P-7101)"), "{stdout}");
    let updated = zaguan(&["update"], r#"[{"id": "P-7101", "price": 190000}]"#);
    assert!(updated.status.success(), "{updated:?}");
    assert!(String::from_utf8_lossy(&updated.stdout).contains("1 cheaper"));
    let stored = realestate.property("P-7101").await.unwrap().unwrap();
    assert_eq!(stored.price, 190_000);
    assert!(stored.price_dropped_at.is_some());
    db.drop().await;
}

/// `zaguan events list --failed`, `zaguan events retry --failed` and `zaguan export` on
/// MongoDB, as an operator runs them.
#[tokio::test]
async fn the_cli_lists_and_retries_failed_events_and_exports_on_mongodb() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = db.store.clone();
    let wa_id = WaId::parse("34600000401").unwrap();
    let failed = zaguan::store::Event::new(
        &wa_id,
        zaguan::store::BusinessEvent::HandoffRequested {
            reason: "Quiere una persona".into(),
        },
        Utc::now(),
    );
    store
        .insert_events(std::slice::from_ref(&failed))
        .await
        .unwrap();
    store
        .settle_event(
            &failed.id,
            &zaguan::store::EventUpdate::Failed {
                error: "crm.example.es: HTTP 400: unknown field".into(),
            },
        )
        .await
        .unwrap();
    let realestate = zaguan::realestate::MongoRealEstate::new(store.pool().clone());
    use zaguan::realestate::OfferStore as _;
    realestate
        .upsert_offers(&[zaguan::realestate::Offer {
            id: "F-401".into(),
            property_id: "P-1001".into(),
            wa_id: wa_id.clone(),
            amount: 231_000,
            currency: "EUR".into(),
            conditions: Some("con hipoteca, entrega en marzo".into()),
            status: zaguan::realestate::OfferStatus::Submitted,
            created_at: Utc::now(),
            answer: Default::default(),
        }])
        .await
        .unwrap();
    let database = store.database().name().to_owned();
    let zaguan = |args: &[&str]| cli_on(&database).args(args).output().unwrap();
    let listed = zaguan(&["events", "list", "--failed"]);
    assert!(listed.status.success(), "{listed:?}");
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.contains(&failed.id) && stdout.contains("HTTP 400"),
        "{stdout}"
    );
    let retried = zaguan(&["events", "retry", "--failed"]);
    assert!(retried.status.success(), "{retried:?}");
    assert!(String::from_utf8_lossy(&retried.stdout).contains("1 event(s) queued again"));
    let listed = zaguan(&["events", "list", "--failed"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("no events"));
    assert!(
        !zaguan(&["events", "retry", "nope"]).status.success(),
        "an unknown id"
    );

    let exported = zaguan(&["export", "offers", "--since", "1h", "--bom"]);
    assert!(exported.status.success(), "{exported:?}");
    let csv = String::from_utf8(exported.stdout).unwrap();
    assert_eq!(
        csv.trim_start_matches('\u{feff}')
            .lines()
            .collect::<Vec<_>>()[0],
        "id,created_at,wa_id,property_id,amount,currency,conditions,status"
    );
    assert!(
        csv.contains("F-401,") && csv.contains("\"con hipoteca, entrega en marzo\""),
        "{csv}"
    );
    let jsonl = zaguan(&["export", "offers", "--since", "1h", "--format", "jsonl"]);
    let line: Value =
        serde_json::from_slice(jsonl.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["amount"], 231_000);
    assert!(
        !zaguan(&["export", "offers", "--since", "soon"])
            .status
            .success()
    );
    db.drop().await;
}

/// `GET /admin/export/{kind}`: the token, a bad `since`, an unknown kind, CSV and JSON lines.
#[tokio::test]
async fn exports_through_the_api() {
    let realestate: Arc<dyn zaguan::realestate::RealEstateStore> =
        Arc::new(zaguan::realestate::MemoryRealEstate::new());
    let store: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let app = TestApp::with_store(store.clone())
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_realestate(realestate.clone()));
    let wa_id = WaId::parse("34600000402").unwrap();
    store
        .insert_events(&[zaguan::store::Event::new(
            &wa_id,
            zaguan::store::BusinessEvent::LeadCreated {
                name: Some("José Núñez".into()),
                assistant: "searcher_assistant".into(),
            },
            Utc::now(),
        )])
        .await
        .unwrap();
    let get = |uri: &str, auth: bool| {
        let mut request = axum::http::Request::get(uri);
        if auth {
            request = request.header("authorization", common::bearer());
        }
        app.request(request.body(axum::body::Body::empty()).unwrap())
    };
    assert_eq!(
        get("/admin/export/leads", false).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get("/admin/export/houses", true).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get("/admin/export/leads?since=ayer", true).await.0,
        StatusCode::BAD_REQUEST
    );
    let (status, csv) = get("/admin/export/leads?since=1h&bom=true", true).await;
    assert_eq!(status, StatusCode::OK);
    let rows: Vec<&str> = csv.trim_start_matches('\u{feff}').lines().collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(
        rows[1].contains("34600000402,José Núñez,searcher_assistant"),
        "{csv}"
    );
    let (_, jsonl) = get("/admin/export/leads?since=1h&format=jsonl", true).await;
    let line: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(line["name"], "José Núñez");
    let (_, empty) = get("/admin/export/offers?since=1h", true).await;
    assert_eq!(empty.lines().count(), 1, "a header only: {empty}");
}

/// `POST /admin/users/{wa_id}/forget` (what the console's forget button runs): the token, a
/// conversation being answered (409, nothing deleted), then everything of the contact.
#[tokio::test]
async fn a_user_is_forgotten_through_the_api() {
    let store: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let app = TestApp::with_store(store.clone()).with_admin(Some(common::ADMIN_TOKEN));
    let wa_id = WaId::parse("34600000403").unwrap();
    store
        .set_dialog_state(
            &wa_id,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    let uri = "/admin/users/34600000403/forget";
    assert_eq!(
        app.admin("POST", uri, None, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    let now = Utc::now();
    store.instance_beat("worker-1", "n1", true).await.unwrap();
    assert!(
        store
            .claim_conversation(
                &wa_id,
                "worker-1",
                now,
                now + Duration::seconds(30),
                &["worker-1".to_owned()]
            )
            .await
            .unwrap()
    );
    let (status, body) = app.admin("POST", uri, Some(&common::bearer()), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(store.conversation(&wa_id).await.unwrap().is_some());
    store
        .release_conversation(&wa_id, "worker-1")
        .await
        .unwrap();
    let (status, body) = app.admin("POST", uri, Some(&common::bearer()), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deleted"]["conversations"], 1);
    assert!(store.conversation(&wa_id).await.unwrap().is_none());
}

/// A deployment behind a proxy at 10.0.0.0/8 that names the client in `X-Forwarded-For`.
fn behind_a_proxy() -> zaguan::config::Config {
    zaguan::config::Config::from_vars(
        [
            (
                "ZAGUAN_CLIENT_IP_HEADER".to_owned(),
                "X-Forwarded-For".to_owned(),
            ),
            ("ZAGUAN_TRUSTED_PROXIES".to_owned(), "10.0.0.0/8".to_owned()),
        ]
        .into(),
    )
    .unwrap()
}

/// `request` as the proxy (or, with `peer`, whoever it is) hands it over.
fn through(
    mut request: axum::http::Request<axum::body::Body>,
    peer: &str,
) -> axum::http::Request<axum::body::Body> {
    let at: std::net::SocketAddr = peer.parse().unwrap();
    request
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(at));
    request
}

/// Ten wrong passwords for one operator from one address lock neither another operator from that
/// address nor the same operator from another address (behind a proxy that names the client
/// in `X-Forwarded-For`).
#[tokio::test]
async fn failed_sign_ins_lock_out_only_their_account_from_their_address() {
    let config = behind_a_proxy();
    let app = app(Arc::new(zaguan::store::MemoryStore::new()), Some(TOKEN))
        .with_state(|state| state.with_config(config));
    let (marta, _) = app.operator("marta", OperatorRole::Operator).await;
    let (lucia, _) = app.operator("lucia", OperatorRole::Viewer).await;
    let sign_in = async |from: &str, operator: &str, password: &str| {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("operator", operator)
            .append_pair("password", password)
            .finish();
        let request = axum::http::Request::post("/console/sign-in")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-forwarded-for", format!("10.1.2.3, {from}"))
            .body(axum::body::Body::from(body))
            .unwrap();
        app.request(through(request, "10.0.0.2:40000")).await.0
    };
    for _ in 0..10 {
        let status = sign_in("203.0.113.70", "marta", "not-her-password").await;
        assert!(
            matches!(
                status,
                StatusCode::UNAUTHORIZED | StatusCode::TOO_MANY_REQUESTS
            ),
            "{status}"
        );
    }
    assert_eq!(
        sign_in("203.0.113.70", "marta", &marta.password).await,
        StatusCode::TOO_MANY_REQUESTS,
        "that account from that address waits"
    );
    assert_eq!(
        sign_in("203.0.113.70", "lucia", &lucia.password).await,
        StatusCode::SEE_OTHER,
        "another account from the same address signs in"
    );
    assert_eq!(
        sign_in("198.51.100.70", "Marta", &marta.password).await,
        StatusCode::SEE_OTHER,
        "the same account from another address signs in"
    );
}

/// Wrong bearer tokens are limited per client address: the address that sent them waits (429,
/// even with the right token, for a minute); another address is answered.
#[tokio::test]
async fn wrong_bearer_tokens_slow_down_only_their_address() {
    let config = behind_a_proxy();
    let app = app(Arc::new(zaguan::store::MemoryStore::new()), Some(TOKEN))
        .with_state(|state| state.with_config(config));
    let list = async |from: &str, token: &str| {
        let request = axum::http::Request::get("/admin/conversations")
            .header("authorization", format!("Bearer {token}"))
            .header("x-forwarded-for", from)
            .body(axum::body::Body::empty())
            .unwrap();
        app.request(through(request, "10.0.0.2:40000")).await.0
    };
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(list("203.0.113.80", "guess").await);
    }
    assert_eq!(statuses[..5], [StatusCode::UNAUTHORIZED; 5], "{statuses:?}");
    assert_eq!(
        statuses[5..],
        [StatusCode::TOO_MANY_REQUESTS; 3],
        "{statuses:?}"
    );
    assert_eq!(
        list("203.0.113.80", TOKEN).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(list("198.51.100.80", TOKEN).await, StatusCode::OK);
    // A client reaching the port directly cannot pick its address with the header.
    let direct = async |forged: &str, token: &str| {
        let request = axum::http::Request::get("/admin/conversations")
            .header("authorization", format!("Bearer {token}"))
            .header("x-forwarded-for", forged)
            .body(axum::body::Body::empty())
            .unwrap();
        app.request(through(request, "198.51.100.81:5000")).await.0
    };
    for n in 0..8 {
        direct(&format!("192.0.2.{n}"), "guess").await;
    }
    assert_eq!(
        direct("192.0.2.200", TOKEN).await,
        StatusCode::TOO_MANY_REQUESTS,
        "a forged header rotates nothing"
    );
}

/// Failed sign-ins are kept in the store: an address that failed on one instance waits on the
/// other too, and the count expires after a minute.
async fn failed_sign_ins_are_counted_by_every_instance(
    team: Arc<dyn zaguan::admin::team::TeamStore>,
) {
    let state =
        |state: zaguan::app::AppState| state.with_config(behind_a_proxy()).with_team(team.clone());
    let first = app(Arc::new(zaguan::store::MemoryStore::new()), Some(TOKEN)).with_state(state);
    let second = app(Arc::new(zaguan::store::MemoryStore::new()), Some(TOKEN)).with_state(state);
    let list = async |app: &TestApp, token: &str| {
        let request = axum::http::Request::get("/admin/conversations")
            .header("authorization", format!("Bearer {token}"))
            .header("x-forwarded-for", "203.0.113.90")
            .body(axum::body::Body::empty())
            .unwrap();
        app.request(through(request, "10.0.0.2:40000")).await.0
    };
    for _ in 0..5 {
        assert_eq!(list(&first, "guess").await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        list(&second, TOKEN).await,
        StatusCode::TOO_MANY_REQUESTS,
        "the other instance counts the same failures"
    );
}

#[tokio::test]
async fn memory_failed_sign_ins_are_counted_by_every_instance() {
    failed_sign_ins_are_counted_by_every_instance(Arc::new(
        zaguan::admin::team::MemoryTeam::default(),
    ))
    .await;
}

#[tokio::test]
async fn mongo_failed_sign_ins_are_counted_by_every_instance() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let team = zaguan::admin::team::MongoTeam::new(db.store.pool().clone());
    team.ensure_indexes().await.unwrap();
    failed_sign_ins_are_counted_by_every_instance(Arc::new(team)).await;
    db.drop().await;
}
