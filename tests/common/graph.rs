//! A local server speaking the Graph API's messages endpoint, the one fake Graph API of the
//! suites: it records every request, answers from a script or with a fault, and keeps what it
//! delivered. Like Meta, it can post a `sent` status webhook for each message it accepts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// A message the fake Graph API accepted, under the wamid it answered with.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub to: String,
    /// The message's `type`: text, image, interactive, template.
    pub kind: String,
    pub body: String,
    pub wamid: String,
    pub at: Instant,
}

/// A scripted answer: status, JSON body, optional `Retry-After` seconds.
pub type Answer = (StatusCode, Value, Option<u64>);

/// How every request is answered until changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GraphFault {
    #[default]
    None,
    /// 429 with `Retry-After: 1` and Meta's 130429.
    RateLimited,
    ServerError,
    /// Never answers (the client's timeout must fire); nothing is delivered.
    Hang,
}

#[derive(Default)]
pub struct FakeGraph {
    pub received: Mutex<Vec<Received>>,
    pub answers: Mutex<VecDeque<Answer>>,
    /// Scripted answers for messages to one recipient (not its marks-as-read), first first.
    pub answers_to: Mutex<Vec<(String, Answer)>>,
    pub fault: Mutex<GraphFault>,
    pub delivered: Mutex<Vec<Delivery>>,
    /// Time between accepting a message and answering: a sender killed meanwhile never
    /// learns its wamid.
    pub delay: Mutex<Duration>,
    /// Messages to this recipient are refused for good: 400, Graph code 131026 (undeliverable).
    pub refused: Mutex<Option<String>>,
    /// Where the signed body of each accepted message's `sent` status webhook goes, if set.
    pub statuses: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Vec<u8>>>>,
    /// Leaves `biz_opaque_callback_data` out of the status webhooks.
    pub drop_callback_data: AtomicBool,
    /// Interactive messages of this `interactive.type` (`carousel`…) are refused for good: 400,
    /// Graph code 131009 (a parameter value is not valid).
    pub refused_interactive: Mutex<Option<String>>,
}

impl FakeGraph {
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The texts of the messages received (not the marks-as-read).
    pub fn texts(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|r| text_of(&r.body).map(str::to_owned))
            .collect()
    }

    pub fn delivered(&self) -> Vec<Delivery> {
        self.delivered.lock().unwrap().clone()
    }

    pub fn requests(&self) -> usize {
        self.received.lock().unwrap().len()
    }
}

fn text_of(body: &Value) -> Option<&str> {
    body["text"]["body"]
        .as_str()
        .or(body["interactive"]["body"]["text"].as_str())
}

fn error(status: StatusCode, code: i64, message: &str, retry_after: Option<u64>) -> Response {
    answer((status, graph_error(code, message), retry_after))
}

fn answer((status, body, retry_after): Answer) -> Response {
    let mut response = (status, Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", seconds.to_string().parse().unwrap());
    }
    response
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
    let fault = *graph.fault.lock().unwrap();
    match fault {
        GraphFault::None => {}
        GraphFault::RateLimited => {
            let message = "(#130429) Rate limit hit";
            return error(StatusCode::TOO_MANY_REQUESTS, 130429, message, Some(1));
        }
        GraphFault::ServerError => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                2,
                "Service unavailable",
                None,
            );
        }
        GraphFault::Hang => {
            tokio::time::sleep(Duration::from_secs(120)).await;
            return error(StatusCode::GATEWAY_TIMEOUT, 2, "Timeout", None);
        }
    }
    let is_read_mark = body.get("status").is_some();
    let to = body["to"].as_str().unwrap_or_default().to_owned();
    let refused = graph.refused.lock().unwrap().clone();
    if !is_read_mark && refused.as_deref() == Some(to.as_str()) {
        let message = "(#131026) Message undeliverable";
        return error(StatusCode::BAD_REQUEST, 131026, message, None);
    }
    let refused_kind = graph.refused_interactive.lock().unwrap().clone();
    if refused_kind.is_some() && body["interactive"]["type"].as_str() == refused_kind.as_deref() {
        let message = "(#131009) Parameter value is not valid";
        return error(StatusCode::BAD_REQUEST, 131009, message, None);
    }
    if !is_read_mark {
        let mut answers_to = graph.answers_to.lock().unwrap();
        if let Some(i) = answers_to
            .iter()
            .position(|(recipient, _)| *recipient == to)
        {
            return answer(answers_to.remove(i).1);
        }
    }
    if let Some(scripted) = graph.answers.lock().unwrap().pop_front() {
        return answer(scripted);
    }
    if is_read_mark {
        return Json(json!({"success": true})).into_response();
    }
    let wamid = format!("wamid.OUT{n}");
    graph.delivered.lock().unwrap().push(Delivery {
        to: to.clone(),
        kind: body["type"].as_str().unwrap_or_default().to_owned(),
        body: text_of(&body).unwrap_or_default().to_owned(),
        wamid: wamid.clone(),
        at: Instant::now(),
    });
    if let Some(statuses) = graph.statuses.lock().unwrap().as_ref() {
        let callback_data = body["biz_opaque_callback_data"]
            .as_str()
            .filter(|_| !graph.drop_callback_data.load(Ordering::Relaxed));
        let _ = statuses.send(sent_status(&wamid, &to, callback_data));
    }
    let delay = *graph.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    Json(json!({"messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid}]}))
    .into_response()
}

/// The `sent` status notification Meta posts for a message it accepted.
pub fn sent_status(wamid: &str, to: &str, callback_data: Option<&str>) -> Vec<u8> {
    let mut status = json!({"id": wamid, "status": "sent", "timestamp": "1764100900",
                            "recipient_id": to});
    if let Some(data) = callback_data {
        status["biz_opaque_callback_data"] = json!(data);
    }
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "statuses": [status],
        }}]}]
    }))
    .unwrap()
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
