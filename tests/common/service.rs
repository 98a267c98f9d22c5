//! The real `zaguan serve` for the binary suites: a copy of the shipped prompts (with a business
//! file of the test's), a fake OpenAI-format model answering by the test's rules, the fake Graph
//! API, signed webhooks in and the admin API beside them; on the embedded store or a MongoDB
//! database of the test's.

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde_json::{Value, json};

use super::graph::FakeGraph;
use super::{TestMongo, free_port, zaguan};

pub const ADMIN_TOKEN: &str = "binary-test-admin-token-of-32-chars-at-least";
/// The business number the fake Graph API is written to from.
pub const PHONE_NUMBER_ID: &str = "109876543210";

/// The fake model: the request's body in, the assistant's message (or a whole completion with
/// `choices`) out.
pub type Rules = fn(&Value) -> Value;

/// What the fake model saw and answered.
#[derive(Clone)]
pub struct ModelState {
    rules: Rules,
    pub calls: Arc<AtomicUsize>,
    /// Every request's body, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
}

async fn chat_completions(State(model): State<ModelState>, Json(body): Json<Value>) -> Json<Value> {
    model.calls.fetch_add(1, Ordering::SeqCst);
    model.requests.lock().unwrap().push(body.clone());
    let answer = (model.rules)(&body);
    if answer.get("choices").is_some() {
        return Json(answer);
    }
    Json(json!({
        "id": "chatcmpl-binary", "object": "chat.completion", "created": 1,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message": answer}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    }))
}

/// A tool call of the fake model.
pub fn call(messages: usize, name: &str, args: Value) -> Value {
    json!({"role": "assistant", "content": null, "refusal": null,
        "tool_calls": [{"id": format!("call_{messages}"), "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
}

/// A plain answer of the fake model.
pub fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text, "refusal": null})
}

/// How to start the service.
pub struct Options<'a> {
    pub rules: Rules,
    /// The business file; the shipped one when `None`.
    pub business: Option<String>,
    /// Variables beyond the ones every run sets; one given empty is unset.
    pub env: Vec<(&'static str, String)>,
    pub mongo: Option<&'a TestMongo>,
}

pub struct Service {
    child: Child,
    pub port: u16,
    pub graph: Arc<FakeGraph>,
    pub model: ModelState,
    pub prompts: tempfile::TempDir,
    sent: usize,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    pub async fn start(options: Options<'_>) -> Self {
        let prompts = tempfile::tempdir().unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        for entry in std::fs::read_dir(source).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, prompts.path().join(path.file_name().unwrap())).unwrap();
        }
        if let Some(business) = &options.business {
            std::fs::write(prompts.path().join("business.toml"), business).unwrap();
        }
        let graph = Arc::new(FakeGraph::default());
        let graph_url = super::graph::serve(graph.clone()).await;
        let model = ModelState {
            rules: options.rules,
            calls: Arc::new(AtomicUsize::new(0)),
            requests: Arc::new(Mutex::new(Vec::new())),
        };
        let model_url = super::serve_local(
            axum::Router::new()
                .route(
                    "/v1/chat/completions",
                    axum::routing::post(chat_completions),
                )
                .with_state(model.clone()),
        )
        .await;
        let port = free_port();
        let mut command = zaguan();
        command
            .arg("serve")
            .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
            .env("WHATSAPP_APP_SECRET", super::APP_SECRET)
            .env("WHATSAPP_ACCESS_TOKEN", "EAAG-binary")
            .env("WHATSAPP_API_BASE_URL", format!("{graph_url}/v21.0"))
            .env("LLM_PRIMARY", "openai:rules")
            .env("LLM_FALLBACK", "openai:rules")
            .env("OPENAI_API_KEY", "sk-binary")
            .env("OPENAI_BASE_URL", format!("{model_url}/v1"))
            .env("ZAGUAN_FAST_ROUTE", "false")
            .env("ZAGUAN_USER_TURNS_PER_MINUTE", "0")
            .env("ZAGUAN_PROMPTS_DIR", prompts.path())
            .env("ZAGUAN_PUBLIC_URL", "https://zaguan.example")
            .env("ZAGUAN_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("ZAGUAN_INSTANCE_ID", format!("binary-{port}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        // ZAGUAN_TEST_LOG=DIR keeps each service's log there, to see why a scenario failed.
        match std::env::var_os("ZAGUAN_TEST_LOG") {
            Some(dir) => {
                let log = std::fs::File::create(Path::new(&dir).join(format!("serve-{port}.log")))
                    .unwrap();
                command.env("RUST_LOG", "info").stderr(log);
            }
            None => {
                command.stderr(Stdio::null());
            }
        }
        for (name, value) in &options.env {
            // An empty value unsets what every run sets (no model at all, say).
            if value.is_empty() {
                command.env_remove(name);
            } else {
                command.env(name, value);
            }
        }
        if let Some(db) = options.mongo {
            command
                .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
                .env("MONGODB_DATABASE", db.store.database().name());
        }
        let child = command.spawn().unwrap();
        let service = Self {
            child,
            port,
            graph,
            model,
            prompts,
            sent: 0,
        };
        service.wait_ready().await;
        service
    }

    pub fn model_calls(&self) -> usize {
        self.model.calls.load(Ordering::SeqCst)
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("http://127.0.0.1:{}/readyz", self.port);
        while Instant::now() < deadline {
            if reqwest::get(&url).await.is_ok_and(|r| r.status() == 200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("zaguan serve not ready within 30 s");
    }

    /// A webhook body, signed as Meta signs it; asserts the 200.
    pub async fn post_webhook(&self, value: Value) {
        self.post_change("messages", value).await;
    }

    /// A change of `field` (`user_preferences`, `account_update`…), signed; asserts the 200.
    pub async fn post_change(&self, field: &str, value: Value) {
        let body = serde_json::to_vec(&json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"field": field, "value": value}]}]
        }))
        .unwrap();
        let signature = zaguan::webhook::signature::sign(super::APP_SECRET.as_bytes(), &body);
        let response = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{}/webhook", self.port))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }

    /// `message` (a Cloud API message object without `from`, `id`, `timestamp`) from
    /// `customer`, written `age` ago; the message's wamid.
    pub async fn customer_sends(
        &mut self,
        customer: &str,
        name: &str,
        mut message: Value,
        age: chrono::Duration,
    ) -> String {
        self.sent += 1;
        let wamid = format!("wamid.BIN{}.{}", customer, self.sent);
        message["from"] = json!(customer);
        message["id"] = json!(wamid);
        message["timestamp"] = json!((Utc::now() - age).timestamp().to_string());
        self.post_webhook(json!({
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": name}, "wa_id": customer}],
            "messages": [message],
        }))
        .await;
        wamid
    }

    /// `text` from `customer` (named `name`), written now; the message's wamid.
    pub async fn customer_says(&mut self, customer: &str, name: &str, text: &str) -> String {
        self.customer_sends(
            customer,
            name,
            json!({"type": "text", "text": {"body": text}}),
            chrono::Duration::zero(),
        )
        .await
    }

    /// The messages the Graph API received for `to` (not marks-as-read), in order.
    pub fn messages_to(&self, to: &str) -> Vec<Value> {
        self.graph
            .received()
            .into_iter()
            .filter(|r| r.body["to"] == json!(to) && r.body["type"] != Value::Null)
            .map(|r| r.body)
            .collect()
    }

    /// How many photos reached `to`: image messages and the cards of carousels.
    pub fn photos_to(&self, to: &str) -> usize {
        self.messages_to(to)
            .iter()
            .map(|m| match m["type"].as_str() {
                Some("image") => 1,
                Some("interactive") if m["interactive"]["type"] == "carousel" => {
                    m["interactive"]["action"]["cards"]
                        .as_array()
                        .map_or(0, Vec::len)
                }
                _ => 0,
            })
            .sum()
    }

    /// Waits up to `limit` for a message to `to` that mentions `needle`; how long it took.
    pub async fn wait_for_message(&self, to: &str, needle: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self
                .messages_to(to)
                .iter()
                .any(|m| m.to_string().contains(needle))
            {
                return started.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "no message to {to} mentioning «{needle}» within {limit:?}; to {to}: {:?}",
            self.messages_to(to)
        );
    }

    /// The text of each message to `to`.
    pub fn texts_to(&self, to: &str) -> Vec<String> {
        self.messages_to(to)
            .iter()
            .map(|m| {
                m["text"]["body"]
                    .as_str()
                    .or(m["interactive"]["body"]["text"].as_str())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// How many messages to `to` mention `needle` (in a template's parameters or a text).
    pub fn mentions(&self, to: &str, needle: &str) -> usize {
        self.messages_to(to)
            .iter()
            .filter(|m| m.to_string().contains(needle))
            .count()
    }

    /// An admin API call with the token; its status and JSON body (`null` when none).
    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let client = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let request = match method {
            "GET" => client.get(url),
            "POST" => client.post(url),
            "PATCH" => client.patch(url),
            other => panic!("no method {other}"),
        };
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let response = request.bearer_auth(ADMIN_TOKEN).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(json!(text)))
    }

    /// The prompts version the service runs.
    pub async fn prompts_version(&self) -> String {
        let (_, body) = self.admin("GET", "/admin/prompts", None).await;
        body["version"].as_str().unwrap().to_owned()
    }

    /// Replaces the business file and waits until the service runs it.
    pub async fn rewrite_business(&self, text: &str) {
        let before = self.prompts_version().await;
        std::fs::write(self.prompts.path().join("business.toml"), text).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.prompts_version().await == before {
            assert!(
                Instant::now() < deadline,
                "the new business file was not loaded"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.port))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// The sum of the samples of `family` whose labels contain every one of `labels`
/// (`key="value"` pairs) in a Prometheus text.
pub fn metric(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
