//! The agency's side of the loop through the real binary: `zaguan serve` with a business file,
//! signed webhooks, a fake OpenAI-format model and the fake Graph API, on the embedded store
//! and on MongoDB (FerretDB in CI). A customer asks for a person — in so many words, through an
//! assistant's `request_human`, or as a confirmed `request_callback` — and the staff member on
//! duty is told on WhatsApp within seconds while the customer gets one honest reply; nobody
//! taking it tells the next one after the SLA; outside opening hours the customer hears when
//! the office opens; and «¿a qué hora abrís el sábado?» is answered from the business file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use chrono::{Datelike as _, Utc};
use serde_json::{Value, json};

use common::graph::FakeGraph;
use common::{TestMongo, free_port, zaguan};
use zaguan::domain::phrases;

/// The demo's staff who take handoffs: Lucía, then (on MongoDB, where the test sets the staff
/// up) Marta.
const LUCIA: &str = "34699000001";
const MARTA: &str = "34699000003";
const ADMIN_TOKEN: &str = "agency-test-admin-token-of-32-chars-at-least";

// ---------------------------------------------------------------------------------------------
// The model: enough rules to ask for a person, a callback and the opening hours.

async fn chat_completions(
    State(calls): State<Arc<AtomicUsize>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    calls.fetch_add(1, Ordering::SeqCst);
    Json(rule_model(&body))
}

fn rule_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    let last = messages.last().unwrap();
    let role = last["role"].as_str().unwrap_or_default();
    let content = last["content"].as_str().unwrap_or_default();
    let call = |name: &str, args: Value| {
        json!({"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{"id": format!("call_{}", messages.len()), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let say = |text: &str| json!({"role": "assistant", "content": text, "refusal": null});
    let message = if system.contains("especialista en financiación") {
        if role == "tool" && content.starts_with("The conversation is now handled") {
            call(
                "request_callback",
                json!({"reason": "Estudio de hipoteca para el P-1001", "preferred_time": "por la tarde"}),
            )
        } else if content.starts_with("Waiting for the user's confirmation") {
            say("¿Te llamamos? Confírmalo con el botón.")
        } else if content.starts_with("Callback request") {
            say("Hecho: el asesor te llamará.")
        } else {
            say("¿Algo más sobre tu hipoteca?")
        }
    } else if role == "user" && content.contains("llamar") {
        call(
            "ToMortgageLoanAssistant",
            json!({"query": "quiere que le llame un asesor hipotecario"}),
        )
    } else if role == "user" && content.contains("precio del P-") {
        call(
            "request_human",
            json!({"reason": "Quiere negociar el precio del P-1001"}),
        )
    } else if role == "user" && content.contains("sábado") {
        call("business_info", json!({"topic": "hours"}))
    } else if role == "tool" && content.contains("Horario de apertura") {
        // Quotes the file's line for Saturday, as a model reading the tool result would.
        let saturday = content
            .lines()
            .find_map(|l| l.strip_prefix("- sábado: "))
            .unwrap_or("no consta");
        say(&format!("Los sábados abrimos: {saturday}."))
    } else if role == "tool" && content.starts_with("Done: a person") {
        say("Ya he avisado a una persona del equipo; te escribirá por aquí.")
    } else {
        say("¿En qué te ayudo?")
    };
    json!({
        "id": "chatcmpl-agency", "object": "chat.completion", "created": 1, "model": "rules",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message": message}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    })
}

// ---------------------------------------------------------------------------------------------
// The service.

/// Open all day, every day, but for `saturday`, so the Saturday hours say where they came from.
fn business_open_now() -> String {
    let mut text =
        String::from("name = \"Inmobiliaria Prueba\"\ncontact = [\"Tel. 960 111 222\"]\n[hours]\n");
    for day in zaguan::business::WEEKDAYS {
        if day == "saturday" {
            text.push_str("saturday = [\"0:00-11:00\", \"11:00-24:00\"]\n");
        } else {
            text.push_str(&format!("{day} = [\"0:00-24:00\"]\n"));
        }
    }
    text
}

/// Closed until 9:00 tomorrow (business time): only tomorrow has hours.
fn business_closed_until_tomorrow() -> String {
    let tomorrow = Utc::now()
        .with_timezone(&chrono_tz::Europe::Madrid)
        .weekday()
        .succ();
    let day = zaguan::business::WEEKDAYS[tomorrow.num_days_from_monday() as usize];
    format!("name = \"Inmobiliaria Prueba\"\n[hours]\n{day} = [\"9:00-10:00\"]\n")
}

struct Service {
    child: Child,
    port: u16,
    graph: Arc<FakeGraph>,
    model_calls: Arc<AtomicUsize>,
    prompts: tempfile::TempDir,
    sent: usize,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    async fn start(mongo: Option<&TestMongo>) -> Self {
        let prompts = tempfile::tempdir().unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        for entry in std::fs::read_dir(source).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, prompts.path().join(path.file_name().unwrap())).unwrap();
        }
        std::fs::write(prompts.path().join("business.toml"), business_open_now()).unwrap();
        let graph = Arc::new(FakeGraph::default());
        let graph_url = common::graph::serve(graph.clone()).await;
        let model_calls = Arc::new(AtomicUsize::new(0));
        let model = common::serve_local(
            axum::Router::new()
                .route(
                    "/v1/chat/completions",
                    axum::routing::post(chat_completions),
                )
                .with_state(model_calls.clone()),
        )
        .await;
        let port = free_port();
        let mut command = zaguan();
        command
            .arg("serve")
            .env("ZAGUAN_BIND_ADDR", format!("127.0.0.1:{port}"))
            .env("WHATSAPP_APP_SECRET", common::APP_SECRET)
            .env("WHATSAPP_ACCESS_TOKEN", "EAAG-agency")
            .env("WHATSAPP_API_BASE_URL", format!("{graph_url}/v21.0"))
            .env("LLM_PRIMARY", "openai:rules")
            .env("LLM_FALLBACK", "openai:rules")
            .env("OPENAI_API_KEY", "sk-agency")
            .env("OPENAI_BASE_URL", format!("{model}/v1"))
            .env("ZAGUAN_FAST_ROUTE", "false")
            .env("ZAGUAN_USER_TURNS_PER_MINUTE", "0")
            .env("ZAGUAN_PROMPTS_DIR", prompts.path())
            .env("ZAGUAN_HANDOFF_SLA", "2s")
            .env("ZAGUAN_PUBLIC_URL", "https://zaguan.example")
            .env("ZAGUAN_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("ZAGUAN_INSTANCE_ID", format!("agency-{port}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(db) = mongo {
            command
                .env("MONGODB_URI", std::env::var("MONGODB_URI").unwrap())
                .env("MONGODB_DATABASE", db.store.database().name());
        }
        let child = command.spawn().unwrap();
        let service = Self {
            child,
            port,
            graph,
            model_calls,
            prompts,
            sent: 0,
        };
        service.wait_ready().await;
        service
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

    /// `text` from `customer` (named `name`), signed as Meta signs it; the message's wamid.
    async fn customer_says(&mut self, customer: &str, name: &str, text: &str) -> String {
        self.sent += 1;
        let wamid = format!("wamid.AGENCY{}.{}", customer, self.sent);
        let body = serde_json::to_vec(&json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
                "contacts": [{"profile": {"name": name}, "wa_id": customer}],
                "messages": [{"from": customer, "id": wamid, "timestamp": Utc::now().timestamp().to_string(),
                              "type": "text", "text": {"body": text}}],
            }}]}]
        }))
        .unwrap();
        let signature = zaguan::webhook::signature::sign(common::APP_SECRET.as_bytes(), &body);
        let response = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{}/webhook", self.port))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        wamid
    }

    /// The messages the Graph API received for `to` (not marks-as-read), in order.
    fn messages_to(&self, to: &str) -> Vec<Value> {
        self.graph
            .received()
            .into_iter()
            .filter(|r| r.body["to"] == json!(to) && r.body["type"] != Value::Null)
            .map(|r| r.body)
            .collect()
    }

    /// Waits up to `limit` for a message to `to` that mentions `needle`; how long it took.
    async fn wait_for_message(&self, to: &str, needle: &str, limit: Duration) -> Duration {
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
    fn texts_to(&self, to: &str) -> Vec<String> {
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

    async fn prompts_version(&self) -> String {
        let body: Value = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/admin/prompts", self.port))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["version"].as_str().unwrap().to_owned()
    }

    /// Replaces the business file and waits until the service runs it.
    async fn rewrite_business(&self, text: &str) {
        let before = self.prompts_version().await;
        let path: PathBuf = self.prompts.path().join("business.toml");
        std::fs::write(path, text).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.prompts_version().await == before {
            assert!(
                Instant::now() < deadline,
                "the new business file was not loaded"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How many messages to `to` mention `needle` (in a template's parameters or a text).
fn notice_mentions(service: &Service, to: &str, needle: &str) -> usize {
    service
        .messages_to(to)
        .iter()
        .filter(|m| m.to_string().contains(needle))
        .count()
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

async fn a_customer_asking_for_a_person_reaches_the_staff_on_duty(service: &mut Service) {
    let customer = "34611300001";
    let before = service.model_calls.load(Ordering::SeqCst);
    service
        .customer_says(customer, "Ana Torres", "Quiero hablar con una persona")
        .await;
    let took = service
        .wait_for_message(LUCIA, "+34611300001", Duration::from_secs(5))
        .await;
    eprintln!("agency: staff told {took:?} after the customer asked for a person");
    // The notice names the customer and the reason; Lucía never wrote, so it is the template.
    let notice = service
        .messages_to(LUCIA)
        .into_iter()
        .find(|m| m.to_string().contains("+34611300001"))
        .unwrap();
    assert_eq!(notice["type"], json!("template"), "{notice}");
    assert_eq!(notice["template"]["name"], json!("staff_handoff"));
    let parameters = notice["template"]["components"][0]["parameters"].to_string();
    assert!(parameters.contains("Ana Torres"), "{parameters}");
    assert!(
        parameters.contains("ha pedido hablar con una persona"),
        "{parameters}"
    );
    assert!(
        parameters.contains("https://zaguan.example/console/conversations/34611300001"),
        "{parameters}"
    );
    // The customer: one honest reply, and no model was asked.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        service.texts_to(customer),
        [phrases::handoff_told(Some("es"))]
    );
    assert_eq!(service.model_calls.load(Ordering::SeqCst), before);
}

async fn an_assistants_request_human_reaches_the_staff(service: &mut Service) {
    let customer = "34611300002";
    service
        .customer_says(
            customer,
            "Bruno Díaz",
            "Quiero que alguien me ayude con el precio del P-1001",
        )
        .await;
    service
        .wait_for_message(
            LUCIA,
            "Quiere negociar el precio del P-1001",
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(notice_mentions(service, LUCIA, "+34611300002"), 1);
    service
        .wait_for_message(customer, "Ya he avisado", Duration::from_secs(5))
        .await;
}

async fn a_confirmed_callback_reaches_the_staff(service: &mut Service) {
    let customer = "34611300003";
    service
        .customer_says(customer, "Carla Ruiz", "¿Me puede llamar un asesor?")
        .await;
    service
        .wait_for_message(customer, "Confírmalo", Duration::from_secs(5))
        .await;
    // Nothing before the yes.
    assert_eq!(notice_mentions(service, LUCIA, "+34611300003"), 0);
    service.customer_says(customer, "Carla Ruiz", "sí").await;
    service
        .wait_for_message(
            LUCIA,
            "Llamar al cliente: Estudio de hipoteca para el P-1001",
            Duration::from_secs(5),
        )
        .await;
    service
        .wait_for_message(customer, "el asesor te llamará", Duration::from_secs(5))
        .await;
}

async fn saturday_hours_come_from_the_business_file(service: &mut Service) {
    let customer = "34611300004";
    service
        .customer_says(customer, "Diego Gil", "¿A qué hora abrís el sábado?")
        .await;
    service
        .wait_for_message(
            customer,
            "Los sábados abrimos: 0:00–11:00 y 11:00–24:00.",
            Duration::from_secs(5),
        )
        .await;
}

async fn nobody_taking_it_tells_the_next_one_after_the_sla(service: &mut Service) {
    let customer = "34611300005";
    service
        .customer_says(customer, "Elena Mora", "con un agente")
        .await;
    let first = service
        .wait_for_message(LUCIA, "+34611300005", Duration::from_secs(5))
        .await;
    // ZAGUAN_HANDOFF_SLA=2s: then Marta.
    let next = service
        .wait_for_message(MARTA, "+34611300005", Duration::from_secs(10))
        .await;
    assert!(next > first, "Marta after Lucía: {first:?} then {next:?}");
    let escalated = service
        .messages_to(MARTA)
        .into_iter()
        .find(|m| m.to_string().contains("+34611300005"))
        .unwrap();
    assert!(
        escalated
            .to_string()
            .contains("ha pedido hablar con una persona"),
        "{escalated}"
    );
}

async fn after_hours_the_customer_hears_when_the_office_opens(service: &mut Service) {
    service
        .rewrite_business(&business_closed_until_tomorrow())
        .await;
    let customer = "34611300006";
    service
        .customer_says(customer, "Fermín Sanz", "quiero hablar con una persona")
        .await;
    service
        .wait_for_message(
            customer,
            "mañana a partir de las 9:00",
            Duration::from_secs(5),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(service.texts_to(customer).len(), 1);
    assert_eq!(
        notice_mentions(service, LUCIA, "+34611300006"),
        0,
        "nobody is woken up at night"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_embedded_store_staff_are_told_and_customers_hear_the_truth() {
    let mut service = Service::start(None).await;
    a_customer_asking_for_a_person_reaches_the_staff_on_duty(&mut service).await;
    an_assistants_request_human_reaches_the_staff(&mut service).await;
    a_confirmed_callback_reaches_the_staff(&mut service).await;
    saturday_hours_come_from_the_business_file(&mut service).await;
    // The demo's Javier keeps hours of his own, so whether anyone is on duty depends on when
    // this runs: the after-hours and escalation scenarios run on MongoDB, with staff set up.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_staff_are_told_escalated_and_customers_hear_the_truth() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    // The demo data, with Lucía and Marta taking handoffs at the agency's hours.
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    let set = common::seeded_demo(&realestate).await;
    let mut staff = set.staff.clone();
    for member in &mut staff {
        member.notify_handoffs = member.id == "A-01" || member.id == "A-03";
        member.hours = None;
    }
    use zaguan::realestate::RealEstateStore as _;
    realestate.upsert_staff(&staff).await.unwrap();
    let mut service = Service::start(Some(&db)).await;
    a_customer_asking_for_a_person_reaches_the_staff_on_duty(&mut service).await;
    an_assistants_request_human_reaches_the_staff(&mut service).await;
    a_confirmed_callback_reaches_the_staff(&mut service).await;
    saturday_hours_come_from_the_business_file(&mut service).await;
    nobody_taking_it_tells_the_next_one_after_the_sla(&mut service).await;
    after_hours_the_customer_hears_when_the_office_opens(&mut service).await;
    drop(service);
    db.drop().await;
}
