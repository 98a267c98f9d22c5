//! The Anthropic Messages client against a local axum server standing in for the API: the request
//! it sends, the answers it parses, how every failure is classified, and that a history begun on
//! OpenAI can be continued here.

use crate::common;
use crate::common::provider::{Canned, Captured};

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;
use zaguan::domain::ToolCall;
use zaguan::llm::{AnthropicClient, ChatMessage, Llm, LlmError, LlmRequest, LlmResponse, ToolSpec};

const KEY: &str = "sk-ant-test-0123456789abcdef";
const MODEL: &str = "claude-sonnet-4-5";
const MAX_TOKENS: u32 = 1024;

// ---- the fake server ----------------------------------------------------------------------

/// The fake Anthropic API and its base URL (no version path, like
/// `https://api.anthropic.com`).
struct FakeAnthropic {
    base_url: Url,
    server: Canned,
}

impl FakeAnthropic {
    async fn answering(status: u16, body: impl Into<String>) -> Self {
        let server = Canned::answering(status, body).await;
        Self {
            base_url: Url::parse(&server.root).unwrap(),
            server,
        }
    }

    fn only_request(&self) -> Captured {
        self.server.only_request()
    }
}

fn client(base_url: &Url) -> AnthropicClient {
    client_with(base_url, Some(KEY), Duration::from_secs(5))
}

fn client_with(base_url: &Url, key: Option<&str>, timeout: Duration) -> AnthropicClient {
    AnthropicClient::new(
        base_url.clone(),
        key.map(|k| SecretString::from(k.to_owned())),
        MODEL.to_owned(),
        MAX_TOKENS,
        timeout,
    )
    .unwrap()
}

/// Sends `request` to a server answering a plain text message; returns what the server got.
async fn sent(request: &LlmRequest) -> Captured {
    let server = FakeAnthropic::answering(200, text_answer().to_string()).await;
    client(&server.base_url).complete(request).await.unwrap();
    server.only_request()
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

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        args: args.into(),
    }
}

fn request_with(messages: Vec<ChatMessage>) -> LlmRequest {
    LlmRequest {
        agent: "listings".into(),
        conversation: None,
        system: "You are Zaguan, a real-estate assistant.".into(),
        messages,
        tools: vec![search_tool()].into(),
    }
}

/// A conversation with every kind of message: user, assistant with a tool call, tool result,
/// assistant text.
fn full_request() -> LlmRequest {
    request_with(vec![
        ChatMessage::human("Busco un depto de 2 ambientes en Rosario"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![call(
                "call_1",
                "search_listings",
                json!({"city": "Rosario", "rooms": 2}),
            )],
        },
        ChatMessage::tool("call_1", r#"[{"id":"L-17","price":"USD 90000"}]"#),
        ChatMessage::ai("Encontré uno: L-17, USD 90000."),
        ChatMessage::human("¿Tiene balcón?"),
    ])
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

/// A complete Messages API answer around some content blocks.
fn message(content: Value) -> Value {
    let stop_reason = if content
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["type"] == "tool_use")
    {
        "tool_use"
    } else {
        "end_turn"
    };
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 42, "output_tokens": 7}
    })
}

fn text_answer() -> Value {
    message(json!([{"type": "text", "text": "¡Hola! ¿En qué te ayudo?"}]))
}

fn tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// The ids a request's blocks carry: `(tool_use ids, tool_result tool_use_ids)`, in order.
fn ids_in(body: &Value) -> (Vec<String>, Vec<String>) {
    let mut uses = Vec::new();
    let mut results = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().unwrap() {
            match block["type"].as_str().unwrap() {
                "tool_use" => uses.push(block["id"].as_str().unwrap().to_owned()),
                "tool_result" => results.push(block["tool_use_id"].as_str().unwrap().to_owned()),
                _ => {}
            }
        }
    }
    (uses, results)
}

fn is_portable(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

// ---- the request --------------------------------------------------------------------------

#[tokio::test]
async fn a_request_carries_the_key_the_version_a_top_level_system_prompt_and_every_role() {
    let request = sent(&full_request()).await;
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        request.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(
        request.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        request.header("authorization"),
        None,
        "the key goes in x-api-key only"
    );
    assert_eq!(
        request.body,
        json!({
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": "You are Zaguan, a real-estate assistant.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "Busco un depto de 2 ambientes en Rosario"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "search_listings",
                     "input": {"city": "Rosario", "rooms": 2}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1",
                     "content": r#"[{"id":"L-17","price":"USD 90000"}]"#}
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Encontré uno: L-17, USD 90000."}
                ]},
                {"role": "user", "content": [{"type": "text", "text": "¿Tiene balcón?"}]}
            ],
            "tools": [{
                "name": "search_listings",
                "description": "Search the listings by city and rooms.",
                "input_schema": search_tool().parameters
            }],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}
        })
    );
}

#[tokio::test]
async fn a_request_without_key_system_prompt_or_tools_sends_none_of_them() {
    let server = FakeAnthropic::answering(200, text_answer().to_string()).await;
    client_with(&server.base_url, None, Duration::from_secs(5))
        .complete(&plain_request())
        .await
        .unwrap();

    let request = server.only_request();
    assert_eq!(request.header("x-api-key"), None);
    assert_eq!(
        request.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(
        request.body,
        json!({
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hola"}]}]
        })
    );
}

#[tokio::test]
async fn an_assistant_turn_with_text_and_tool_calls_sends_the_text_first_then_each_tool_use() {
    let request = sent(&request_with(vec![
        ChatMessage::human("Dos búsquedas"),
        ChatMessage::Ai {
            content: "Busco en las dos ciudades.".to_owned(),
            tool_calls: vec![
                call("call_a", "search_listings", json!({"city": "Rosario"})),
                call("call_b", "search_listings", json!({"city": "Funes"})),
            ],
        },
        ChatMessage::tool("call_a", "[]"),
        ChatMessage::tool("call_b", "[]"),
    ]))
    .await;
    assert_eq!(
        request.body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Busco en las dos ciudades."},
            {"type": "tool_use", "id": "call_a", "name": "search_listings", "input": {"city": "Rosario"}},
            {"type": "tool_use", "id": "call_b", "name": "search_listings", "input": {"city": "Funes"}}
        ]})
    );
}

#[tokio::test]
async fn consecutive_tool_results_are_merged_into_one_user_message() {
    let request = sent(&request_with(vec![
        ChatMessage::human("Dos búsquedas"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![
                call("call_a", "search_listings", json!({"city": "Rosario"})),
                call("call_b", "search_listings", json!({"city": "Funes"})),
            ],
        },
        ChatMessage::tool("call_a", "[1]"),
        ChatMessage::tool("call_b", "[2]"),
    ]))
    .await;
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_a", "content": "[1]"},
            {"type": "tool_result", "tool_use_id": "call_b", "content": "[2]"}
        ]})
    );
}

#[tokio::test]
async fn a_tool_result_followed_by_a_human_message_become_one_user_message_in_order() {
    let request = sent(&request_with(vec![
        ChatMessage::human("Buscá en Rosario"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![call(
                "call_1",
                "search_listings",
                json!({"city": "Rosario"}),
            )],
        },
        ChatMessage::tool("call_1", "[]"),
        ChatMessage::human("¿Y en Funes?"),
    ]))
    .await;
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "[]"},
            {"type": "text", "text": "¿Y en Funes?"}
        ]})
    );
}

#[tokio::test]
async fn consecutive_human_messages_are_merged_and_roles_always_alternate() {
    let request = sent(&request_with(vec![
        ChatMessage::human("Hola"),
        ChatMessage::human("¿Están?"),
        ChatMessage::ai("Sí."),
        ChatMessage::ai("¿En qué te ayudo?"),
        ChatMessage::human("Un depto"),
    ]))
    .await;
    assert_eq!(
        request.body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Hola"}, {"type": "text", "text": "¿Están?"}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Sí."}, {"type": "text", "text": "¿En qué te ayudo?"}
            ]},
            {"role": "user", "content": [{"type": "text", "text": "Un depto"}]}
        ])
    );
}

#[tokio::test]
async fn a_history_starting_with_assistant_turns_drops_them_and_starts_with_the_user() {
    let request = sent(&request_with(vec![
        ChatMessage::ai("¡Bienvenido a Zaguan!"),
        ChatMessage::ai("¿Buscás comprar o alquilar?"),
        ChatMessage::human("Alquilar"),
    ]))
    .await;
    assert_eq!(
        request.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Alquilar"}]}])
    );
}

#[tokio::test]
async fn tool_results_whose_tool_use_was_dropped_with_a_leading_assistant_turn_are_dropped_too() {
    let request = sent(&request_with(vec![
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![call(
                "call_1",
                "search_listings",
                json!({"city": "Rosario"}),
            )],
        },
        ChatMessage::tool("call_1", "[]"),
        ChatMessage::ai("No encontré nada."),
        ChatMessage::human("¿Y en Funes?"),
    ]))
    .await;
    assert_eq!(
        request.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "¿Y en Funes?"}]}])
    );
}

#[tokio::test]
async fn an_assistant_turn_with_nothing_in_it_is_left_out_and_empty_text_is_never_sent() {
    let request = sent(&request_with(vec![
        ChatMessage::human("Hola"),
        ChatMessage::ai(""),
        ChatMessage::human("¿Hola?"),
    ]))
    .await;
    assert_eq!(
        request.body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Hola"}, {"type": "text", "text": "¿Hola?"}
        ]}])
    );
}

#[tokio::test]
async fn tool_call_arguments_that_are_not_an_object_are_sent_as_an_object() {
    let request = sent(&request_with(vec![
        ChatMessage::human("Probá"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![
                call("call_null", "book_visit", Value::Null),
                call("call_str", "book_visit", json!("L-17")),
                call(
                    "call_raw",
                    "book_visit",
                    json!({"_raw": "{oops", "_error": "arguments are not valid JSON"}),
                ),
            ],
        },
        ChatMessage::tool("call_null", "ok"),
        ChatMessage::tool("call_str", "ok"),
        ChatMessage::tool("call_raw", "error"),
    ]))
    .await;
    let blocks = request.body["messages"][1]["content"].as_array().unwrap();
    let inputs: Vec<&Value> = blocks.iter().map(|b| &b["input"]).collect();
    assert_eq!(
        inputs,
        vec![
            &json!({}),
            &json!({"_raw": "L-17"}),
            &json!({"_raw": "{oops", "_error": "arguments are not valid JSON"}),
        ]
    );
}

#[tokio::test]
async fn a_history_begun_on_openai_continues_on_anthropic_with_valid_paired_tool_ids() {
    // Ids as the OpenAI client hands them over (OpenAI's own, and one it generated), plus one
    // stored by other means with characters Anthropic refuses.
    let openai_id = "call_abc123XYZ";
    let generated_id = "call_18f2a3b4c5d6e7f8_2a";
    let foreign_id = "fc:1/2.ü";
    let history = vec![
        ChatMessage::human("Busco en Rosario y Funes"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![call(
                openai_id,
                "search_listings",
                json!({"city": "Rosario"}),
            )],
        },
        ChatMessage::tool(openai_id, "[]"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![call(
                generated_id,
                "search_listings",
                json!({"city": "Funes"}),
            )],
        },
        ChatMessage::tool(generated_id, "[]"),
        ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![call(foreign_id, "book_visit", json!({"listing": "L-17"}))],
        },
        ChatMessage::tool(foreign_id, "booked"),
        ChatMessage::human("Gracias"),
    ];
    let request = sent(&request_with(history)).await;

    let (uses, results) = ids_in(&request.body);
    assert_eq!(uses.len(), 3);
    assert_eq!(uses, results, "every tool_result pairs with its tool_use");
    for id in &uses {
        assert!(is_portable(id), "`{id}` is not ^[A-Za-z0-9_-]{{1,64}}$");
    }
    assert_eq!(uses[0], openai_id, "portable ids are kept as they are");
    assert_eq!(uses[1], generated_id);
    assert_ne!(uses[2], foreign_id);

    // Each tool_result sits in the user message right after its tool_use.
    let messages = request.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    for pair in [1, 3, 5] {
        assert_eq!(
            messages[pair]["content"][0]["id"],
            messages[pair + 1]["content"][0]["tool_use_id"]
        );
    }
}

// ---- the answer ---------------------------------------------------------------------------

async fn answer_to(body: Value) -> LlmResponse {
    let server = FakeAnthropic::answering(200, body.to_string()).await;
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
async fn several_text_blocks_are_concatenated() {
    let response = answer_to(message(json!([
        {"type": "text", "text": "¡Hola! "},
        {"type": "text", "text": "¿En qué te ayudo?"}
    ])))
    .await;
    assert_eq!(response.content, "¡Hola! ¿En qué te ayudo?");
}

#[tokio::test]
async fn a_tool_use_is_parsed_with_its_id_name_and_input() {
    let response = answer_to(message(json!([tool_use(
        "toolu_01A09q90qw90lq917835lq9",
        "search_listings",
        json!({"city": "Rosario", "rooms": 2})
    )])))
    .await;
    assert_eq!(response.content, "");
    assert_eq!(
        response.tool_calls,
        vec![call(
            "toolu_01A09q90qw90lq917835lq9",
            "search_listings",
            json!({"city": "Rosario", "rooms": 2})
        )]
    );
}

#[tokio::test]
async fn several_tool_uses_in_one_answer_are_all_kept_in_order() {
    let response = answer_to(message(json!([
        tool_use("toolu_a", "search_listings", json!({"city": "Rosario"})),
        tool_use(
            "toolu_b",
            "search_listings",
            json!({"city": "Funes", "rooms": 3})
        ),
        tool_use("toolu_c", "book_visit", json!({}))
    ])))
    .await;
    assert_eq!(
        response.tool_calls,
        vec![
            call("toolu_a", "search_listings", json!({"city": "Rosario"})),
            call(
                "toolu_b",
                "search_listings",
                json!({"city": "Funes", "rooms": 3})
            ),
            call("toolu_c", "book_visit", json!({})),
        ]
    );
}

#[tokio::test]
async fn text_and_a_tool_use_in_one_answer_are_both_kept() {
    let response = answer_to(message(json!([
        {"type": "text", "text": "Busco en Rosario."},
        tool_use("toolu_1", "search_listings", json!({"city": "Rosario"}))
    ])))
    .await;
    assert_eq!(response.content, "Busco en Rosario.");
    assert_eq!(
        response.tool_calls,
        vec![call(
            "toolu_1",
            "search_listings",
            json!({"city": "Rosario"})
        )]
    );
}

#[tokio::test]
async fn a_tool_use_id_with_foreign_characters_is_replaced_by_a_portable_one() {
    let response = answer_to(message(json!([tool_use(
        "fc:1/2.ü",
        "search_listings",
        json!({"city": "Rosario"})
    )])))
    .await;
    let id = &response.tool_calls[0].id;
    assert_ne!(id, "fc:1/2.ü");
    assert!(is_portable(id), "`{id}` is not [A-Za-z0-9_-]{{1,64}}");
    assert_eq!(*response.tool_calls[0].args, json!({"city": "Rosario"}));
}

#[tokio::test]
async fn block_types_it_does_not_know_are_ignored() {
    let response = answer_to(message(json!([
        {"type": "thinking", "thinking": "hmm", "signature": "abc"},
        {"type": "text", "text": "Listo."}
    ])))
    .await;
    assert_eq!(response.content, "Listo.");
    assert!(response.tool_calls.is_empty());
}

// ---- failures -----------------------------------------------------------------------------

async fn error_for(status: u16, body: &str) -> LlmError {
    let server = FakeAnthropic::answering(status, body).await;
    client(&server.base_url)
        .complete(&full_request())
        .await
        .unwrap_err()
}

#[tokio::test]
async fn an_overloaded_api_is_unavailable() {
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert!(matches!(
        error_for(529, body).await,
        LlmError::Unavailable(m) if m.contains("529") && m.contains("Overloaded")
    ));
}

#[tokio::test]
async fn a_success_that_is_not_a_message_is_unavailable() {
    assert!(matches!(
        error_for(200, r#"{"type":"error","error":{"type":"api_error"}}"#).await,
        LlmError::Unavailable(_)
    ));
}

/// Anthropic's wire format, for the shared conformance suite.
fn provider() -> common::provider::Provider {
    common::provider::Provider {
        client: |base, key, timeout| Box::new(client_with(base, key, timeout)),
        base: |server| Url::parse(server).unwrap(),
        error: |kind, message| {
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
        },
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
    let client = client(&"http://127.0.0.1:9".parse().unwrap());
    let fresh =
        |request: &LlmRequest| zaguan::llm::anthropic::encode_request(MODEL, MAX_TOKENS, request);
    let request = full_request();
    assert_eq!(client.encode(&request), fresh(&request));
    assert_eq!(
        client.encode(&request),
        fresh(&request),
        "from the encoded list"
    );
    let other = LlmRequest {
        tools: std::sync::Arc::from(vec![search_tool(), search_tool()]),
        ..full_request()
    };
    assert_eq!(
        client.encode(&other),
        fresh(&other),
        "another list on its own"
    );
    let plain = plain_request();
    let body: Value = serde_json::from_slice(&client.encode(&plain)).unwrap();
    assert!(body.get("tools").is_none(), "no tools, no field: {body}");
    assert_eq!(client.encode(&plain), fresh(&plain));
}
