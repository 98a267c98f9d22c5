//! A local server speaking the Graph API's messages endpoint: records every request and
//! answers from a script, then with success.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// A request the fake Graph API received.
#[derive(Debug, Clone)]
pub struct Received {
    pub phone_number_id: String,
    pub authorization: Option<String>,
    pub body: Value,
    pub at: Instant,
}

/// A scripted answer: status, JSON body, optional `Retry-After` seconds.
pub type Answer = (StatusCode, Value, Option<u64>);

#[derive(Default)]
pub struct FakeGraph {
    pub received: Mutex<Vec<Received>>,
    pub answers: Mutex<VecDeque<Answer>>,
    /// How long each text takes to be answered (recorded, i.e. delivered, on arrival).
    pub delay: Mutex<std::time::Duration>,
    /// Messages to this recipient are refused for good: 400, Graph code 131026 (undeliverable).
    pub refused: Mutex<Option<String>>,
}

impl FakeGraph {
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The texts of the messages received (not the marks-as-read).
    pub fn texts(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|r| {
                r.body["text"]["body"]
                    .as_str()
                    .or(r.body["interactive"]["body"]["text"].as_str())
                    .map(str::to_owned)
            })
            .collect()
    }
}

async fn messages(
    State(graph): State<Arc<FakeGraph>>,
    Path(phone_number_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let n = {
        let mut received = graph.received.lock().unwrap();
        received.push(Received {
            phone_number_id,
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: body.clone(),
            at: Instant::now(),
        });
        received.len()
    };
    let delay = *graph.delay.lock().unwrap();
    if body.get("status").is_none() && !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let refused = graph.refused.lock().unwrap().clone();
    if body.get("status").is_none() && refused.is_some_and(|to| body["to"] == to.as_str()) {
        return (
            StatusCode::BAD_REQUEST,
            Json(graph_error(131026, "(#131026) Message undeliverable")),
        )
            .into_response();
    }
    let scripted = graph.answers.lock().unwrap().pop_front();
    let (status, answer, retry_after) = scripted.unwrap_or_else(|| {
        let answer = if body.get("status").is_some() {
            json!({"success": true})
        } else {
            json!({"messaging_product": "whatsapp",
                   "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                   "messages": [{"id": format!("wamid.OUT{n}")}]})
        };
        (StatusCode::OK, answer, None)
    });
    let mut response = (status, Json(answer)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", seconds.to_string().parse().unwrap());
    }
    response
}

pub fn graph_error(code: i64, message: &str) -> Value {
    json!({"error": {"message": message, "type": "OAuthException", "code": code,
                     "error_data": {"messaging_product": "whatsapp", "details": message},
                     "fbtrace_id": "AbCdEf"}})
}

/// Serves `graph` on a free loopback port; returns the base URL without the version
/// (`http://127.0.0.1:PORT`); the messages endpoint is `/v21.0/{phone_number_id}/messages`.
pub async fn serve(graph: Arc<FakeGraph>) -> String {
    super::serve_local(
        axum::Router::new()
            .route("/v21.0/{phone_number_id}/messages", post(messages))
            .with_state(graph),
    )
    .await
}
