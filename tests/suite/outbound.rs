//! The outbound channel against a local server speaking the Graph API: what is sent, how each
//! kind of refusal is handled, Meta's rate limits kept on our side, and a reply cut by a crash
//! finished without sending a part twice.

use crate::common;

use common::graph::{Answer, FakeGraph, Received, graph_error};

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::Utc;
use secrecy::SecretString;
use serde_json::json;
use zaguan::domain::OutboxId;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::store::{
    ListRow, Media, MemoryStore, NewOutbox, OutboxEntry, OutboxStatus, OutboxUpdate, ReplyButton,
    StatusOutcome, Store,
};

const TOKEN: &str = "EAAG-test-token";
const PHONE_NUMBER_ID: &str = "109876543210";

struct Channel {
    graph: Arc<FakeGraph>,
    store: Arc<dyn Store>,
    outbound: Outbound,
}

async fn channel(answers: Vec<Answer>, limits: SendLimits, settings: OutboundSettings) -> Channel {
    let graph = Arc::new(FakeGraph {
        answers: Mutex::new(answers.into()),
        ..FakeGraph::default()
    });
    let base = common::graph::serve(graph.clone()).await;
    let client = GraphClient::new(
        format!("{base}/v21.0").parse().unwrap(),
        Some(SecretString::from(TOKEN.to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let outbound = Outbound::new(store.clone(), client, Limiters::new(&limits), settings);
    Channel {
        graph,
        store,
        outbound,
    }
}

fn fast_retries() -> OutboundSettings {
    OutboundSettings {
        base_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        wait_in_place: Duration::from_secs(5),
        ..OutboundSettings::default()
    }
}

fn wa() -> WaId {
    WaId::parse("34600111222").unwrap()
}

/// Queues a reply of `parts` texts to `wa()`.
async fn queue(store: &dyn Store, texts: &[&str]) -> Vec<OutboxId> {
    let parts: Vec<NewOutbox> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| NewOutbox {
            phone_number_id: Some(PHONE_NUMBER_ID.into()),
            part: i as u32,
            parts: texts.len() as u32,
            ..NewOutbox::text(
                wa(),
                Some(WaMessageId::parse("wamid.IN1").unwrap()),
                *text,
                Utc::now(),
            )
        })
        .collect();
    store.insert_outbox(&parts).await.unwrap()
}

async fn replies(store: &dyn Store) -> Vec<OutboxEntry> {
    store
        .outbox_in_reply_to(&WaMessageId::parse("wamid.IN1").unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_reply_is_sent_as_whatsapp_expects_and_recorded_with_its_wamid() {
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    let ids = queue(c.store.as_ref(), &["¡Hola! ¿En qué te ayudo? 🏡"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    let received = c.graph.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].phone_number_id, PHONE_NUMBER_ID);
    assert_eq!(
        received[0].authorization.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        received[0].body,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual",
               "to": "34600111222", "type": "text",
               "text": {"preview_url": false, "body": "¡Hola! ¿En qué te ayudo? 🏡"},
               "biz_opaque_callback_data": format!("zaguan:outbox:{}", ids[0].0)})
    );
    let sent = &replies(c.store.as_ref()).await[0];
    assert_eq!(sent.status, OutboxStatus::Sent);
    assert_eq!(sent.wamid.as_ref().unwrap().as_str(), "wamid.OUT1");
    assert_eq!(sent.attempts, 1);
}

#[tokio::test]
async fn confirmation_buttons_go_out_as_an_interactive_message() {
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    c.store
        .insert_outbox(&[NewOutbox {
            phone_number_id: Some(PHONE_NUMBER_ID.into()),
            buttons: vec![
                ReplyButton::new("confirm:a1", "Sí, confirmar"),
                ReplyButton::new("cancel:a1", "No"),
            ],
            ..NewOutbox::text(
                wa(),
                None,
                "¿Confirmo la visita del jueves a las 18:00?",
                Utc::now(),
            )
        }])
        .await
        .unwrap();
    c.outbound.flush(&wa()).await.unwrap();
    let body = &c.graph.received()[0].body;
    assert_eq!(body["type"], "interactive");
    assert_eq!(
        body["interactive"],
        json!({"type": "button",
               "body": {"text": "¿Confirmo la visita del jueves a las 18:00?"},
               "action": {"buttons": [
                   {"type": "reply", "reply": {"id": "confirm:a1", "title": "Sí, confirmar"}},
                   {"type": "reply", "reply": {"id": "cancel:a1", "title": "No"}}]}})
    );
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_for_then_sent() {
    let c = channel(
        vec![(
            StatusCode::TOO_MANY_REQUESTS,
            graph_error(130429, "Rate limit hit"),
            Some(1),
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue(c.store.as_ref(), &["Hola"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    let received = c.graph.received();
    assert_eq!(received.len(), 2);
    assert!(
        received[1].at - received[0].at >= Duration::from_millis(950),
        "Retry-After honoured: {:?}",
        received[1].at - received[0].at
    );
    let sent = &replies(c.store.as_ref()).await[0];
    assert_eq!((sent.status, sent.attempts), (OutboxStatus::Sent, 2));
}

#[tokio::test]
async fn three_500s_then_success_is_sent_with_growing_backoff() {
    let error = (
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"error": {"message": "oops"}}),
        None,
    );
    let c = channel(
        vec![error.clone(), error.clone(), error],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue(c.store.as_ref(), &["Hola"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    let received = c.graph.received();
    assert_eq!(received.len(), 4);
    let gaps: Vec<Duration> = received.windows(2).map(|w| w[1].at - w[0].at).collect();
    // 20 ms, 40 ms, 80 ms, each with jitter over its upper half.
    assert!(gaps[0] >= Duration::from_millis(10), "{gaps:?}");
    assert!(gaps[2] >= Duration::from_millis(40), "{gaps:?}");
    let sent = &replies(c.store.as_ref()).await[0];
    assert_eq!((sent.status, sent.attempts), (OutboxStatus::Sent, 4));
}

/// A media part as the engine queues it: `media`, and `body` its caption or plain-text form.
async fn queue_media(store: &dyn Store, body: &str, media: Media) {
    store
        .insert_outbox(&[NewOutbox {
            phone_number_id: Some(PHONE_NUMBER_ID.into()),
            media: Some(media),
            ..NewOutbox::text(wa(), None, body, Utc::now())
        }])
        .await
        .unwrap();
}

#[tokio::test]
async fn photos_and_lists_go_out_as_whatsapp_expects() {
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    queue_media(
        c.store.as_ref(),
        "P-1001 · Ático con terraza (1/4)",
        Media::Image {
            link: "https://media.example.es/P-1001/1-salon.jpg".into(),
        },
    )
    .await;
    let long_title = "P-1001 · 1.250.000 € y algo más";
    queue_media(
        c.store.as_ref(),
        "Toca una.\nP-1001 · 245.000 €",
        Media::List {
            text: "Toca una.".into(),
            button: "Ver opciones".into(),
            rows: vec![ListRow {
                id: "ask:property_assistant:P-1001".into(),
                title: long_title.into(),
                description: "Ruzafa, Valencia · 🛏 3 · 95 m²".into(),
            }],
        },
    )
    .await;
    c.outbound.flush(&wa()).await.unwrap();
    let received = c.graph.received();
    assert_eq!(
        received[0].body["image"],
        json!({"link": "https://media.example.es/P-1001/1-salon.jpg",
               "caption": "P-1001 · Ático con terraza (1/4)"})
    );
    assert_eq!(received[0].body["type"], "image");
    assert_eq!(
        received[1].body["interactive"],
        json!({"type": "list",
               "body": {"text": "Toca una."},
               "action": {"button": "Ver opciones", "sections": [{"rows": [
                   {"id": "ask:property_assistant:P-1001",
                    "title": long_title.chars().take(24).collect::<String>(),
                    "description": "Ruzafa, Valencia · 🛏 3 · 95 m²"}]}]}})
    );
}

/// WhatsApp refuses an image (a link it cannot fetch) or a list for good: the part goes again
/// at once as text, so the customer gets the words and the link; a retryable refusal is retried
/// as it was.
#[tokio::test]
async fn refused_media_goes_as_text_instead() {
    let c = channel(
        vec![
            (
                StatusCode::BAD_REQUEST,
                graph_error(131053, "Media upload error"),
                None,
            ),
            (
                StatusCode::OK,
                json!({"messaging_product": "whatsapp", "messages": [{"id": "wamid.OUT-TEXT"}]}),
                None,
            ),
            (
                StatusCode::BAD_REQUEST,
                graph_error(100, "Invalid parameter"),
                None,
            ),
        ],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue_media(
        c.store.as_ref(),
        "P-1001 (1/4)",
        Media::Image {
            link: "https://media.example.es/P-1001/1-salon.jpg".into(),
        },
    )
    .await;
    queue_media(
        c.store.as_ref(),
        "Toca una.\nP-1001 · 245.000 €",
        Media::List {
            text: "Toca una.".into(),
            button: "Ver opciones".into(),
            rows: Vec::new(),
        },
    )
    .await;
    c.outbound.flush(&wa()).await.unwrap();
    let kinds: Vec<String> = c
        .graph
        .received()
        .iter()
        .map(|r| r.body["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["image", "text", "interactive", "text"]);
    assert_eq!(
        c.graph.texts(),
        [
            "P-1001 (1/4)\nhttps://media.example.es/P-1001/1-salon.jpg",
            "Toca una.",
            "Toca una.\nP-1001 · 245.000 €"
        ]
    );
    let sent = c.store.unsent_outbox(&wa()).await.unwrap();
    assert!(sent.is_empty(), "both recorded sent: {sent:?}");
}

#[tokio::test]
async fn a_bad_request_is_not_retried_and_the_next_part_still_goes() {
    let c = channel(
        vec![(
            StatusCode::BAD_REQUEST,
            graph_error(100, "Invalid parameter"),
            None,
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue(c.store.as_ref(), &["uno", "dos"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.texts(), ["uno", "dos"]);
    let parts = replies(c.store.as_ref()).await;
    assert_eq!(parts[0].status, OutboxStatus::Failed);
    assert_eq!(parts[0].error.as_ref().unwrap().code, Some(100));
    assert_eq!(parts[1].status, OutboxStatus::Sent);
}

#[tokio::test]
async fn outside_the_24_hour_window_is_failed_for_good() {
    let c = channel(
        vec![(
            StatusCode::BAD_REQUEST,
            graph_error(131047, "Re-engagement message"),
            None,
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue(c.store.as_ref(), &["Hola"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.received().len(), 1);
    let part = &replies(c.store.as_ref()).await[0];
    assert_eq!(part.status, OutboxStatus::Failed);
    assert_eq!(part.error.as_ref().unwrap().code, Some(131047));
    assert!(c.store.unsent_outbox(&wa()).await.unwrap().is_empty());
}

/// A text Meta refuses for the closed window (131047) goes again, at once and in its place,
/// as the template of its purpose it carries; once.
#[tokio::test]
async fn outside_the_window_a_text_goes_as_its_template_fallback() {
    let c = channel(
        vec![(
            StatusCode::BAD_REQUEST,
            graph_error(131047, "Re-engagement message"),
            None,
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    let mut part = NewOutbox::text(
        wa(),
        None,
        "Recordatorio: mañana tienes la visita.",
        Utc::now(),
    );
    part.phone_number_id = Some(PHONE_NUMBER_ID.into());
    part.fallback = Some(zaguan::store::Template {
        name: "visit_reminder".into(),
        language: "es".into(),
        parameters: vec![
            "Ático".into(),
            "28/11 a las 10:00".into(),
            "Calle Colón 1".into(),
        ],
        category: Some("utility".into()),
        buttons: Vec::new(),
    });
    let ids = c.store.insert_outbox(&[part]).await.unwrap();
    c.outbound.flush(&wa()).await.unwrap();
    let kinds: Vec<String> = c
        .graph
        .received()
        .iter()
        .map(|r| r.body["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["text", "template"]);
    assert_eq!(
        c.graph.received()[1].body["template"]["name"],
        json!("visit_reminder")
    );
    let sent = c.store.outbox_entry(&ids[0]).await.unwrap().unwrap();
    assert_eq!(sent.status, OutboxStatus::Sent);
    assert!(sent.fell_back);
}

/// Meta's slow-downs reach past the refused part: 131056 pauses that recipient, 130429 the
/// whole number; nothing is lost.
#[tokio::test]
async fn a_pair_rate_refusal_pauses_the_recipient_and_a_throughput_one_the_number() {
    let c = channel(
        vec![(
            StatusCode::BAD_REQUEST,
            graph_error(130429, "Rate limit hit"),
            Some(1),
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    let other = WaId::parse("34600999888").unwrap();
    queue(c.store.as_ref(), &["Hola"]).await;
    let mut part = NewOutbox::text(other.clone(), None, "Hola a ti", Utc::now());
    part.phone_number_id = Some(PHONE_NUMBER_ID.into());
    c.store.insert_outbox(&[part]).await.unwrap();
    let started = std::time::Instant::now();
    let customer = wa();
    let (first, second) = tokio::join!(c.outbound.flush(&customer), async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        c.outbound.flush(&other).await
    });
    first.unwrap();
    second.unwrap();
    let received = c.graph.received();
    assert_eq!(received.len(), 3, "refused, then both sent");
    let to_other = received
        .iter()
        .find(|r| r.body["to"] == json!(other.as_str()))
        .unwrap();
    assert!(
        to_other.at - started >= Duration::from_millis(900),
        "the other recipient waited for the number's pause: {:?}",
        to_other.at - started
    );
    assert!(c.store.unsent_outbox(&wa()).await.unwrap().is_empty());
    assert!(c.store.unsent_outbox(&other).await.unwrap().is_empty());

    // 131056: only that recipient waits.
    let c = channel(
        vec![(
            StatusCode::BAD_REQUEST,
            graph_error(131056, "Pair rate limit hit"),
            Some(1),
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue(c.store.as_ref(), &["Hola"]).await;
    let mut part = NewOutbox::text(other.clone(), None, "Hola a ti", Utc::now());
    part.phone_number_id = Some(PHONE_NUMBER_ID.into());
    c.store.insert_outbox(&[part]).await.unwrap();
    let started = std::time::Instant::now();
    let customer = wa();
    let (first, second) = tokio::join!(c.outbound.flush(&customer), async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        c.outbound.flush(&other).await
    });
    first.unwrap();
    second.unwrap();
    let received = c.graph.received();
    let at = |to: &str| {
        received
            .iter()
            .rev()
            .find(|r| r.body["to"] == json!(to))
            .unwrap()
            .at
            - started
    };
    assert!(
        at(other.as_str()) < Duration::from_millis(900),
        "{:?}",
        at(other.as_str())
    );
    assert!(
        at(wa().as_str()) >= Duration::from_millis(900),
        "{:?}",
        at(wa().as_str())
    );
    assert!(c.store.unsent_outbox(&wa()).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_expired_token_holds_the_reply_for_later_instead_of_losing_it() {
    let c = channel(
        vec![(
            StatusCode::UNAUTHORIZED,
            graph_error(190, "Error validating access token: Session has expired"),
            None,
        )],
        SendLimits::default(),
        fast_retries(),
    )
    .await;
    queue(c.store.as_ref(), &["uno", "dos"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(
        c.graph.received().len(),
        1,
        "the second part waits behind the first"
    );
    let unsent = c.store.unsent_outbox(&wa()).await.unwrap();
    assert_eq!(unsent.len(), 2);
    assert_eq!(unsent[0].status, OutboxStatus::Queued);
    assert_eq!(unsent[0].error.as_ref().unwrap().code, Some(190));
    let due = unsent[0].next_attempt_at.unwrap();
    assert!(due > Utc::now() + chrono::Duration::seconds(200), "{due}");
    assert!(
        c.store
            .conversations_with_unsent_outbox(Utc::now(), 10)
            .await
            .unwrap()
            .is_empty(),
        "not due again before the token retry"
    );
}

#[tokio::test]
async fn a_crash_between_two_parts_resends_only_the_missing_one() {
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    let ids = queue(
        c.store.as_ref(),
        &["primera parte", "segunda parte", "tercera parte"],
    )
    .await;
    // The first part went out before the crash; the second was being sent, long enough ago
    // for its status to have come had it been delivered.
    let before = Utc::now() - chrono::Duration::minutes(5);
    c.store
        .update_outbox(
            &ids[0],
            &OutboxUpdate::Sending {
                at: before,
                resend_at: before + chrono::Duration::seconds(30),
            },
        )
        .await
        .unwrap();
    c.store
        .update_outbox(
            &ids[0],
            &OutboxUpdate::Sent {
                wamid: Some(WaMessageId::parse("wamid.BEFORE").unwrap()),
            },
        )
        .await
        .unwrap();
    c.store
        .update_outbox(
            &ids[1],
            &OutboxUpdate::Sending {
                at: before,
                resend_at: before + chrono::Duration::seconds(30),
            },
        )
        .await
        .unwrap();
    // After the restart the worker finds the conversation and flushes it.
    assert_eq!(
        c.store
            .conversations_with_unsent_outbox(Utc::now(), 10)
            .await
            .unwrap(),
        [wa()]
    );
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.texts(), ["segunda parte", "tercera parte"]);
    let parts = replies(c.store.as_ref()).await;
    assert!(parts.iter().all(|p| p.status == OutboxStatus::Sent));
    assert_eq!(parts[0].wamid.as_ref().unwrap().as_str(), "wamid.BEFORE");
    // Flushing again sends nothing.
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.received().len(), 2);
}

/// Queues `texts` and leaves the first part `sending`, as a process that handed it to the
/// Graph API just now and died before recording the answer; it may be sent again after
/// `grace`.
async fn queue_first_unrecorded(
    store: &dyn Store,
    texts: &[&str],
    grace: Duration,
) -> Vec<OutboxId> {
    let ids = queue(store, texts).await;
    let sending = OutboxUpdate::Sending {
        at: Utc::now(),
        resend_at: Utc::now() + chrono::Duration::from_std(grace).unwrap(),
    };
    assert!(store.update_outbox(&ids[0], &sending).await.unwrap());
    ids
}

/// Applies the `sent` status Meta posts for message `wamid`, naming the part by its callback
/// data (the part's wamid may never have been recorded).
async fn confirm(store: &dyn Store, id: &OutboxId, wamid: &str) -> StatusOutcome {
    let status = zaguan::domain::StatusUpdate {
        wamid: WaMessageId::parse(wamid).unwrap(),
        status: "sent".into(),
        at: Some(Utc::now()),
        recipient_id: Some(wa().as_str().to_owned()),
        errors: Vec::new(),
        callback_data: Some(id.callback_data()),
        pricing: None,
    };
    store.apply_status(&status).await.unwrap()
}

#[tokio::test]
async fn a_part_left_sending_by_a_crash_waits_for_its_status_and_is_not_sent_twice() {
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    let grace = OutboundSettings::default().unconfirmed_grace;
    let texts = ["primera parte", "segunda parte"];
    let ids = queue_first_unrecorded(c.store.as_ref(), &texts, grace).await;
    c.outbound.flush(&wa()).await.unwrap();
    assert!(c.graph.received().is_empty(), "sent within the grace");
    let parts = replies(c.store.as_ref()).await;
    assert_eq!(parts[0].status, OutboxStatus::Sending);
    assert_eq!(parts[1].next_attempt_at, None, "held, not pushed back");
    // Meta's status webhook names the part by its callback data.
    let store = c.store.as_ref();
    assert_eq!(
        confirm(store, &ids[0], "wamid.BEFORE").await,
        StatusOutcome::Reconciled
    );
    // A status of another message naming the same part is not taken for it.
    assert_eq!(
        confirm(store, &ids[0], "wamid.OTHER").await,
        StatusOutcome::Unknown
    );
    let parts = replies(c.store.as_ref()).await;
    assert_eq!(parts[0].status, OutboxStatus::Sent);
    assert_eq!(parts[0].wamid.as_ref().unwrap().as_str(), "wamid.BEFORE");
    // Only the second part goes out, once the first is confirmed.
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.texts(), ["segunda parte"]);
}

#[tokio::test]
async fn a_part_whose_status_never_comes_is_sent_again_after_the_grace() {
    let settings = OutboundSettings {
        unconfirmed_grace: Duration::from_millis(300),
        ..fast_retries()
    };
    let c = channel(vec![], SendLimits::default(), settings).await;
    let grace = Duration::from_millis(300);
    queue_first_unrecorded(c.store.as_ref(), &["única parte"], grace).await;
    c.outbound.flush(&wa()).await.unwrap();
    assert!(c.graph.received().is_empty(), "sent within the grace");
    // Not polled meanwhile: the conversation is due again when the grace ends.
    let due = |at| c.store.conversations_with_unsent_outbox(at, 10);
    assert!(due(Utc::now()).await.unwrap().is_empty());
    assert_eq!(due(Utc::now() + grace).await.unwrap(), [wa()]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.texts(), ["única parte"]);
    let part = &replies(c.store.as_ref()).await[0];
    assert_eq!(part.status, OutboxStatus::Sent);
    assert_eq!(part.attempts, 2);
}

#[tokio::test]
async fn a_status_arriving_before_the_senders_record_confirms_the_part() {
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    // Meta's `sent` webhook can beat the Graph API's answer to the store.
    let grace = Duration::from_secs(30);
    let ids = queue_first_unrecorded(c.store.as_ref(), &["única parte"], grace).await;
    assert_eq!(
        confirm(c.store.as_ref(), &ids[0], "wamid.EARLY").await,
        StatusOutcome::Reconciled
    );
    // The sender's own record then changes nothing, and a retry no longer applies.
    let sent = OutboxUpdate::Sent {
        wamid: Some(WaMessageId::parse("wamid.EARLY").unwrap()),
    };
    assert!(c.store.update_outbox(&ids[0], &sent).await.unwrap());
    let sending = OutboxUpdate::Sending {
        at: Utc::now(),
        resend_at: Utc::now(),
    };
    assert!(!c.store.update_outbox(&ids[0], &sending).await.unwrap());
    c.outbound.flush(&wa()).await.unwrap();
    assert!(c.graph.received().is_empty());
    let part = &replies(c.store.as_ref()).await[0];
    assert_eq!(part.status, OutboxStatus::Sent);
    assert_eq!(part.attempts, 1);
}

#[tokio::test]
async fn an_answer_lost_after_the_request_left_is_not_sent_again_within_the_grace() {
    // A success without a message id: the Graph API may have accepted the message.
    let lost = (
        StatusCode::OK,
        json!({"messaging_product": "whatsapp"}),
        None,
    );
    let c = channel(vec![lost], SendLimits::default(), fast_retries()).await;
    let ids = queue(c.store.as_ref(), &["primera parte", "segunda parte"]).await;
    c.outbound.flush(&wa()).await.unwrap();
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.texts(), ["primera parte"], "sent once, not retried");
    let parts = replies(c.store.as_ref()).await;
    assert_eq!(parts[0].status, OutboxStatus::Sending);
    assert_eq!(parts[0].attempts, 1);
    // Its status confirms it; the next part follows.
    assert_eq!(
        confirm(c.store.as_ref(), &ids[0], "wamid.ACCEPTED").await,
        StatusOutcome::Reconciled
    );
    c.outbound.flush(&wa()).await.unwrap();
    assert_eq!(c.graph.texts(), ["primera parte", "segunda parte"]);
}

#[tokio::test]
async fn a_graph_api_that_cannot_be_reached_is_retried_with_backoff() {
    let client = GraphClient::new(
        format!("http://127.0.0.1:{}/v21.0", common::free_port())
            .parse()
            .unwrap(),
        Some(SecretString::from(TOKEN.to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let settings = OutboundSettings {
        wait_in_place: Duration::ZERO,
        ..fast_retries()
    };
    let outbound = Outbound::new(
        store.clone(),
        client,
        Limiters::new(&SendLimits::default()),
        settings,
    );
    queue(store.as_ref(), &["única parte"]).await;
    outbound.flush(&wa()).await.unwrap();
    // Never reached the server: a plain retry, not a wait for a status.
    let part = &replies(store.as_ref()).await[0];
    assert_eq!(part.status, OutboxStatus::Queued);
    assert!(part.next_attempt_at.is_some());
    assert!(part.error.is_some());
}

#[tokio::test]
async fn the_rate_limiter_holds_the_configured_rate() {
    const SENDS: usize = 300;
    const RATE: u32 = 100;
    let c = channel(
        vec![],
        SendLimits {
            per_number: NonZeroU32::new(RATE).unwrap(),
            ..SendLimits::default()
        },
        fast_retries(),
    )
    .await;
    // 300 users, one message each: only the number's throughput limit applies.
    for i in 0..SENDS {
        let wa_id = WaId::parse(&format!("3461{i:07}")).unwrap();
        c.store
            .insert_outbox(&[NewOutbox {
                phone_number_id: Some(PHONE_NUMBER_ID.into()),
                ..NewOutbox::text(wa_id, None, "Novedades en Ruzafa", Utc::now())
            }])
            .await
            .unwrap();
    }
    let started = Instant::now();
    let outbound = Arc::new(c.outbound);
    let senders: Vec<_> = (0..SENDS)
        .map(|i| {
            let outbound = outbound.clone();
            tokio::spawn(async move {
                let wa_id = WaId::parse(&format!("3461{i:07}")).unwrap();
                outbound.flush(&wa_id).await.unwrap();
            })
        })
        .collect();
    for sender in senders {
        sender.await.unwrap();
    }
    let elapsed = started.elapsed();
    let received = c.graph.received();
    assert_eq!(received.len(), SENDS);
    // A burst of RATE, then RATE per second: 300 sends take at least two seconds.
    assert!(elapsed >= Duration::from_millis(1900), "{elapsed:?}");
    // After the burst, the server saw them at the configured rate, not faster.
    // Measured from before the first send: on a loaded machine the server can see the first
    // sends late while the rest keep to the schedule, so a span from the first one seen is
    // shorter than the limiter's schedule (1.898 s once, against 2 s).
    let last = received.iter().map(|r| r.at).max().unwrap();
    let span = last - started;
    let floor = Duration::from_secs_f64((SENDS - RATE as usize) as f64 / f64::from(RATE) * 0.95);
    assert!(span >= floor, "{span:?} < {floor:?}");
    let rate = (SENDS as f64 - f64::from(RATE)) / (elapsed.as_secs_f64());
    eprintln!("300 sends in {elapsed:?}: {rate:.0}/s after the burst (limit {RATE}/s)");
}

#[tokio::test]
async fn the_typing_indicator_marks_the_message_read_and_stops_with_the_turn() {
    let c = channel(
        vec![],
        SendLimits::default(),
        OutboundSettings {
            typing_renewal: Duration::from_millis(100),
            ..fast_retries()
        },
    )
    .await;
    let wamid = WaMessageId::parse("wamid.IN1").unwrap();
    let typing = c.outbound.typing(PHONE_NUMBER_ID, &wamid);
    tokio::time::sleep(Duration::from_millis(250)).await;
    drop(typing);
    let marks = c.graph.received().len();
    assert!(marks >= 2, "renewed while the turn runs: {marks}");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(c.graph.received().len(), marks, "stopped with the turn");
    assert_eq!(
        c.graph.received()[0].body,
        json!({"messaging_product": "whatsapp", "status": "read",
               "message_id": "wamid.IN1", "typing_indicator": {"type": "text"}})
    );
}

#[tokio::test]
async fn without_an_access_token_nothing_leaves_and_the_reply_is_marked_sent() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let outbound = Outbound::dry_run(store.clone());
    assert!(outbound.is_dry_run());
    queue(store.as_ref(), &["Hola"]).await;
    outbound.flush(&wa()).await.unwrap();
    let part = &replies(store.as_ref()).await[0];
    assert_eq!(
        (part.status, part.wamid.as_ref()),
        (OutboxStatus::Sent, None)
    );
}

// ---- end to end: webhook in, formatted parts out ---------------------------------------------

/// A long answer in the Markdown LLMs write: headings, bold, lists, a table, a link; over
/// 4096 characters, so WhatsApp gets it in parts.
fn long_markdown_answer() -> String {
    let mut answer = String::from("## Pisos en Valencia que encajan contigo\n\n");
    for i in 1..=14 {
        answer.push_str(&format!(
            "### {i}. Piso reformado en Ruzafa, referencia P-{i:03}\n\n\
             **Precio:** {} €. *Muy luminoso*, con balcón a la calle Sueca y ~~sin ascensor~~ \
             ascensor nuevo. Tiene:\n\n- 3 habitaciones\n- 2 baños\n  - uno en suite\n\
             - Cocina equipada 🍳\n\nMás fotos en [la ficha](https://zaguan.es/p/{i}). \
             La comunidad son 60 € al mes y el IBI 420 € al año; está a cinco minutos del \
             mercado de Ruzafa y del metro de Colón.\n\n",
            250_000 + i * 5_000
        ));
    }
    answer.push_str("| Ref | Zona | Precio |\n|---|---|---|\n| P-001 | Ruzafa | 255.000 € |\n\n¿Quieres visitar alguno esta semana?");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_markdown_answer_arrives_as_formatted_parts_in_order_once() {
    use common::{TestApp, text_notification};
    use zaguan::agents::AgentRegistry;
    use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
    use zaguan::guard::{format, split};
    use zaguan::llm::ScriptedLlm;
    use zaguan::runtime::{WorkerSettings, Workers};

    let answer = long_markdown_answer();
    assert!(answer.chars().count() > 4096);
    let c = channel(vec![], SendLimits::default(), fast_retries()).await;
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    let engine = Engine::new(
        c.store.clone(),
        Arc::new(ScriptedLlm::new().says("primary_assistant", &answer)),
        Arc::new(registry),
        Arc::new(ToolRegistry::new()),
        // The primary answers (a search question would otherwise go to the searcher by the
        // fast path): this test is about the parts, not the route.
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    let app = TestApp::with_store(c.store.clone());
    let workers = Workers::spawn(
        Arc::new(engine),
        Arc::new(c.outbound),
        app.state.arrivals.clone(),
        WorkerSettings::default(),
    );
    let wamid = "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQ5";
    let body = text_notification(&[(wamid, "34600111222", "Hola, ¿qué pisos tenéis en Valencia?")]);
    assert_eq!(app.post_webhook(body).await, StatusCode::OK);

    let expected = split::split(&format::to_whatsapp(&answer), split::MAX_CHARS);
    assert!(expected.len() >= 2, "{}", expected.len());
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.graph.texts().len() < expected.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    workers.stop().await;

    let texts = c.graph.texts();
    assert_eq!(texts, expected, "every part once, in order");
    for text in &texts {
        assert!(text.chars().count() <= 4096);
        assert!(
            !text.contains("**")
                && !text.contains("##")
                && !text.contains("](")
                && !text.contains('|'),
            "{text}"
        );
    }
    assert!(
        texts[0].starts_with("*Pisos en Valencia que encajan contigo*"),
        "{}",
        texts[0]
    );
    // The message was marked read with the typing indicator, however short the turn.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !c
        .graph
        .received()
        .iter()
        .any(|r| r.body["status"] == "read")
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let marks: Vec<Received> = c
        .graph
        .received()
        .into_iter()
        .filter(|r| r.body["status"] == "read")
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(marks[0].body["message_id"], wamid);
    let parts = c
        .store
        .outbox_in_reply_to(&WaMessageId::parse(wamid).unwrap())
        .await
        .unwrap();
    assert_eq!(parts.len(), expected.len());
    assert!(
        parts.iter().all(|p| p.status == OutboxStatus::Sent
            && p.phone_number_id.as_deref() == Some(PHONE_NUMBER_ID))
    );
    assert_eq!(
        parts.iter().map(|p| (p.part, p.parts)).collect::<Vec<_>>(),
        (0..expected.len() as u32)
            .map(|i| (i, expected.len() as u32))
            .collect::<Vec<_>>()
    );
}

/// A burst of read marks waits its turn beyond `GRAPH_IN_FLIGHT` calls at once, instead of
/// opening a connection per call, and every call still goes.
#[tokio::test]
async fn a_burst_of_calls_keeps_to_the_in_flight_bound_and_all_go() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use zaguan::outbound::graph::GRAPH_IN_FLIGHT;

    #[derive(Default)]
    struct Gauge {
        now: AtomicUsize,
        max: AtomicUsize,
        seen: AtomicUsize,
    }
    let gauge = Arc::new(Gauge::default());
    let app = axum::Router::new().route(
        "/v21.0/{phone}/messages",
        axum::routing::post({
            let gauge = gauge.clone();
            move || {
                let gauge = gauge.clone();
                async move {
                    let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
                    gauge.max.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    gauge.now.fetch_sub(1, Ordering::SeqCst);
                    gauge.seen.fetch_add(1, Ordering::SeqCst);
                    axum::Json(json!({"success": true}))
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = GraphClient::new(
        format!("{base}/v21.0").parse().unwrap(),
        Some(SecretString::from(TOKEN.to_owned())),
        Duration::from_secs(10),
    )
    .unwrap();
    let calls = 2 * GRAPH_IN_FLIGHT + 50;
    let wamids: Vec<WaMessageId> = (0..calls)
        .map(|i| WaMessageId::parse(&format!("wamid.BURST{i}")).unwrap())
        .collect();
    let results = futures::future::join_all(
        wamids
            .iter()
            .map(|wamid| client.mark_read(PHONE_NUMBER_ID, wamid, true)),
    )
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(gauge.seen.load(Ordering::SeqCst), calls);
    let max = gauge.max.load(Ordering::SeqCst);
    assert!(max <= GRAPH_IN_FLIGHT, "{max} calls at once");
    assert!(
        max > GRAPH_IN_FLIGHT / 2,
        "the calls went one by one: {max}"
    );
}
