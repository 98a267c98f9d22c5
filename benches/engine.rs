//! The engine's own cost, with the LLM answering instantly: route_to_workflow, the fast path's
//! keyword match, history hygiene
//! on a 200-message history, and whole turns (plain answer; delegation into a subgraph) on the
//! in-memory store. What is measured is everything a turn costs except waiting for the LLM.
//!
//! `cargo bench --bench engine`

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use chrono::Utc;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use zaguan::agents::fast_route::FastRouter;
use zaguan::agents::{AgentKind, AgentRegistry};
use zaguan::domain::Role;
use zaguan::domain::ToolCall;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings, ToolRegistry, history, route_to_workflow};
use zaguan::llm::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::store::{InboxEntry, InboxStatus, MemoryStore, Store};

/// Answers at once: the primary answers (or delegates, when asked to), the subgraph answers.
struct InstantLlm {
    delegate: bool,
}

#[async_trait]
impl Llm for InstantLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let last_is_human = matches!(request.messages.last(), Some(ChatMessage::Human { .. }));
        Ok(
            if self.delegate && request.agent == "primary_assistant" && last_is_human {
                LlmResponse {
                    tool_calls: vec![ToolCall {
                        id: format!("call_{}", request.messages.len()),
                        name: "ToPropertyAssistant".into(),
                        args: json!({"query": "precio del ático de la calle Mayor"}).into(),
                    }],
                    ..LlmResponse::default()
                }
            } else {
                LlmResponse {
                    content: "Claro. El ático de la calle Mayor tiene 3 habitaciones y terraza; \
                          cuesta 650.000 €. ¿Quieres visitarlo esta semana?"
                        .into(),
                    ..LlmResponse::default()
                }
            },
        )
    }
}

fn registry() -> AgentRegistry {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()
}

fn route(c: &mut Criterion) {
    let registry = registry();
    let state = zaguan::domain::DialogState::entered("appointment_assistant");
    c.bench_function("engine/route_to_workflow", |b| {
        b.iter(|| route_to_workflow(std::hint::black_box(&state), Role::Prospect, &registry))
    });
    // The fast path's router, run on the first message of a turn at the primary agent (and on
    // every message inside a subgraph).
    let primary = registry.primary_for(Role::Prospect);
    let long = "Hola, buenas tardes. Vi en vuestra web el piso de tres dormitorios de la calle \
                Colón y me interesa mucho; quería saber si puedo agendar una visita esta semana, \
                a poder ser el jueves por la tarde.";
    assert_eq!(long.split_whitespace().count(), 37);
    c.bench_function("engine/fast_route, 37 words", |b| {
        b.iter(|| registry.fast_route(std::hint::black_box(long), primary, Role::Prospect))
    });
    c.bench_function("engine/fast_route, \"hola\"", |b| {
        b.iter(|| registry.fast_route(std::hint::black_box("hola"), primary, Role::Prospect))
    });
    // The router is learned when the prompts load with new examples or keywords (a reload that
    // keeps them reuses the model: the second figure).
    let subgraphs: Vec<(&str, &[String], &[String])> = registry
        .agents()
        .filter(|a| a.kind == AgentKind::Subgraph)
        .map(|a| {
            (
                a.name.as_str(),
                a.examples.as_slice(),
                a.keywords.as_slice(),
            )
        })
        .collect();
    let primary: Vec<&String> = registry
        .agents()
        .filter(|a| a.kind == AgentKind::Primary)
        .flat_map(|a| &a.examples)
        .collect();
    let mut group = c.benchmark_group("engine/router");
    group.sample_size(10);
    group.bench_function("training on the prompts' examples", |b| {
        b.iter(|| FastRouter::train(subgraphs.iter().copied(), primary.iter().copied()))
    });
    group.bench_function("prompts load, router already learned", |b| {
        b.iter(self::registry)
    });
    group.finish();
}

fn hygiene(c: &mut Criterion) {
    let mut messages = Vec::new();
    for i in 0..50 {
        messages.push(ChatMessage::human(format!(
            "¿Tenéis pisos en Valencia? ({i})"
        )));
        messages.push(ChatMessage::Ai {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: format!("call_{i}"),
                name: "ToSearcherAssistant".into(),
                args: json!({"query": "pisos en Valencia"}).into(),
            }],
        });
        messages.push(ChatMessage::tool(format!("call_{i}"), "entered"));
        messages.push(ChatMessage::ai(
            "Tengo tres opciones en Ruzafa y el Cabanyal.",
        ));
    }
    assert_eq!(messages.len(), 200);
    c.bench_function("engine/history::clean, 200 messages", |b| {
        b.iter(|| history::clean(std::hint::black_box(&messages), history::WINDOW))
    });
    // What a model call does now: the history loaded is converted once and cleaned in place.
    c.bench_function("engine/history::for_model, 200 messages, taken", |b| {
        b.iter_batched(
            || messages.clone(),
            |messages| history::for_model(messages, history::WINDOW),
            criterion::BatchSize::SmallInput,
        )
    });
    // A model call's messages from the 120 loaded (converting a stored message is a copy, as
    // here): all of them converted, then cleaned, against converting what the window reaches.
    let stored = &messages[messages.len() - 120..];
    c.bench_function(
        "engine/history: model messages from 120 stored, all converted",
        |b| b.iter(|| history::for_model(std::hint::black_box(stored).to_vec(), history::WINDOW)),
    );
    c.bench_function("engine/history::for_model_from, 120 stored", |b| {
        b.iter(|| {
            history::for_model_from(
                std::hint::black_box(stored),
                history::WINDOW,
                |m| matches!(m, ChatMessage::Human { .. }),
                Clone::clone,
            )
        })
    });
}

fn turns(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Arc::new(registry());
    for (name, delegate) in [
        ("engine/turn, plain answer, MemoryStore", false),
        ("engine/turn, delegation into a subgraph, MemoryStore", true),
    ] {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let engine = Engine::new(
            store.clone(),
            Arc::new(InstantLlm { delegate }),
            registry.clone(),
            Arc::new(ToolRegistry::new()),
            // The model decides, as the names say: the fast path would send this property
            // question straight to the property assistant (its own figure is above).
            EngineSettings {
                fast_route: false,
                ..EngineSettings::default()
            },
        );
        let next = AtomicU64::new(0);
        c.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                // 500 conversations in turn: histories grow as in real use.
                let n = next.fetch_add(1, Ordering::Relaxed);
                let wa_id = WaId::parse(&format!("346{:08}", n % 500)).unwrap();
                let entry = InboxEntry {
                    wamid: WaMessageId::parse(&format!("wamid.B{n}")).unwrap(),
                    wa_id: wa_id.clone(),
                    phone_number_id: "1".into(),
                    kind: "text".into(),
                    text: Some("¿Cuánto cuesta el ático de la calle Mayor?".into()),
                    payload: "{}".into(),
                    content: zaguan::domain::Content::Text {
                        body: "¿Cuánto cuesta el ático de la calle Mayor?".into(),
                    },
                    context_id: None,
                    sent_at: None,
                    status: InboxStatus::Pending,
                    received_at: Utc::now(),
                    attempts: 0,
                };
                store
                    .insert_inbox(std::slice::from_ref(&entry))
                    .await
                    .unwrap();
                let outcome = engine.run_turn(&wa_id, &[entry]).await.unwrap();
                assert!(outcome.reply.is_some());
                // Leave the subgraph so every delegating turn starts from the primary.
                if delegate {
                    store
                        .set_dialog_state(
                            &wa_id,
                            &zaguan::domain::DialogState::primary(),
                            Utc::now(),
                        )
                        .await
                        .unwrap();
                }
            })
        });
    }
}

criterion_group!(benches, route, hygiene, turns);
criterion_main!(benches);
