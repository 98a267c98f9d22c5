//! The whole path with the real provider clients: a signed webhook in, the workers run the turn,
//! the primary model (an OpenAI-format server) fails with 500 on every call, the fallback (an
//! Anthropic-format server) delegates and then answers, and the reply lands in the outbox. The
//! history crosses providers (a tool call made by one is answered to the other), and every call
//! is accounted for in the store.

use crate::common;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use common::{TestApp, text_notification};
use serde_json::{Value, json};
use zaguan::config::Config;
use zaguan::domain::CallOutcome;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::llm::{
    AnthropicClient, CallPolicy, ChatMessage, FallbackChain, Llm, LlmRequest, OpenAiClient,
};
use zaguan::outbound::Outbound;
use zaguan::runtime::UsageRecorder;
use zaguan::runtime::{WorkerSettings, Workers};
use zaguan::startup::build_engine;
use zaguan::store::{MemoryStore, OutboxEntry, Store};

const OPENAI_KEY: &str = "sk-test-openai-secret";
const ANTHROPIC_KEY: &str = "sk-ant-test-secret";

/// What a fake model server received, and what it still has to answer.
#[derive(Default)]
struct FakeModel {
    requests: Mutex<Vec<Value>>,
    answers: Mutex<VecDeque<(StatusCode, Value)>>,
}

impl FakeModel {
    fn answering(answers: Vec<(StatusCode, Value)>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into()),
            ..Self::default()
        })
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// A status the fake server answers with a body that never comes, as a hung model would.
const STALL: StatusCode = StatusCode::GATEWAY_TIMEOUT;

async fn answer(
    State(model): State<Arc<FakeModel>>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    model.requests.lock().unwrap().push(body);
    let (status, answer) = model.answers.lock().unwrap().pop_front().unwrap_or((
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"error": {"message": "script exhausted"}}),
    ));
    if status == STALL {
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
    (status, Json(answer))
}

/// Serves `model` at `path` on a free loopback port; returns the base URL.
async fn serve(path: &str, model: Arc<FakeModel>) -> String {
    common::serve_local(
        axum::Router::new()
            .route(path, post(answer))
            .with_state(model),
    )
    .await
}

fn anthropic_message(content: Value, stop_reason: &str) -> (StatusCode, Value) {
    (
        StatusCode::OK,
        json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": 812, "output_tokens": 37}
        }),
    )
}

const PROMPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/prompts");

/// The service as `zaguan serve` builds it — configuration from variables, the real clients,
/// the workers — in front of the two fake model servers.
struct Service {
    app: TestApp,
    store: Arc<dyn Store>,
    usage: UsageRecorder,
    workers: Workers,
}

async fn service(
    store: Arc<dyn Store>,
    openai: &Arc<FakeModel>,
    anthropic: &Arc<FakeModel>,
    extra: &[(&str, &str)],
) -> Service {
    let openai_url = serve("/v1/chat/completions", openai.clone()).await;
    let anthropic_url = serve("/v1/messages", anthropic.clone()).await;
    let vars: HashMap<String, String> = [
        ("LLM_PRIMARY", "openai:gpt-test".to_owned()),
        ("OPENAI_BASE_URL", format!("{openai_url}/v1")),
        ("OPENAI_API_KEY", OPENAI_KEY.to_owned()),
        ("LLM_FALLBACK", "anthropic:claude-test".to_owned()),
        ("ANTHROPIC_BASE_URL", anthropic_url),
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY.to_owned()),
        ("ZAGUAN_PROMPTS_DIR", PROMPTS.to_owned()),
        ("ZAGUAN_LLM_TIMEOUT", "10s".to_owned()),
    ]
    .into_iter()
    .chain(extra.iter().map(|(k, v)| (*k, (*v).to_owned())))
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = Config::from_vars(vars).unwrap();
    let app = TestApp::with_store(store.clone());
    let usage = UsageRecorder::spawn(store.clone());
    let realestate = zaguan::startup::open_realestate(&config, None)
        .await
        .unwrap();
    let engine =
        Arc::new(build_engine(&config, store.clone(), realestate, Some(usage.clone())).unwrap());
    let workers = Workers::spawn(
        engine,
        Arc::new(Outbound::dry_run(store.clone())),
        app.state.arrivals.clone(),
        WorkerSettings::default(),
    );
    Service {
        app,
        store,
        usage,
        workers,
    }
}

impl Service {
    /// Posts one signed text message, waits (up to 10 s) for the reply to it, then stops the
    /// workers and writes the usage records.
    async fn answer(self, wamid: &str, from: &str, text: &str) -> Vec<OutboxEntry> {
        self.answer_each(&[(wamid, from, text)])
            .await
            .pop()
            .unwrap()
    }

    /// [`answer`](Self::answer) for several messages, one after the other's reply.
    async fn answer_each(self, messages: &[(&str, &str, &str)]) -> Vec<Vec<OutboxEntry>> {
        let mut all = Vec::new();
        for &(wamid, from, text) in messages {
            let body = text_notification(&[(wamid, from, text)]);
            assert_eq!(self.app.post_webhook(body).await, StatusCode::OK);
            let reply_to = WaMessageId::parse(wamid).unwrap();
            let mut replies = Vec::new();
            for _ in 0..200 {
                replies = self.store.outbox_in_reply_to(&reply_to).await.unwrap();
                if !replies.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            all.push(replies);
        }
        self.workers.stop().await;
        self.usage.flush().await;
        all
    }
}

async fn primary_failing_fallback_answers(store: Arc<dyn Store>) {
    // The primary fails every call, echoing our key as some gateways do.
    let openai = FakeModel::answering(
        (0..4)
            .map(|_| {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json!({"error": {"message": format!("upstream failure for {OPENAI_KEY}")}}),
                )
            })
            .collect(),
    );
    let anthropic = FakeModel::answering(vec![
        anthropic_message(
            json!([{"type": "tool_use", "id": "toolu_01A", "name": "ToAppointmentAssistant",
                    "input": {"query": "ver un piso en Ruzafa"}}]),
            "tool_use",
        ),
        anthropic_message(
            json!([{"type": "text", "text": "¿Qué día te viene bien para verlo?"}]),
            "end_turn",
        ),
    ]);
    // No keyword of any assistant: the primary agent's model has to decide.
    let replies = service(store.clone(), &openai, &anthropic, &[])
        .await
        .answer(
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQ3",
            "34600111222",
            "Hola, me gustaría ver un piso en Ruzafa",
        )
        .await;

    assert_eq!(replies.len(), 1, "one reply");
    assert_eq!(replies[0].body, "¿Qué día te viene bien para verlo?");
    let wa_id = WaId::parse("34600111222").unwrap();
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(
        conversation.dialog_state.to_list(),
        ["appointment_assistant"]
    );

    // Both nodes asked the primary first, then the fallback.
    assert_eq!(openai.requests().len(), 2);
    let sent = anthropic.requests();
    assert_eq!(sent.len(), 2);
    // The fallback continues a history it made itself, in its own format: the delegation's
    // tool_use and the router's tool_result share the id.
    let messages = sent[1]["messages"].as_array().unwrap();
    let tool_use = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_use")
        .expect("the delegation is in the history");
    let tool_result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_result")
        .expect("its result is in the history");
    assert_eq!(tool_use["id"], tool_result["tool_use_id"]);
    // And the primary, asked second, got the same history in its own format.
    let openai_second = &openai.requests()[1]["messages"];
    assert!(
        openai_second
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == tool_use["id"]),
        "{openai_second}"
    );

    // Usage: four calls, by provider, model and outcome, with the fallback's tokens.
    let calls = store.llm_calls("34600111222", 10).await.unwrap();
    let seen: Vec<(&str, &str, &str, CallOutcome)> = calls
        .iter()
        .map(|c| {
            (
                c.agent.as_str(),
                c.provider.as_str(),
                c.model.as_str(),
                c.outcome,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "primary_assistant",
                "openai",
                "gpt-test",
                CallOutcome::Unavailable
            ),
            (
                "primary_assistant",
                "anthropic",
                "claude-test",
                CallOutcome::Ok
            ),
            (
                "appointment_assistant",
                "openai",
                "gpt-test",
                CallOutcome::Unavailable
            ),
            (
                "appointment_assistant",
                "anthropic",
                "claude-test",
                CallOutcome::Ok
            ),
        ]
    );
    assert_eq!((calls[1].input_tokens, calls[1].output_tokens), (812, 37));
    assert!(calls[0].error.as_deref().unwrap().contains("HTTP 500"));
    for call in &calls {
        let error = call.error.as_deref().unwrap_or_default();
        assert!(
            !error.contains(OPENAI_KEY),
            "a key reached the store: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_primary_failing_fallback_answers() {
    primary_failing_fallback_answers(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_primary_failing_fallback_answers() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    primary_failing_fallback_answers(Arc::new(db.store.clone())).await;
    db.drop().await;
}

// ---- the call policy over the real clients ---------------------------------------------------

fn openai_text(text: &str) -> (StatusCode, Value) {
    (
        StatusCode::OK,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1764100800,
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                "message": {"role": "assistant", "content": text, "refusal": null}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
        }),
    )
}

fn openai_error(status: StatusCode) -> (StatusCode, Value) {
    (
        status,
        json!({"error": {"message": "failure", "type": "server_error"}}),
    )
}

/// The two real clients against two fake servers, chained with `policy`.
struct Chain {
    chain: FallbackChain,
    openai: Arc<FakeModel>,
    anthropic: Arc<FakeModel>,
}

async fn chain(
    openai: Vec<(StatusCode, Value)>,
    anthropic: Vec<(StatusCode, Value)>,
    policy: CallPolicy,
) -> Chain {
    let (openai, anthropic) = (
        FakeModel::answering(openai),
        FakeModel::answering(anthropic),
    );
    let openai_url = serve("/v1/chat/completions", openai.clone()).await;
    let anthropic_url = serve("/v1/messages", anthropic.clone()).await;
    let http_timeout = Duration::from_secs(20);
    let primary = OpenAiClient::new(
        format!("{openai_url}/v1").parse().unwrap(),
        None,
        "gpt-test".into(),
        http_timeout,
    )
    .unwrap();
    let fallback = AnthropicClient::new(
        anthropic_url.parse().unwrap(),
        None,
        "claude-test".into(),
        1024,
        http_timeout,
    )
    .unwrap();
    let chain = FallbackChain::new(
        vec![
            ("openai:gpt-test".into(), Arc::new(primary) as Arc<dyn Llm>),
            (
                "anthropic:claude-test".into(),
                Arc::new(fallback) as Arc<dyn Llm>,
            ),
        ],
        policy,
    );
    Chain {
        chain,
        openai,
        anthropic,
    }
}

fn hola() -> LlmRequest {
    LlmRequest {
        agent: "primary_assistant".into(),
        messages: vec![ChatMessage::human("hola")],
        ..LlmRequest::default()
    }
}

fn fallback_text() -> (StatusCode, Value) {
    anthropic_message(
        json!([{"type": "text", "text": "desde el respaldo"}]),
        "end_turn",
    )
}

fn counts(c: &Chain) -> (usize, usize) {
    (c.openai.requests().len(), c.anthropic.requests().len())
}

#[tokio::test]
async fn an_empty_answer_is_asked_again_once() {
    let c = chain(
        vec![openai_text(""), openai_text("¡Hola!")],
        vec![],
        CallPolicy::default(),
    )
    .await;
    assert_eq!(c.chain.complete(&hola()).await.unwrap().content, "¡Hola!");
    assert_eq!(counts(&c), (2, 0));
}

#[tokio::test]
async fn a_500_falls_back() {
    let c = chain(
        vec![openai_error(StatusCode::INTERNAL_SERVER_ERROR)],
        vec![fallback_text()],
        CallPolicy::default(),
    )
    .await;
    assert_eq!(
        c.chain.complete(&hola()).await.unwrap().content,
        "desde el respaldo"
    );
    assert_eq!(counts(&c), (1, 1));
}

#[tokio::test]
async fn a_timeout_falls_back() {
    let c = chain(
        vec![(STALL, json!({}))],
        vec![fallback_text()],
        CallPolicy {
            timeout: Duration::from_millis(300),
            ..CallPolicy::default()
        },
    )
    .await;
    let started = std::time::Instant::now();
    assert_eq!(
        c.chain.complete(&hola()).await.unwrap().content,
        "desde el respaldo"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(counts(&c), (1, 1));
}

/// What OpenAI answers when it refuses a request, by cause.
fn openai_refusal(status: StatusCode, code: &str, message: &str) -> (StatusCode, Value) {
    (
        status,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": null,
                         "code": code}}),
    )
}

fn refusals() -> Vec<(StatusCode, Value)> {
    vec![
        openai_refusal(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            &format!("Incorrect API key provided: {OPENAI_KEY}."),
        ),
        openai_refusal(
            StatusCode::FORBIDDEN,
            "unsupported_country_region_territory",
            "Country, region, or territory not supported",
        ),
        openai_refusal(
            StatusCode::NOT_FOUND,
            "model_not_found",
            "The model `gpt-test` does not exist or you do not have access to it.",
        ),
    ]
}

/// One conversation whose messages trip the content filter, twenty turns in a row: each turn
/// falls back, none counts against the provider, and the next customer still gets the primary.
#[tokio::test]
async fn a_conversations_refusals_leave_the_breaker_closed_for_the_others() {
    let filtered = openai_refusal(
        StatusCode::BAD_REQUEST,
        "content_filter",
        "The response was filtered due to the prompt triggering Azure OpenAI's content \
         management policy.",
    );
    let mut openai = vec![filtered; 20];
    openai.push(openai_text("¡Hola, Marta!"));
    let c = chain(
        openai,
        vec![fallback_text(); 20],
        CallPolicy {
            breaker_failures: 3,
            ..CallPolicy::default()
        },
    )
    .await;
    let difficult = LlmRequest {
        conversation: Some("34600111001".into()),
        ..hola()
    };
    for turn in 0..20 {
        assert_eq!(
            c.chain.complete(&difficult).await.unwrap().content,
            "desde el respaldo",
            "turn {turn}"
        );
        assert!(c.chain.open_breakers().is_empty(), "turn {turn}");
    }
    let other = LlmRequest {
        conversation: Some("34600111002".into()),
        ..hola()
    };
    assert_eq!(
        c.chain.complete(&other).await.unwrap().content,
        "¡Hola, Marta!"
    );
    assert_eq!(counts(&c), (21, 20));
}

/// A refusal that comes as a 200 is a refusal: OpenAI's `finish_reason: "content_filter"` goes
/// to the fallback (without counting against the provider), and Anthropic's
/// `stop_reason: "refusal"` is no answer either.
#[tokio::test]
async fn a_refusal_as_a_200_goes_to_the_fallback() {
    let filtered = (
        StatusCode::OK,
        json!({
            "id": "chatcmpl-2", "object": "chat.completion", "created": 1764100800,
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "content_filter", "logprobs": null,
                "message": {"role": "assistant", "content": null, "refusal": null}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 0, "total_tokens": 20}
        }),
    );
    let c = chain(
        vec![filtered.clone(), filtered],
        vec![
            fallback_text(),
            anthropic_message(json!([{"type": "text", "text": ""}]), "refusal"),
        ],
        CallPolicy::default(),
    )
    .await;
    assert_eq!(
        c.chain.complete(&hola()).await.unwrap().content,
        "desde el respaldo"
    );
    assert!(c.chain.open_breakers().is_empty());
    let both = c.chain.complete(&hola()).await.unwrap_err();
    assert!(
        matches!(&both, zaguan::llm::LlmError::Rejected { status: 200, message } if message.starts_with("refusal")),
        "{both:?}"
    );
}

/// A history too long for the model is asked again once with the older half left out, from a
/// customer's message on; the provider is not counted as failing.
#[tokio::test]
async fn a_context_too_long_is_asked_again_with_a_shorter_history() {
    let too_long = openai_refusal(
        StatusCode::BAD_REQUEST,
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens. However, your messages \
         resulted in 130512 tokens. Please reduce the length of the messages.",
    );
    let c = chain(
        vec![too_long, openai_text("Con menos historia, sí.")],
        vec![],
        CallPolicy::default(),
    )
    .await;
    let long = LlmRequest {
        messages: vec![
            ChatMessage::human("Busco piso en Valencia"),
            ChatMessage::ai("¿Compra o alquiler?"),
            ChatMessage::human("Alquiler"),
            ChatMessage::ai("¿Presupuesto?"),
            ChatMessage::human("Hasta 1.200"),
            ChatMessage::ai("Tengo tres opciones."),
            ChatMessage::human("¿Y la primera tiene terraza?"),
        ],
        ..hola()
    };
    assert_eq!(
        c.chain.complete(&long).await.unwrap().content,
        "Con menos historia, sí."
    );
    let requests = c.openai.requests();
    assert_eq!(requests.len(), 2);
    let sent = |r: &Value| r["messages"].as_array().unwrap().len();
    assert!(sent(&requests[1]) < sent(&requests[0]), "{requests:?}");
    assert_eq!(
        requests[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "¿Y la primera tiene terraza?"
    );
    assert!(c.chain.open_breakers().is_empty());
}

/// 401, 403 and 404 are the provider's state: each falls back, and they open its breaker.
#[tokio::test]
async fn every_refusal_falls_back_and_counts_in_the_breaker() {
    for refusal in refusals() {
        let status = refusal.0;
        let c = chain(
            vec![refusal.clone(), refusal.clone(), refusal],
            vec![fallback_text(), fallback_text(), fallback_text()],
            CallPolicy {
                breaker_failures: 2,
                ..CallPolicy::default()
            },
        )
        .await;
        for _ in 0..3 {
            assert_eq!(
                c.chain.complete(&hola()).await.unwrap().content,
                "desde el respaldo",
                "HTTP {status}"
            );
        }
        // Two refusals opened the breaker: the third call went straight to the fallback.
        assert_eq!(counts(&c), (2, 3), "HTTP {status}");
        assert_eq!(
            c.chain.open_breakers(),
            ["openai:gpt-test"],
            "HTTP {status}"
        );
    }
}

/// A primary that refuses every call (here a revoked key): each turn is answered by the
/// fallback, through the engine, and once the breaker opens the primary is not asked at all.
async fn a_refusing_primary_the_fallback_answers_every_turn(store: Arc<dyn Store>) {
    let openai = FakeModel::answering(refusals().into_iter().take(1).cycle().take(4).collect());
    let anthropic = FakeModel::answering((0..4).map(|_| fallback_text()).collect());
    let turns = [
        (
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQa",
            "34600111501",
            "Buenas tardes",
        ),
        (
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQb",
            "34600111502",
            "Buenas tardes",
        ),
        (
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQc",
            "34600111503",
            "Buenas tardes",
        ),
        (
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQd",
            "34600111504",
            "Buenas tardes",
        ),
    ];
    let replies = service(
        store.clone(),
        &openai,
        &anthropic,
        &[("ZAGUAN_LLM_BREAKER_FAILURES", "2")],
    )
    .await
    .answer_each(&turns)
    .await;
    for (replies, (_, from, _)) in replies.iter().zip(&turns) {
        let bodies: Vec<&str> = replies.iter().map(|r| r.body.as_str()).collect();
        assert_eq!(bodies, ["desde el respaldo"], "{from}");
    }
    assert_eq!(
        (openai.requests().len(), anthropic.requests().len()),
        (2, 4)
    );
    let calls = store.llm_calls("34600111501", 10).await.unwrap();
    let outcomes: Vec<_> = calls.iter().map(|c| c.outcome).collect();
    assert_eq!(outcomes, [CallOutcome::Rejected, CallOutcome::Ok]);
    let error = calls[0].error.as_deref().unwrap();
    assert!(
        error.contains("401") && error.contains("Incorrect API key"),
        "{error}"
    );
    assert!(
        !error.contains(OPENAI_KEY),
        "a key reached the store: {error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_a_refusing_primary_the_fallback_answers_every_turn() {
    a_refusing_primary_the_fallback_answers_every_turn(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_a_refusing_primary_the_fallback_answers_every_turn() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    a_refusing_primary_the_fallback_answers_every_turn(Arc::new(db.store.clone())).await;
    db.drop().await;
}

#[tokio::test]
async fn an_open_breaker_skips_the_primary_then_probes_it() {
    let c = chain(
        vec![
            openai_error(StatusCode::SERVICE_UNAVAILABLE),
            openai_text("he vuelto"),
        ],
        vec![fallback_text(), fallback_text()],
        CallPolicy {
            breaker_failures: 1,
            breaker_cooldown: Duration::from_millis(300),
            ..CallPolicy::default()
        },
    )
    .await;
    assert_eq!(
        c.chain.complete(&hola()).await.unwrap().content,
        "desde el respaldo"
    );
    assert_eq!(c.chain.open_breakers(), ["openai:gpt-test"]);
    // Open: the primary's server is not called at all.
    assert_eq!(
        c.chain.complete(&hola()).await.unwrap().content,
        "desde el respaldo"
    );
    assert_eq!(counts(&c), (1, 2));
    // After the cool-down, one probe reaches it; it answers, and the breaker closes.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(
        c.chain.complete(&hola()).await.unwrap().content,
        "he vuelto"
    );
    assert!(c.chain.open_breakers().is_empty());
    assert_eq!(counts(&c), (2, 2));
}

/// The prompts folder without its business file.
fn prompts_without_business_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(PROMPTS).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != zaguan::business::BUSINESS_FILE {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// Without a business file, `ZAGUAN_BUSINESS_NAME` and `ZAGUAN_BUSINESS_CONTACT` reach the
/// prompts, and the contact line follows a reply that cannot help.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_business_is_named_in_the_prompts_and_its_contact_follows_an_offline_reply() {
    let prompts = prompts_without_business_file();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let contact = "Tel. 910 000 000 (L–V 9–19 h)";
    // The first turn is answered by the primary model; then both models are down.
    let openai = FakeModel::answering(vec![openai_text("¡Hola! ¿En qué te ayudo?")]);
    let anthropic = FakeModel::answering(vec![]);
    let replies = service(
        store.clone(),
        &openai,
        &anthropic,
        &[
            ("ZAGUAN_BUSINESS_NAME", "Casas Ribera"),
            ("ZAGUAN_BUSINESS_CONTACT", contact),
            ("ZAGUAN_FAST_ROUTE", "false"),
            ("ZAGUAN_PROMPTS_DIR", prompts.path().to_str().unwrap()),
        ],
    )
    .await
    .answer_each(&[
        (
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZCMDE",
            "34600111601",
            "Buenas tardes",
        ),
        (
            "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZCMDI",
            "34600111601",
            "¿Seguís ahí?",
        ),
    ])
    .await;
    let system = openai.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("de Casas Ribera"), "{system}");
    assert!(system.contains(contact), "{system}");
    assert!(!system.contains("Zaguan"), "{system}");
    assert_eq!(replies[0][0].body, "¡Hola! ¿En qué te ayudo?");
    let offline = replies[1]
        .iter()
        .map(|r| r.body.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    // Both models down: what can be done without a model, and how to reach a person.
    assert!(offline.contains("modo limitado"), "{offline}");
    assert!(offline.contains(contact), "{offline}");
    assert!(offline.contains("Buscar un inmueble"), "{offline}");
}

/// The business file's name and contact lines win over the environment's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_business_files_name_and_contact_override_the_environments() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let openai = FakeModel::answering(vec![openai_text("¡Hola!")]);
    let anthropic = FakeModel::answering(vec![]);
    service(
        store.clone(),
        &openai,
        &anthropic,
        &[
            ("ZAGUAN_BUSINESS_NAME", "Casas Ribera"),
            ("ZAGUAN_BUSINESS_CONTACT", "Tel. 600 000 000"),
            ("ZAGUAN_FAST_ROUTE", "false"),
        ],
    )
    .await
    .answer_each(&[(
        "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZCMEE",
        "34600111602",
        "Buenas tardes",
    )])
    .await;
    let business = zaguan::business::parse(
        &std::fs::read_to_string(format!("{PROMPTS}/{}", zaguan::business::BUSINESS_FILE)).unwrap(),
    )
    .unwrap();
    let system = openai.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains(&format!("de {}", business.name.as_deref().unwrap())),
        "{system}"
    );
    assert!(
        system.contains(&business.contact_line().unwrap()),
        "{system}"
    );
    assert!(
        !system.contains("Casas Ribera") && !system.contains("600 000 000"),
        "{system}"
    );
}

/// Both providers down: the turn still ends with a reply, from the matching assistant served
/// offline (the appointment assistant asks which listing).
async fn both_down_the_offline_engine_answers(store: Arc<dyn Store>) {
    let openai = FakeModel::answering(vec![]);
    let anthropic = FakeModel::answering(vec![]);
    // The fast path off: keywords route only because no model answers.
    let replies = service(
        store.clone(),
        &openai,
        &anthropic,
        &[("ZAGUAN_FAST_ROUTE", "false")],
    )
    .await
    .answer(
        "wamid.HBgLMzQ2MDAxMTEyMjIVAgASGBQzQUZBMEQ4",
        "34600111444",
        "Quiero agendar una visita",
    )
    .await;

    assert_eq!(replies.len(), 1);
    assert!(
        replies[0].body.contains("modo limitado"),
        "{}",
        replies[0].body
    );
    assert!(
        replies[0].body.contains("¿Qué inmueble?"),
        "{}",
        replies[0].body
    );
    let wa_id = WaId::parse("34600111444").unwrap();
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(
        conversation.dialog_state.to_list(),
        ["appointment_assistant"]
    );
    // Each provider was asked once (by the primary agent); the subgraph did not wait again.
    assert_eq!(
        (openai.requests().len(), anthropic.requests().len()),
        (1, 1)
    );
    let calls = store.llm_calls("34600111444", 10).await.unwrap();
    let (model, without): (Vec<_>, Vec<_>) = calls
        .iter()
        .partition(|c| c.provider == "openai" || c.provider == "anthropic");
    assert_eq!(model.len(), 2, "{calls:?}");
    assert!(model.iter().all(|c| c.outcome == CallOutcome::Unavailable));
    // The steps served from the agency's data are on record too, for the reports' shares.
    assert!(!without.is_empty(), "{calls:?}");
    assert!(
        without
            .iter()
            .all(|c| c.provider == "offline" && c.input_tokens + c.output_tokens == 0),
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_both_down_the_offline_engine_answers() {
    both_down_the_offline_engine_answers(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_both_down_the_offline_engine_answers() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    both_down_the_offline_engine_answers(Arc::new(db.store.clone())).await;
    db.drop().await;
}
