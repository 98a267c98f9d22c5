//! Hot path of the front door: signature check + typed parse of a realistic 2 KB notification,
//! and the whole `POST /webhook` handler (router, verify, parse, MemoryStore writes).
//!
//! `cargo bench --bench webhook`

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use secrecy::SecretString;
use tower::ServiceExt;
use zaguan::app::{AppState, router};
use zaguan::store::MemoryStore;
use zaguan::webhook::{payload, signature};

const SECRET: &[u8] = b"bench-app-secret";

/// A one-message notification of about 2 KB, as a Spanish-speaking customer sends it.
fn notification(n: u64) -> Vec<u8> {
    let text = "Hola, buenas tardes. Estoy buscando un piso de tres habitaciones en el barrio de \
        Salamanca o en Chamberí, con ascensor, terraza y, si es posible, plaza de garaje. \
        Mi presupuesto ronda los 650.000 €, aunque podría estirarme un poco si la vivienda está \
        reformada. ¿Tenéis algo disponible que pueda visitar este sábado por la mañana? También \
        me interesaría saber si trabajáis con alguna entidad para la hipoteca, porque ya tengo \
        la preaprobación del banco pero quiero comparar condiciones. Otra cosa: mi pareja \
        trabaja cerca de Nuevos Ministerios, así que la zona norte también nos valdría. \
        Preferimos exterior y con mucha luz; el ruido de la calle nos importa menos. ¡Gracias! 🏠🙂 \
        Por cierto, si hay algo en Chamartín o Tetuán con buena conexión de metro, también \
        me lo podéis enseñar. Os cuento un poco más: somos una familia de cuatro, con dos niños \
        pequeños, así que un colegio cerca sería ideal, y tenemos un perro mediano, por lo que \
        necesitamos que la comunidad admita mascotas. Si el piso tiene trastero, mejor. Podríamos \
        entrar a vivir a partir de febrero; antes no, porque tenemos contrato de alquiler hasta \
        enero. ¿Qué documentación necesitáis para reservar? ¿Se puede hacer la señal por \
        transferencia? Y si al final compramos, ¿os encargáis también de la tasación y del \
        certificado energético, o tenemos que buscarlos por nuestra cuenta? Quedo atenta a \
        vuestra respuesta. Un saludo, Lucía.";
    serde_json::to_vec(&serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "contacts": [{"profile": {"name": "Lucía Fernández Núñez"},
                          "wa_id": format!("346{:08}", n % 5000), "user_id": "ES.1502576394655843"}],
            "messages": [{
                "from": format!("346{:08}", n % 5000),
                "id": format!("wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUI1RjZDRUJGRjM0RjYz{n:012}"),
                "timestamp": "1764100800", "type": "text", "text": {"body": text}
            }]
        }}]}]
    }))
    .unwrap()
}

fn verify_and_parse(c: &mut Criterion) {
    let body = notification(1);
    let header = signature::sign(SECRET, &body);
    let mut group = c.benchmark_group("webhook");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function(format!("verify+parse {} B", body.len()), |b| {
        b.iter(|| {
            signature::verify(Some(SECRET), Some(header.as_bytes()), &body).unwrap();
            payload::parse(&body).unwrap()
        })
    });
    group.bench_function("verify", |b| {
        b.iter(|| signature::verify(Some(SECRET), Some(header.as_bytes()), &body).unwrap())
    });
    group.bench_function("parse", |b| b.iter(|| payload::parse(&body).unwrap()));
    group.finish();
}

fn post_webhook_handler(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = router(AppState::new(
        Arc::new(MemoryStore::new()),
        None,
        Some(SecretString::from(
            String::from_utf8(SECRET.to_vec()).unwrap(),
        )),
    ));
    let mut next = 0u64;
    c.bench_function("webhook/POST handler, MemoryStore, new message", |b| {
        b.to_async(&runtime).iter_custom(|iters| {
            // Every request carries a message id never seen before: the store's insert path,
            // not its duplicate path. Bodies are made and signed before the clock starts.
            let requests: Vec<(Vec<u8>, String)> = (0..iters)
                .map(|_| {
                    next += 1;
                    let body = notification(next);
                    let header = signature::sign(SECRET, &body);
                    (body, header)
                })
                .collect();
            let app = app.clone();
            async move {
                let start = Instant::now();
                for (body, header) in requests {
                    let request = Request::post("/webhook")
                        .header("x-hub-signature-256", header)
                        .body(Body::from(body))
                        .unwrap();
                    let response = app.clone().oneshot(request).await.unwrap();
                    assert!(response.status().is_success());
                }
                start.elapsed()
            }
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = verify_and_parse, post_webhook_handler
}
criterion_main!(benches);
