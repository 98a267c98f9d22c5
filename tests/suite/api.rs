//! The HTTP contract of the README's endpoint table for `/webhook`, `/healthz`, `/readyz` and
//! `/metrics`, through the real router, with the in-memory store and with MongoDB.

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{TestApp, TestMongo, cloud_api_fixture, text_notification};
use futures::StreamExt;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::store::{MemoryStore, NewOutbox, OutboxStatus, Store};
use zaguan::webhook::signature;

fn wamid(id: &str) -> WaMessageId {
    WaMessageId::parse(id).unwrap()
}

async fn inbox_len(store: &dyn Store) -> usize {
    store.pending_inbox(100_000).await.unwrap().len()
}

// ---- GET /webhook -------------------------------------------------------------------------

#[tokio::test]
async fn the_handshake_echoes_the_challenge_for_the_right_token() {
    let app = TestApp::memory();
    let (status, body) = app
        .get("/webhook?hub.mode=subscribe&hub.verify_token=test-verify-token&hub.challenge=1158201444")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "1158201444");
}

#[tokio::test]
async fn the_handshake_is_refused_otherwise() {
    let app = TestApp::memory();
    for uri in [
        "/webhook?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1",
        "/webhook?hub.mode=unsubscribe&hub.verify_token=test-verify-token&hub.challenge=1",
        "/webhook?hub.verify_token=test-verify-token&hub.challenge=1",
        "/webhook",
    ] {
        assert_eq!(app.get(uri).await.0, StatusCode::FORBIDDEN, "{uri}");
    }
    let unconfigured = TestApp::configured(Arc::new(MemoryStore::new()), None, None);
    let (status, _) = unconfigured
        .get("/webhook?hub.mode=subscribe&hub.verify_token=&hub.challenge=1")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

// ---- POST /webhook: refusals store nothing -----------------------------------------------

#[tokio::test]
async fn an_unsigned_or_badly_signed_post_is_401_and_stores_nothing() {
    let app = TestApp::memory();
    let body = text_notification(&[("wamid.S1", "34600111222", "hola")]);
    let wrong_key = signature::sign(b"not-the-secret", &body);
    let other_body = signature::sign(common::APP_SECRET.as_bytes(), b"{}");
    for header in [
        None,
        Some(wrong_key.as_str()),
        Some(other_body.as_str()),
        Some("sha256="),
    ] {
        let status = app.post_webhook_with(body.clone(), header).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{header:?}");
    }
    assert_eq!(inbox_len(app.store.as_ref()).await, 0);
    assert!(
        app.store
            .user(&WaId::parse("34600111222").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn without_an_app_secret_every_post_is_401() {
    let app = TestApp::configured(Arc::new(MemoryStore::new()), None, None);
    let body = text_notification(&[("wamid.S2", "34600111222", "hola")]);
    let signed = signature::sign(common::APP_SECRET.as_bytes(), &body);
    assert_eq!(
        app.post_webhook_with(body, Some(&signed)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(inbox_len(app.store.as_ref()).await, 0);
}

#[tokio::test]
async fn a_body_over_4_mib_is_413_and_stores_nothing() {
    let app = TestApp::memory();
    // A valid notification padded past the limit, correctly signed.
    let body = text_notification(&[("wamid.BIG", "34600111222", &"a".repeat(4 * 1024 * 1024))]);
    assert!(body.len() > zaguan::webhook::MAX_BODY_BYTES);
    assert_eq!(app.post_webhook(body).await, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(inbox_len(app.store.as_ref()).await, 0);
}

#[tokio::test]
async fn a_body_just_under_the_limit_is_accepted() {
    let app = TestApp::memory();
    let text = "é".repeat(1_500_000); // 3 MB of two-byte characters, like Meta's largest bodies
    let body = text_notification(&[("wamid.3MB", "34600111222", &text)]);
    assert!(body.len() > 3_000_000 && body.len() < zaguan::webhook::MAX_BODY_BYTES);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    let stored = app
        .store
        .inbox_entry(&wamid("wamid.3MB"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.text.unwrap().chars().count(), 1_500_000);
}

#[tokio::test]
async fn a_signed_body_that_is_not_json_is_400_and_stores_nothing() {
    let app = TestApp::memory();
    for body in [
        &b"not json"[..],
        b"",
        b"[1,2]",
        b"{\"entry\": 7}",
        b"\xff\xfe{}",
        br#"{"entry":[{"changes":[{"field":"messages","value":{"messages":[{"id":"wamid.X","from":"1"}]}}]}]}"#,
    ] {
        assert_eq!(
            app.post_webhook(body.to_vec()).await,
            StatusCode::BAD_REQUEST,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    assert_eq!(inbox_len(app.store.as_ref()).await, 0);
}

#[tokio::test]
async fn an_unreachable_store_answers_503_so_meta_retries() {
    let app = TestApp::with_store(Arc::new(common::unreachable_mongo().await));
    let body = text_notification(&[("wamid.DOWN", "34600111222", "hola")]);
    assert_eq!(
        app.post_webhook(body).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(app.get("/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
}

// ---- POST /webhook: accepted payloads --------------------------------------------------------

async fn a_message_is_in_the_inbox_before_the_200(app: TestApp) {
    let body = cloud_api_fixture("text");
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    let id = wamid("wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUI1RjZDRUJGRjM0RjYzQzZFNwA=");
    let entry = app.store.inbox_entry(&id).await.unwrap().unwrap();
    assert_eq!(entry.wa_id.as_str(), "34600111222");
    assert_eq!(entry.phone_number_id, "109876543210");
    assert_eq!(entry.kind, "text");
    assert_eq!(
        entry.text.as_deref(),
        Some(
            "Hola, ¿sigue disponible el ático de la calle Mayor? Me interesa verlo este sábado 🏠"
        )
    );
    let user = app.store.user(&entry.wa_id).await.unwrap().unwrap();
    assert_eq!(user.name.as_deref(), Some("María José Núñez"));
    let conversation = app.store.conversation(&entry.wa_id).await.unwrap().unwrap();
    // The 24-hour window opens when the user wrote, not when the webhook arrived.
    assert_eq!(
        conversation.last_inbound_at.map(|at| at.timestamp()),
        Some(1_764_100_800)
    );
}

/// Arrivals are stamped by the database's clock the heartbeat brought, not this host's: two
/// instances whose clocks disagree still order one conversation's messages as they came.
async fn arrivals_are_stamped_by_the_database_clock(app: TestApp) {
    // The database keeps milliseconds, as its own clock does.
    let behind =
        chrono::SubsecRound::trunc_subsecs(chrono::Utc::now() - chrono::Duration::hours(1), 3);
    app.state.clock.anchor(behind, std::time::Instant::now());
    let body = text_notification(&[("wamid.CLOCK", "34600111222", "¿Tiene terraza?")]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    let entry = app
        .store
        .inbox_entry(&wamid("wamid.CLOCK"))
        .await
        .unwrap()
        .unwrap();
    let lag = entry.received_at - behind;
    assert!(
        lag >= chrono::Duration::zero() && lag < chrono::Duration::seconds(30),
        "received_at {} is not the database's time {behind}",
        entry.received_at
    );
}

async fn the_same_payload_posted_5_times_concurrently_is_stored_once(app: TestApp) {
    let body = text_notification(&[("wamid.FIVE", "34600111222", "¿Hay parking?")]);
    let posts: Vec<_> = (0..5).map(|_| app.post_webhook(body.clone())).collect();
    for status in futures::future::join_all(posts).await {
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(inbox_len(app.store.as_ref()).await, 1);
}

async fn a_batch_of_1000_messages_leaves_1000_inbox_entries(app: TestApp) {
    let ids: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("wamid.K{i:04}"), format!("3460{:07}", i % 250)))
        .collect();
    let messages: Vec<(&str, &str, &str)> = ids
        .iter()
        .map(|(id, from)| (id.as_str(), from.as_str(), "Busco piso en Sevilla"))
        .collect();
    assert_eq!(
        app.post_webhook(text_notification(&messages)).await,
        StatusCode::OK
    );
    assert_eq!(inbox_len(app.store.as_ref()).await, 1000);
    // 250 distinct senders, each with a user and a conversation.
    assert!(
        app.store
            .user(&WaId::parse("34600000249").unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

async fn a_signature_over_accents_and_emoji_verifies(app: TestApp) {
    let text = "¡Hola! ¿El dúplex de Cádiz tiene ascensor? Mañana no puedo 😅🏖️ — gracias";
    let body = text_notification(&[("wamid.EMOJI", "34600111222", text)]);
    assert!(!body.is_ascii());
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    let entry = app
        .store
        .inbox_entry(&wamid("wamid.EMOJI"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.text.as_deref(), Some(text));
}

async fn statuses_update_the_outbox_and_unknown_ones_are_ignored(app: TestApp) {
    let id = app
        .store
        .insert_outbox(&[NewOutbox::text(
            WaId::parse("34600111222").unwrap(),
            None,
            "Te esperamos el sábado",
            chrono::Utc::now(),
        )])
        .await
        .unwrap()
        .remove(0);
    let out = wamid("wamid.HBgLMzQ2MDAxMTEyMjIVAgARGBJBQkNERUYwMTIzNDU2Nzg5AA==");
    app.store.mark_outbox_sent(&id, &out).await.unwrap();
    assert_eq!(
        app.post_webhook(cloud_api_fixture("status_delivered"))
            .await,
        StatusCode::OK
    );
    let entry = app.store.outbox_by_wamid(&out).await.unwrap().unwrap();
    assert_eq!(entry.status, OutboxStatus::Delivered);

    let unknown = String::from_utf8(cloud_api_fixture("status_read"))
        .unwrap()
        .replace(out.as_str(), "wamid.SOMEONE_ELSES");
    assert_eq!(app.post_webhook(unknown).await, StatusCode::OK);
    let entry = app.store.outbox_by_wamid(&out).await.unwrap().unwrap();
    assert_eq!(entry.status, OutboxStatus::Delivered);

    // A part handed to the Graph API whose answer was never recorded: its status names it by
    // the callback data it was sent with, and records it sent.
    let unrecorded = app
        .store
        .insert_outbox(&[NewOutbox::text(
            WaId::parse("34600111222").unwrap(),
            None,
            "¿Te viene bien a las 10:00?",
            chrono::Utc::now(),
        )])
        .await
        .unwrap()
        .remove(0);
    let sending = zaguan::store::OutboxUpdate::Sending {
        at: chrono::Utc::now(),
        resend_at: chrono::Utc::now() + chrono::Duration::seconds(30),
    };
    app.store
        .update_outbox(&unrecorded, &sending)
        .await
        .unwrap();
    let mut body: serde_json::Value =
        serde_json::from_slice(&cloud_api_fixture("status_delivered")).unwrap();
    let status = &mut body["entry"][0]["changes"][0]["value"]["statuses"][0];
    status["id"] = "wamid.UNRECORDED".into();
    status["biz_opaque_callback_data"] = unrecorded.callback_data().into();
    assert_eq!(
        app.post_webhook(serde_json::to_vec(&body).unwrap()).await,
        StatusCode::OK
    );
    let entry = app
        .store
        .outbox_by_wamid(&wamid("wamid.UNRECORDED"))
        .await
        .unwrap()
        .expect("the part took the status's wamid");
    assert_eq!(entry.id, unrecorded);
    assert_eq!(entry.status, OutboxStatus::Delivered);
}

async fn every_fixture_is_acknowledged(app: TestApp) {
    let all: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(include_str!("../fixtures/cloud_api.json")).unwrap();
    for name in all.keys() {
        assert_eq!(
            app.post_webhook(cloud_api_fixture(name)).await,
            StatusCode::OK,
            "{name}"
        );
    }
    // Every message-bearing fixture stored its message(s); the batch alone holds four.
    let pending = app.store.pending_inbox(1000).await.unwrap();
    assert!(
        pending.iter().any(|e| e.kind == "hologram"),
        "unknown types are kept"
    );
    assert!(
        pending
            .iter()
            .any(|e| e.wa_id.as_str() == "ES.9988776655443322")
    );
    for id in [
        "wamid.BATCH1",
        "wamid.BATCH2",
        "wamid.BATCH3",
        "wamid.BATCH4",
    ] {
        assert!(
            app.store.inbox_entry(&wamid(id)).await.unwrap().is_some(),
            "{id}"
        );
    }
}

async fn non_message_updates_are_acknowledged_and_store_nothing(app: TestApp) {
    let body = br#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[
        {"field":"account_update","value":{"event":"ACCOUNT_DELETED"}},
        {"field":"message_template_status_update","value":{"event":"APPROVED","message_template_id":1}},
        {"field":"brand_new_field","value":[1,2,3]}]}]}"#;
    assert_eq!(app.post_webhook(body.to_vec()).await, StatusCode::OK);
    assert_eq!(inbox_len(app.store.as_ref()).await, 0);
}

async fn an_unreadable_message_is_kept_for_operators_and_the_rest_stored(app: TestApp) {
    let body = br#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
        "metadata":{"phone_number_id":"2"},
        "messages":[
            {"from":"34600111222","id":"wamid.GOOD","timestamp":"1","type":"text","text":{"body":"hola"}},
            {"from":"34600111222","id":"wamid.BAD","timestamp":"1","type":"text","text":{"body":42}}
        ]}}]}]}"#;
    assert_eq!(app.post_webhook(body.to_vec()).await, StatusCode::OK);
    assert!(
        app.store
            .inbox_entry(&wamid("wamid.GOOD"))
            .await
            .unwrap()
            .is_some()
    );
    let rejected = app.store.rejected(10).await.unwrap();
    assert_eq!(rejected.len(), 1);
    assert!(rejected[0].raw.contains("wamid.BAD"));
}

async fn a_new_profile_name_is_recorded_at_once(app: TestApp) {
    let post = |id: &str, name: &str| {
        let body = String::from_utf8(text_notification(&[(id, "34600111222", "hola")]))
            .unwrap()
            .replace("Lucía Fernández", name);
        app.post_webhook(body)
    };
    assert_eq!(post("wamid.NAME1", "Lucía").await, StatusCode::OK);
    assert_eq!(post("wamid.NAME2", "Lucía").await, StatusCode::OK);
    assert_eq!(
        post("wamid.NAME3", "Lucía Fernández Núñez").await,
        StatusCode::OK
    );
    let user = app
        .store
        .user(&WaId::parse("34600111222").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(user.name.as_deref(), Some("Lucía Fernández Núñez"));
    assert_eq!(inbox_len(app.store.as_ref()).await, 3);
}

crate::both_stores!(|s| (crate::common::TestApp::with_store(s.store.clone())) =>
    a_message_is_in_the_inbox_before_the_200,
    arrivals_are_stamped_by_the_database_clock,
    the_same_payload_posted_5_times_concurrently_is_stored_once,
    a_batch_of_1000_messages_leaves_1000_inbox_entries,
    a_signature_over_accents_and_emoji_verifies,
    statuses_update_the_outbox_and_unknown_ones_are_ignored,
    every_fixture_is_acknowledged,
    non_message_updates_are_acknowledged_and_store_nothing,
    an_unreadable_message_is_kept_for_operators_and_the_rest_stored,
    a_new_profile_name_is_recorded_at_once,
);

// ---- health and metrics ------------------------------------------------------------------------

#[tokio::test]
async fn health_and_readiness_answer_200_with_a_live_store() {
    let app = TestApp::memory();
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
    assert_eq!(app.get("/readyz").await.0, StatusCode::OK);
    if let Some(db) = TestMongo::new().await {
        let app = TestApp::with_store(Arc::new(db.store.clone()));
        assert_eq!(app.get("/readyz").await.0, StatusCode::OK);
        db.drop().await;
    }
}

#[tokio::test]
async fn metrics_count_inbound_messages_by_type() {
    let app = TestApp::memory();
    zaguan::telemetry::metrics_handle();
    assert_eq!(
        app.post_webhook(cloud_api_fixture("image")).await,
        StatusCode::OK
    );
    let (status, text) = app.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.lines()
            .any(|l| l.starts_with("zaguan_inbound_messages_total{type=\"image\"}")),
        "{text}"
    );
    assert!(text.contains("zaguan_webhook_requests_total{outcome=\"accepted\"}"));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_finishes_its_body_gets_408() {
    let app = TestApp::memory();
    let first_chunk = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(
        b"{\"object\":",
    ))]);
    let body = axum::body::Body::from_stream(first_chunk.chain(futures::stream::pending()));
    let request = axum::http::Request::post("/webhook")
        .header("x-hub-signature-256", "sha256=00")
        .body(body)
        .unwrap();
    let (status, _) = app.request(request).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert_eq!(inbox_len(app.store.as_ref()).await, 0);
}
