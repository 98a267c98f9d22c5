//! What the provider layer adds to an LLM call, apart from the network and the model: encoding a
//! realistic request (system prompt, 20 messages of history with tool calls, the primary agent's
//! delegation tools) in each wire format, decoding an answer with a tool call, and the fallback
//! chain's own work (breaker, concurrency slot, timeout, metrics, usage record). A loopback round
//! trip through the real client and a local HTTP server is measured too, for reference: it adds
//! the kernel's TCP and the HTTP stacks of both ends.
//!
//! `cargo bench --bench llm`

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use zaguan::agents::AgentRegistry;
use zaguan::domain::Role;
use zaguan::domain::ToolCall;
use zaguan::llm::{
    CallPolicy, ChatMessage, FallbackChain, Llm, LlmError, LlmRequest, LlmResponse, OpenAiClient,
    anthropic, openai,
};
use zaguan::runtime::UsageRecorder;
use zaguan::store::MemoryStore;

/// The request the primary agent sends after 20 messages of conversation.
fn request() -> LlmRequest {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    let primary = registry.primary_for(Role::Prospect);
    let mut tools = registry.delegation_tools(primary, Role::Prospect);
    tools.push(AgentRegistry::complete_or_escalate());
    let mut messages = Vec::new();
    for i in 0..5 {
        messages.push(ChatMessage::human(format!(
            "Hola, ¿el piso {i} de la calle Mayor sigue disponible? ¿Cuánto cuesta la comunidad?"
        )));
        messages.push(ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: format!("call_{i}"),
                name: "ToPropertyAssistant".into(),
                args: json!({"query": format!("disponibilidad y comunidad del piso {i}")}).into(),
            }],
        });
        messages.push(ChatMessage::tool(
            format!("call_{i}"),
            "The conversation is now handled by property_assistant.",
        ));
        messages.push(ChatMessage::ai(
            "Sí, sigue disponible. La comunidad son 85 € al mes e incluye portero y piscina. \
             ¿Quieres que te reserve una visita esta semana?",
        ));
    }
    LlmRequest {
        agent: primary.name.clone(),
        conversation: Some("34600111222".into()),
        system: "Eres el asistente principal de Zaguan Inmobiliaria. "
            .repeat(40)
            .into(),
        messages,
        tools: tools.into(),
    }
}

const OPENAI_ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1764100800,"model":"gpt-4.1-mini","choices":[{"index":0,"finish_reason":"tool_calls","logprobs":null,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"ToAppointmentAssistant","arguments":"{\"query\":\"visita al piso de la calle Mayor el jueves por la tarde\"}"}}]}}],"usage":{"prompt_tokens":1850,"completion_tokens":31,"total_tokens":1881}}"#;

const ANTHROPIC_ANSWER: &str = r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Te paso con citas."},{"type":"tool_use","id":"toolu_01A","name":"ToAppointmentAssistant","input":{"query":"visita al piso de la calle Mayor el jueves por la tarde"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1850,"output_tokens":31}}"#;

/// What an assistant node does before the network: render the system prompt, gather the
/// tools, clean a 200-message history down to its 50-message window, encode the request.
fn assembly(c: &mut Criterion) {
    use zaguan::agents::PromptContext;
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    let history: Vec<ChatMessage> = request().messages.into_iter().cycle().take(200).collect();
    let context = PromptContext {
        user_name: Some("Lucía".into()),
        user_role: Role::Prospect,
        user_info: "Rol: prospect; nombre: Lucía; idioma: es".into(),
        lang: "es".into(),
        now: "jueves, 26 de noviembre de 2026, 10:30".into(),
        business_name: "Zaguan Inmobiliaria".into(),
        business_contact: String::new(),
    };
    c.bench_function("llm/assemble + encode, 50-message window of 200", |b| {
        b.iter(|| {
            let agent = registry.primary_for(Role::Prospect);
            let system = registry.render_system_prompt(agent, &context).unwrap();
            let mut tools = registry.delegation_tools(agent, Role::Prospect);
            tools.push(AgentRegistry::complete_or_escalate());
            let request = LlmRequest {
                agent: agent.name.clone(),
                conversation: Some("34600111222".into()),
                system: system.into(),
                messages: zaguan::engine::history::clean(&history, 50),
                tools: tools.into(),
            };
            openai::encode_request("gpt-4.1-mini", &request)
        })
    });
}

fn wire(c: &mut Criterion) {
    let request = request();
    c.bench_function("llm/openai_encode_request", |b| {
        b.iter(|| openai::encode_request("gpt-4.1-mini", &request))
    });
    let client = zaguan::llm::OpenAiClient::new(
        "http://127.0.0.1:9/v1".parse().unwrap(),
        None,
        "gpt-4.1-mini".to_owned(),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    c.bench_function(
        "llm/openai_encode_request, tools encoded once per list",
        |b| b.iter(|| client.encode(&request)),
    );
    c.bench_function("llm/openai_decode_answer", |b| {
        b.iter(|| openai::decode_response(OPENAI_ANSWER.as_bytes()).unwrap())
    });
    c.bench_function("llm/anthropic_encode_request", |b| {
        b.iter(|| anthropic::encode_request("claude-sonnet-4-5", 1024, &request))
    });
    c.bench_function("llm/anthropic_decode_answer", |b| {
        b.iter(|| anthropic::decode_response(ANTHROPIC_ANSWER.as_bytes()).unwrap())
    });
}

/// Answers at once, so only the chain's own work is measured.
struct InstantLlm(LlmResponse);

#[async_trait]
impl Llm for InstantLlm {
    async fn complete(&self, _: &LlmRequest) -> Result<LlmResponse, LlmError> {
        Ok(self.0.clone())
    }
}

fn chain(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The production metrics recorder, so the counters cost what they cost in production.
    zaguan::telemetry::metrics_handle();
    let request = request();
    let answer = openai::decode_response(OPENAI_ANSWER.as_bytes()).unwrap();
    let chain = runtime.block_on(async {
        let usage = UsageRecorder::spawn(Arc::new(MemoryStore::new()));
        FallbackChain::new(
            vec![(
                "openai:gpt-4.1-mini".to_owned(),
                Arc::new(InstantLlm(answer)) as Arc<dyn Llm>,
            )],
            CallPolicy::default(),
        )
        .with_call_log(Arc::new(usage))
    });
    c.bench_function("llm/fallback_chain_overhead", |b| {
        b.to_async(&runtime)
            .iter(|| async { chain.complete(&request).await.unwrap() })
    });

    // For reference: the real client through loopback TCP to a local HTTP server.
    let url = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(|| async {
                ([("content-type", "application/json")], OPENAI_ANSWER)
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://127.0.0.1:{port}/v1")
    });
    let client = OpenAiClient::new(
        url.parse().unwrap(),
        None,
        "gpt-4.1-mini".into(),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    c.bench_function("llm/openai_client_loopback_round_trip", |b| {
        b.to_async(&runtime)
            .iter(|| async { client.complete(&request).await.unwrap() })
    });
}

criterion_group!(benches, assembly, wire, chain);
criterion_main!(benches);
