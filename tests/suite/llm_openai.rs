//! The OpenAI Chat Completions client against a local axum server standing in for the API: the
//! request it sends (checked by hand and against OpenAI's own OpenAPI description), the answers
//! it parses, and how every failure is classified.

use crate::common;
use crate::common::provider::{Canned, Captured};

use std::sync::OnceLock;
use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;
use zaguan::domain::ToolCall;
use zaguan::llm::{ChatMessage, Llm, LlmError, LlmRequest, OpenAiClient, ToolSpec};

const KEY: &str = "sk-test-0123456789abcdef";
const MODEL: &str = "gpt-4.1-mini";

// ---- the fake server ----------------------------------------------------------------------

/// The fake OpenAI API and its base URL (with its `/v1`).
struct FakeOpenAi {
    base_url: Url,
    server: Canned,
}

impl FakeOpenAi {
    async fn answering(status: u16, body: impl Into<String>) -> Self {
        let server = Canned::answering(status, body).await;
        Self {
            base_url: Url::parse(&format!("{}/v1", server.root)).unwrap(),
            server,
        }
    }

    fn only_request(&self) -> Captured {
        self.server.only_request()
    }
}

fn client(base_url: &Url) -> OpenAiClient {
    client_with(base_url, Some(KEY), Duration::from_secs(5))
}

fn client_with(base_url: &Url, key: Option<&str>, timeout: Duration) -> OpenAiClient {
    OpenAiClient::new(
        base_url.clone(),
        key.map(|k| SecretString::from(k.to_owned())),
        MODEL.to_owned(),
        timeout,
    )
    .unwrap()
}

// ---- fixtures -----------------------------------------------------------------------------

fn search_tool() -> ToolSpec {
    ToolSpec {
        name: "search_listings".to_owned(),
        description: "Search the listings by city and rooms.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "rooms": {"type": "integer"}
            },
            "required": ["city"]
        }),
    }
}

/// A conversation with every kind of message: user, assistant with a tool call, tool result,
/// assistant text.
fn full_request() -> LlmRequest {
    LlmRequest {
        agent: "listings".into(),
        conversation: None,
        system: "You are Zaguan, a real-estate assistant.".into(),
        messages: vec![
            ChatMessage::human("Busco un depto de 2 ambientes en Rosario"),
            ChatMessage::Ai {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_1".to_owned(),
                    name: "search_listings".to_owned(),
                    args: json!({"city": "Rosario", "rooms": 2}).into(),
                }],
            },
            ChatMessage::tool("call_1", r#"[{"id":"L-17","price":"USD 90000"}]"#),
            ChatMessage::ai("Encontré uno: L-17, USD 90000."),
            ChatMessage::human("¿Tiene balcón?"),
        ],
        tools: vec![search_tool()].into(),
    }
}

fn plain_request() -> LlmRequest {
    LlmRequest {
        agent: "greeter".into(),
        conversation: None,
        system: String::new().into(),
        messages: vec![ChatMessage::human("Hola")],
        tools: Vec::new().into(),
    }
}

/// A complete `chat.completion` object around one assistant `message`.
fn completion(message: Value) -> Value {
    let finish_reason = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
    })
}

fn text_answer() -> Value {
    completion(json!({"role": "assistant", "content": "¡Hola! ¿En qué te ayudo?", "refusal": null}))
}

fn tool_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

fn tool_calls_answer(calls: Vec<Value>) -> Value {
    completion(json!({
        "role": "assistant",
        "content": null,
        "refusal": null,
        "tool_calls": calls
    }))
}

fn one_call_answer() -> Value {
    tool_calls_answer(vec![tool_call(
        "call_abc123",
        "search_listings",
        r#"{"city":"Rosario","rooms":2}"#,
    )])
}

fn several_calls_answer() -> Value {
    tool_calls_answer(vec![
        tool_call("call_a", "search_listings", r#"{"city":"Rosario"}"#),
        tool_call("call_b", "search_listings", r#"{"city":"Funes","rooms":3}"#),
        tool_call("call_c", "book_visit", "{}"),
    ])
}

fn bad_arguments_answer() -> Value {
    tool_calls_answer(vec![tool_call(
        "call_bad",
        "search_listings",
        r#"{"city": "Rosario", "rooms": }"#,
    )])
}

fn foreign_id_answer() -> Value {
    tool_calls_answer(vec![tool_call(
        "fc:1/2.ü",
        "search_listings",
        r#"{"city":"Rosario"}"#,
    )])
}

// ---- OpenAI's OpenAPI description ---------------------------------------------------------

use common::spec::spec_validator;

fn request_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| spec_validator("CreateChatCompletionRequest"))
}

fn response_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| spec_validator("CreateChatCompletionResponse"))
}

fn assert_valid(validator: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match OpenAI's OpenAPI description:\n{}\n{instance:#}",
        errors.join("\n")
    );
}

// ---- the request --------------------------------------------------------------------------

#[tokio::test]
async fn a_request_carries_the_key_the_system_prompt_and_every_role_in_openai_shape() {
    let server = FakeOpenAi::answering(200, text_answer().to_string()).await;
    client(&server.base_url)
        .complete(&full_request())
        .await
        .unwrap();

    let request = server.only_request();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}"))
    );
    assert_eq!(
        request.body,
        json!({
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are Zaguan, a real-estate assistant."},
                {"role": "user", "content": "Busco un depto de 2 ambientes en Rosario"},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search_listings", "arguments": r#"{"city":"Rosario","rooms":2}"#}
                }]},
                {"role": "tool", "tool_call_id": "call_1", "content": r#"[{"id":"L-17","price":"USD 90000"}]"#},
                {"role": "assistant", "content": "Encontré uno: L-17, USD 90000."},
                {"role": "user", "content": "¿Tiene balcón?"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "search_listings",
                "description": "Search the listings by city and rooms.",
                "parameters": search_tool().parameters
            }}],
            "parallel_tool_calls": false
        })
    );
    let arguments = &request.body["messages"][2]["tool_calls"][0]["function"]["arguments"];
    assert!(arguments.is_string(), "arguments must be a JSON string");
}

#[tokio::test]
async fn a_request_without_key_system_prompt_or_tools_sends_none_of_them() {
    let server = FakeOpenAi::answering(200, text_answer().to_string()).await;
    client_with(&server.base_url, None, Duration::from_secs(5))
        .complete(&plain_request())
        .await
        .unwrap();

    let request = server.only_request();
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.body,
        json!({"model": MODEL, "messages": [{"role": "user", "content": "Hola"}]})
    );
}

#[tokio::test]
async fn the_requests_sent_are_valid_against_openais_openapi_description() {
    let validator = request_validator();
    for request in [full_request(), plain_request()] {
        let server = FakeOpenAi::answering(200, text_answer().to_string()).await;
        client(&server.base_url).complete(&request).await.unwrap();
        assert_valid(validator, &server.only_request().body, "the request body");
    }
}

#[test]
fn the_spec_check_catches_a_malformed_request() {
    let validator = request_validator();
    // The check is only worth something if it can fail: arguments as an object, not a string,
    // and an unknown role.
    let with_arguments = |arguments: Value| {
        json!({
            "model": MODEL,
            "messages": [{"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": arguments}
            }]}]
        })
    };
    assert!(validator.is_valid(&with_arguments(json!(r#"{"a":1}"#))));
    assert!(!validator.is_valid(&with_arguments(json!({"a": 1}))));
    let unknown_role = json!({"model": MODEL, "messages": [{"role": "human", "content": "hi"}]});
    assert!(!validator.is_valid(&unknown_role));
}

// ---- the answer ---------------------------------------------------------------------------

#[test]
fn the_answers_served_here_are_valid_openai_responses() {
    let validator = response_validator();
    for answer in [
        text_answer(),
        one_call_answer(),
        several_calls_answer(),
        bad_arguments_answer(),
        foreign_id_answer(),
    ] {
        assert_valid(validator, &answer, "a canned answer");
    }
}

async fn answer_to(body: Value) -> zaguan::llm::LlmResponse {
    let server = FakeOpenAi::answering(200, body.to_string()).await;
    client(&server.base_url)
        .complete(&full_request())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_text_answer_is_parsed_with_its_token_usage() {
    let response = answer_to(text_answer()).await;
    assert_eq!(response.content, "¡Hola! ¿En qué te ayudo?");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.usage.input_tokens, 42);
    assert_eq!(response.usage.output_tokens, 7);
}

#[tokio::test]
async fn a_tool_call_is_parsed_with_its_id_name_and_arguments() {
    let response = answer_to(one_call_answer()).await;
    assert_eq!(response.content, "");
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "call_abc123".to_owned(),
            name: "search_listings".to_owned(),
            args: json!({"city": "Rosario", "rooms": 2}).into(),
        }]
    );
}

#[tokio::test]
async fn several_tool_calls_in_one_message_are_all_kept_in_order() {
    let response = answer_to(several_calls_answer()).await;
    let calls: Vec<(&str, &str, &Value)> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), &*c.args))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a", "search_listings", &json!({"city": "Rosario"})),
            (
                "call_b",
                "search_listings",
                &json!({"city": "Funes", "rooms": 3})
            ),
            ("call_c", "book_visit", &json!({})),
        ]
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_are_kept_raw_with_an_error_instead_of_failing() {
    let response = answer_to(bad_arguments_answer()).await;
    let call = &response.tool_calls[0];
    assert_eq!(call.id, "call_bad");
    assert_eq!(
        *call.args,
        json!({"_raw": r#"{"city": "Rosario", "rooms": }"#, "_error": "arguments are not valid JSON"})
    );
}

#[tokio::test]
async fn a_tool_call_id_with_foreign_characters_is_replaced_by_a_portable_one() {
    let response = answer_to(foreign_id_answer()).await;
    let id = &response.tool_calls[0].id;
    assert_ne!(id, "fc:1/2.ü");
    assert!(
        (1..=64).contains(&id.len())
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "`{id}` is not [A-Za-z0-9_-]{{1,64}}"
    );
    assert_eq!(*response.tool_calls[0].args, json!({"city": "Rosario"}));
}

// ---- failures -----------------------------------------------------------------------------

async fn error_for(status: u16, body: &str) -> LlmError {
    let server = FakeOpenAi::answering(status, body).await;
    client(&server.base_url)
        .complete(&full_request())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn a_success_without_choices_is_unavailable() {
    let mut body = text_answer();
    body["choices"] = json!([]);
    assert!(matches!(
        error_for(200, &body.to_string()).await,
        LlmError::Unavailable(_)
    ));
}

/// OpenAI's wire format, for the shared conformance suite.
fn provider() -> common::provider::Provider {
    common::provider::Provider {
        client: |base, key, timeout| Box::new(client_with(base, key, timeout)),
        base: |server| Url::parse(&format!("{server}/v1")).unwrap(),
        error: |kind, message| json!({"error": {"message": message, "type": kind}}).to_string(),
        request: full_request,
        key: KEY,
    }
}

crate::provider_conformance!(provider());

/// The same suite over the model calls' own HTTP/2 connections (h2c, `LLM_HTTP2=prior-knowledge`).
fn provider_over_http2() -> common::provider::Provider {
    common::provider::Provider {
        client: |base, key, timeout| {
            Box::new(
                client_with(base, key, timeout)
                    .with_transport(zaguan::llm::Http2::PriorKnowledge, 64, timeout)
                    .unwrap(),
            )
        },
        ..provider()
    }
}

crate::provider_conformance!(conformance_over_http2, provider_over_http2());

/// The client encodes each tool list once and reuses it: the bodies are the ones a fresh
/// encoding gives, for the first call, the next ones, and a call without tools.
#[test]
fn tools_encoded_once_give_the_same_body() {
    let client = client(&"http://127.0.0.1:9/v1".parse().unwrap());
    let request = full_request();
    let fresh = zaguan::llm::openai::encode_request(MODEL, &request);
    assert_eq!(client.encode(&request), fresh);
    assert_eq!(client.encode(&request), fresh, "from the encoded list");
    let other = LlmRequest {
        tools: std::sync::Arc::from(vec![search_tool(), search_tool()]),
        ..full_request()
    };
    assert_eq!(
        client.encode(&other),
        zaguan::llm::openai::encode_request(MODEL, &other),
        "another list is encoded on its own"
    );
    let plain = plain_request();
    let body: Value = serde_json::from_slice(&client.encode(&plain)).unwrap();
    assert!(body.get("tools").is_none(), "no tools, no field: {body}");
    assert_eq!(
        client.encode(&plain),
        zaguan::llm::openai::encode_request(MODEL, &plain)
    );
}

// ---- HTTP/2 ---------------------------------------------------------------------------------

/// With `LLM_HTTP2=prior-knowledge` the calls go over HTTP/2 (h2c here), many at once on few
/// connections: one per 100 calls the policy lets run at once, round robin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_share_http2_connections_one_per_hundred_in_flight() {
    use std::collections::HashSet;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    type Seen = Arc<Mutex<Vec<(axum::http::Version, SocketAddr)>>>;
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route(
            "/v1/chat/completions",
            axum::routing::post(
                |axum::extract::State(seen): axum::extract::State<Seen>,
                 axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
                 request: axum::extract::Request| async move {
                    seen.lock().unwrap().push((request.version(), peer));
                    // Long enough for every call to be in flight at once.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    axum::Json(text_answer())
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap()
    });
    let base = Url::parse(&format!("http://{addr}/v1")).unwrap();
    let client = Arc::new(
        client(&base)
            .with_transport(
                zaguan::llm::Http2::PriorKnowledge,
                250,
                Duration::from_secs(5),
            )
            .unwrap(),
    );
    let calls: Vec<_> = (0..30)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.complete(&plain_request()).await })
        })
        .collect();
    for call in calls {
        let answer = call.await.unwrap().unwrap();
        assert_eq!(answer.content, "¡Hola! ¿En qué te ayudo?");
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 30);
        assert!(
            seen.iter().all(|(v, _)| *v == axum::http::Version::HTTP_2),
            "{seen:?}"
        );
        let connections: HashSet<SocketAddr> = seen.iter().map(|(_, peer)| *peer).collect();
        assert_eq!(connections.len(), 3, "250 in flight: three connections");
    }

    // `off`: HTTP/1.1.
    let client = client_with(&base, Some(KEY), Duration::from_secs(5))
        .with_transport(zaguan::llm::Http2::Off, 250, Duration::from_secs(5))
        .unwrap();
    client.complete(&plain_request()).await.unwrap();
    let last = seen.lock().unwrap().last().copied().unwrap();
    assert_eq!(last.0, axum::http::Version::HTTP_11);
}
