//! Human handoff end to end: signed webhooks, the workers, the engine and the outbound channel
//! against a local Graph API. An assistant flags the conversation for a person; an operator
//! takes it (the bot goes silent, the customer's messages are still stored, status webhooks and
//! echoes change nothing), replies through the admin API (formatted, delivered once), releases
//! it (the bot answers again), and a handoff left to expire also gives it back.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::http::StatusCode;
use common::graph::FakeGraph;
use common::{TestApp, bearer, text_notification};
use secrecy::SecretString;
use serde_json::{Value, json};
use zaguan::agents::AgentRegistry;
use zaguan::domain::MessageRole;
use zaguan::domain::ToolCall;
use zaguan::domain::WaId;
use zaguan::engine::handoff::RequestHuman;
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::runtime::monitor::Monitor;
use zaguan::runtime::{WorkerSettings, Workers};
use zaguan::store::Store;

const CUSTOMER: &str = "34611000777";

/// Echoes the customer; asked for a person, calls `request_human` and then says so.
struct DeskLlm;

#[async_trait]
impl Llm for DeskLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let last_human = common::last_human(request);
        let after_tool = matches!(request.messages.last(), Some(ChatMessage::Tool { .. }));
        let offered = request.tools.iter().any(|t| t.name == "request_human");
        Ok(if after_tool {
            LlmResponse {
                content: "Un compañero te escribirá por aquí en cuanto pueda.".to_owned(),
                ..LlmResponse::default()
            }
        } else if offered && last_human.contains("persona") {
            LlmResponse {
                tool_calls: vec![ToolCall {
                    id: "call_h1".to_owned(),
                    name: "request_human".to_owned(),
                    args: json!({"reason": "Quiere hablar con una persona sobre el piso P-1021"})
                        .into(),
                }],
                ..LlmResponse::default()
            }
        } else {
            LlmResponse {
                content: format!("Recibido: {last_human}"),
                ..LlmResponse::default()
            }
        })
    }
}

/// The agency's one staff member who takes handoffs, on duty in the agency's hours (all day).
struct OnDuty;

const STAFF: &str = "34699000001";

#[async_trait]
impl zaguan::engine::handoff::StaffRoster for OnDuty {
    async fn handoff_staff(
        &self,
    ) -> zaguan::store::StoreResult<Vec<zaguan::engine::handoff::StaffOnCall>> {
        Ok(vec![zaguan::engine::handoff::StaffOnCall {
            id: "A-01".into(),
            name: "Lucía".into(),
            wa_id: WaId::parse(STAFF).unwrap(),
            hours: None,
            works_holidays: false,
        }])
    }
}

struct Desk {
    /// The prompts folder, for as long as the desk runs.
    _prompts: tempfile::TempDir,
    app: TestApp,
    graph: Arc<FakeGraph>,
    store: Arc<dyn Store>,
    workers: Workers,
    sent: usize,
}

impl Desk {
    async fn open(store: Arc<dyn Store>) -> Self {
        let graph = Arc::new(FakeGraph::default());
        let base = common::graph::serve(graph.clone()).await;
        let client = GraphClient::new(
            format!("{base}/v21.0").parse().unwrap(),
            Some(SecretString::from("EAAG-test".to_owned())),
            Duration::from_secs(5),
        )
        .unwrap();
        let outbound = Outbound::new(
            store.clone(),
            client,
            Limiters::new(&SendLimits::default()),
            OutboundSettings::default(),
        );
        // The shipped prompts with an agency open around the clock: whoever is on duty does
        // not depend on when this runs.
        let prompts = tempfile::tempdir().unwrap();
        let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        for entry in std::fs::read_dir(shipped).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, prompts.path().join(path.file_name().unwrap())).unwrap();
        }
        let always = zaguan::business::WEEKDAYS
            .map(|day| format!("{day} = [\"0:00-24:00\"]\n"))
            .concat();
        std::fs::write(
            prompts.path().join("business.toml"),
            format!("name = \"Inmobiliaria Prueba\"\n[hours]\n{always}"),
        )
        .unwrap();
        let engine = Engine::new(
            store.clone(),
            Arc::new(DeskLlm),
            Arc::new(AgentRegistry::load(prompts.path(), &zaguan::startup::known_tools()).unwrap()),
            Arc::new(ToolRegistry::new().with(RequestHuman::new(Arc::new(
                zaguan::engine::handoff::HandoffDesk::new(
                    store.clone(),
                    Some(Arc::new(OnDuty)),
                    zaguan::engine::handoff::HandoffSettings::default(),
                ),
            )))),
            EngineSettings {
                fast_route: false,
                ..EngineSettings::default()
            },
        );
        let app = TestApp::with_store(store.clone()).with_admin(Some(common::ADMIN_TOKEN));
        let workers = Workers::spawn(
            Arc::new(engine),
            Arc::new(outbound),
            app.state.arrivals.clone(),
            WorkerSettings {
                poll: Duration::from_millis(20),
                ..WorkerSettings::default()
            },
        );
        Self {
            _prompts: prompts,
            app,
            graph,
            store,
            workers,
            sent: 0,
        }
    }

    async fn customer_says(&mut self, text: &str) -> String {
        self.sent += 1;
        let wamid = format!("wamid.H{}", self.sent);
        let status = self
            .app
            .post_webhook(text_notification(&[(&wamid, CUSTOMER, text)]))
            .await;
        assert_eq!(status, StatusCode::OK);
        wamid
    }

    /// Waits until the inbox is drained and the outbox sent.
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let open = self.store.conversations_with_open_inbox(1).await.unwrap();
            let unsent = self
                .store
                .conversations_with_unsent_outbox(chrono::Utc::now(), 1)
                .await
                .unwrap();
            if open.is_empty() && unsent.is_empty() {
                // One more poll: a send in flight lands.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return;
            }
            assert!(Instant::now() < deadline, "not settled in 20 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// An admin API call, with the token of the body's `operator` (added to the team on first
    /// use), else the bootstrap admin's.
    async fn admin(&self, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let auth = match body.as_ref().and_then(|b| b["operator"].as_str()) {
            Some(name) => common::operator_token(&self.app, name).await,
            None => bearer(),
        };
        let body = body.map(|b| b.to_string());
        self.app
            .admin(method, uri, Some(&auth), body.as_deref())
            .await
    }

    async fn listed(&self, handoff: &str) -> Vec<Value> {
        let (status, body) = self
            .admin(
                "GET",
                &format!("/admin/conversations?handoff={handoff}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["conversations"].as_array().unwrap().clone()
    }

    /// Read marks ("typing…") sent for the customer's message `wamid`.
    fn marks_for(&self, wamid: &str) -> usize {
        self.graph
            .received()
            .iter()
            .filter(|r| r.body["message_id"] == json!(wamid))
            .count()
    }
}

/// A message the business sent from the WhatsApp Business app, echoed to the webhook.
fn echo_notification() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "smb_message_echoes", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "message_echoes": [{"from": "34910000000", "to": CUSTOMER, "id": "wamid.ECHO1",
                                "timestamp": "1764100900", "type": "text",
                                "text": {"body": "Te escribo yo"}}]
        }}]}]
    }))
    .unwrap()
}

/// A `delivered` status for one of our replies to the customer.
fn status_notification() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "statuses": [{"id": "wamid.OUT1", "status": "delivered", "timestamp": "1764100901",
                          "recipient_id": CUSTOMER}]
        }}]}]
    }))
    .unwrap()
}

async fn an_operator_takes_over_and_gives_the_conversation_back(store: Arc<dyn Store>) {
    let mut desk = Desk::open(store.clone()).await;
    let customer = WaId::parse(CUSTOMER).unwrap();
    let path = format!("/admin/conversations/{CUSTOMER}");

    desk.customer_says("Hola").await;
    desk.settle().await;
    assert_eq!(desk.graph.texts(), ["Recibido: Hola"]);

    // The customer asks for a person about a listing: the assistant asks for one, and the
    // staff member on duty is told on WhatsApp (a template: she never wrote to the number).
    desk.customer_says("Quiero hablar con una persona sobre el piso del anuncio")
        .await;
    desk.settle().await;
    let to_customer: Vec<String> = desk
        .graph
        .delivered()
        .into_iter()
        .filter(|d| d.to == CUSTOMER)
        .map(|d| d.body)
        .collect();
    assert_eq!(
        to_customer.last().unwrap(),
        "Un compañero te escribirá por aquí en cuanto pueda."
    );
    let to_staff: Vec<Value> = desk
        .graph
        .received()
        .into_iter()
        .filter(|r| r.body["to"] == json!(STAFF))
        .map(|r| r.body)
        .collect();
    assert_eq!(to_staff.len(), 1, "{to_staff:?}");
    assert_eq!(to_staff[0]["type"], json!("template"));
    let parameters = to_staff[0]["template"]["components"][0]["parameters"].to_string();
    assert!(parameters.contains("+34611000777"), "{parameters}");
    assert!(parameters.contains("sobre el piso P-1021"), "{parameters}");
    let requested = desk.listed("requested").await;
    assert_eq!(requested.len(), 1, "{requested:?}");
    assert_eq!(requested[0]["wa_id"], json!(CUSTOMER));
    assert_eq!(
        requested[0]["handoff_requested"]["reason"],
        json!("Quiere hablar con una persona sobre el piso P-1021")
    );
    let monitor = Monitor::new(store.clone(), Duration::from_secs(7200));
    let health = monitor.check(chrono::Utc::now()).await.unwrap();
    assert_eq!((health.handoffs_requested, health.handoffs_active), (1, 0));

    // An operator takes it.
    let (status, body) = desk
        .admin(
            "POST",
            &format!("{path}/handoff"),
            Some(json!({"operator": "lucia"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["handoff"]["operator"], json!("lucia"));
    assert!(
        desk.listed("requested").await.is_empty(),
        "taking settles the request"
    );
    let active = desk.listed("active").await;
    assert_eq!(active[0]["handoff"]["operator"], json!("lucia"));
    let health = monitor.check(chrono::Utc::now()).await.unwrap();
    assert_eq!((health.handoffs_requested, health.handoffs_active), (0, 1));

    // The customer writes: stored, no reply, no "typing…".
    let before = desk.graph.texts().len();
    let held = desk.customer_says("¿Hola? ¿Hay alguien?").await;
    desk.settle().await;
    assert_eq!(desk.graph.texts().len(), before, "the bot stays silent");
    assert_eq!(desk.marks_for(&held), 0, "no typing indicator while held");
    let history = store.recent_messages(&customer, 100).await.unwrap();
    let last = &history.last().unwrap().message;
    assert_eq!(
        (last.role, last.content.as_str()),
        (MessageRole::Human, "¿Hola? ¿Hay alguien?")
    );

    // Echoes of the business's own messages and delivery statuses do not end it.
    assert_eq!(
        desk.app.post_webhook(echo_notification()).await,
        StatusCode::OK
    );
    assert_eq!(
        desk.app.post_webhook(status_notification()).await,
        StatusCode::OK
    );
    desk.settle().await;
    assert_eq!(
        desk.listed("active").await.len(),
        1,
        "still with the operator"
    );

    // The operator answers: formatted for WhatsApp, delivered once.
    let (status, body) = desk
        .admin(
            "POST",
            &format!("{path}/messages"),
            Some(json!({"operator": "lucia",
                        "text": "Hola, soy **Lucía**. Te llamo en 5 minutos."})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    desk.settle().await;
    let texts = desk.graph.texts();
    assert_eq!(
        texts[before..],
        ["Hola, soy *Lucía*. Te llamo en 5 minutos."]
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(desk.graph.texts().len(), texts.len(), "sent once");
    let history = store.recent_messages(&customer, 100).await.unwrap();
    assert_eq!(
        history.last().unwrap().message.agent.as_deref(),
        Some("operator"),
        "the history shows who answered"
    );

    // Released: the bot answers again.
    let (status, body) = desk
        .admin(
            "POST",
            &format!("{path}/release"),
            Some(json!({"operator": "lucia"})),
        )
        .await;
    assert_eq!((status, &body["released"]), (StatusCode::OK, &json!(true)));
    let (status, body) = desk
        .admin(
            "POST",
            &format!("{path}/messages"),
            Some(json!({"operator": "lucia", "text": "¿Sigues ahí?"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "not taken: {body}");
    desk.customer_says("Gracias").await;
    desk.settle().await;
    assert_eq!(desk.graph.texts().last().unwrap(), "Recibido: Gracias");

    // A handoff left alone expires: the next message is the bot's again.
    let (status, body) = desk
        .admin(
            "POST",
            &format!("{path}/handoff"),
            Some(json!({"operator": "pablo", "for": "1s"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(desk.listed("active").await.is_empty(), "expired");
    desk.customer_says("¿Me confirmáis la cita?").await;
    desk.settle().await;
    assert_eq!(
        desk.graph.texts().last().unwrap(),
        "Recibido: ¿Me confirmáis la cita?"
    );
    let conversation = store.conversation(&customer).await.unwrap().unwrap();
    assert_eq!(conversation.handoff, None, "an expired handoff is cleared");

    // Bad requests.
    for (uri, body, expected) in [
        (
            format!("{path}/handoff"),
            json!({"operator": "x", "for": "soon"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/admin/conversations/34699999999/handoff".to_owned(),
            json!({"operator": "x"}),
            StatusCode::NOT_FOUND,
        ),
        (
            format!("{path}/messages"),
            json!({"operator": "x", "text": "  "}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, answer) = desk.admin("POST", &uri, Some(body.clone())).await;
        assert_eq!(status, expected, "{uri} {body}: {answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    desk.workers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_an_operator_takes_over_and_gives_the_conversation_back() {
    an_operator_takes_over_and_gives_the_conversation_back(Arc::new(
        zaguan::store::MemoryStore::new(),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_an_operator_takes_over_and_gives_the_conversation_back() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    an_operator_takes_over_and_gives_the_conversation_back(Arc::new(db.store.clone())).await;
    db.drop().await;
}
