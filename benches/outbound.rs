//! The outbound channel's own cost per message: one queued part flushed through the sender
//! (outbox read, `sending`, rate limiters, request body, Graph call, `sent` with its wamid) on
//! the in-memory store against a local Graph API server, next to a bare reqwest POST of the
//! same body to the same server. The difference is what the sender adds to the network.
//!
//! `cargo bench --bench outbound`

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::Utc;
use criterion::{Criterion, criterion_group, criterion_main};
use secrecy::SecretString;
use serde_json::json;
use zaguan::domain::WaId;
use zaguan::outbound::graph::{OutboundMessage, message_body};
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::store::{MemoryStore, NewOutbox, Store};

const REPLY: &str = "¡Hola, Lucía! El piso de la calle Mayor sigue disponible: 3 habitaciones, \
                     terraza de 20 m² y 450.000 €. ¿Te viene bien visitarlo el jueves a las 18:00?";

fn outbound(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    zaguan::telemetry::metrics_handle();
    let base = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().route(
            "/v21.0/{phone}/messages",
            axum::routing::post(|| async {
                axum::Json(json!({"messaging_product": "whatsapp",
                    "contacts": [{"input": "34600111222", "wa_id": "34600111222"}],
                    "messages": [{"id": "wamid.HBgLMzQ2MDAxMTEyMjIVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3AA=="}]}))
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://127.0.0.1:{port}/v21.0")
    });

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let graph = GraphClient::new(
        base.parse().unwrap(),
        Some(SecretString::from("EAAG-bench".to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let limits = SendLimits {
        per_number: NonZeroU32::MAX,
        ..SendLimits::default()
    };
    let sender = Outbound::new(
        store.clone(),
        graph,
        Limiters::new(&limits),
        OutboundSettings::default(),
    );
    // A new recipient each time: Meta's pair limit (one every 6 s) is not what is measured.
    let next = AtomicU64::new(0);
    c.bench_function(
        "outbound/flush one part, MemoryStore, loopback Graph API",
        |b| {
            b.to_async(&runtime).iter(|| async {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let wa_id = WaId::parse(&format!("34{n:010}")).unwrap();
                let part = NewOutbox {
                    phone_number_id: Some("109876543210".into()),
                    ..NewOutbox::text(wa_id.clone(), None, REPLY, Utc::now())
                };
                store.insert_outbox(&[part]).await.unwrap();
                sender.flush(&wa_id).await.unwrap();
            })
        },
    );

    let http = reqwest::Client::new();
    let url = format!("{base}/109876543210/messages");
    let body = message_body(
        &WaId::parse("34600111222").unwrap(),
        &OutboundMessage::Text { body: REPLY },
    );
    c.bench_function(
        "outbound/bare reqwest POST of the same body, loopback",
        |b| {
            b.to_async(&runtime).iter(|| async {
                let response = http
                    .post(&url)
                    .bearer_auth("EAAG-bench")
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                response.bytes().await.unwrap()
            })
        },
    );
}

criterion_group!(benches, outbound);
criterion_main!(benches);
