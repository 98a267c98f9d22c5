//! The whole inbound path: signed webhooks through the router, two sets of workers (as two
//! processes would) sharing one store, turns through the engine, replies in the outbox —
//! exactly one per turn, every conversation in order.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::http::StatusCode;
use common::{TestApp, text_notification};
use zaguan::agents::AgentRegistry;
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::{Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::outbound::Outbound;
use zaguan::runtime::{WorkerSettings, Workers};
use zaguan::store::Store;

/// Answers every turn by echoing the human message it answers.
struct EchoLlm;

#[async_trait]
impl Llm for EchoLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let last_human = common::last_human(request);
        // A little latency, so messages arrive while turns run and get merged.
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(LlmResponse {
            content: format!("Recibido: {last_human}"),
            ..LlmResponse::default()
        })
    }
}

fn engine(store: Arc<dyn Store>) -> Arc<Engine> {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    Arc::new(Engine::new(
        store,
        Arc::new(EchoLlm),
        Arc::new(registry),
        Arc::new(ToolRegistry::new()),
        EngineSettings::default(),
    ))
}

async fn conversations_are_answered_once_per_turn_in_order(store: Arc<dyn Store>) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    const CONVERSATIONS: usize = 40;
    const MESSAGES: usize = 5;
    let app = TestApp::with_store(store.clone());
    let signal = app.state.arrivals.clone();
    let workers: Vec<Workers> = ["instance-a", "instance-b"]
        .into_iter()
        .map(|owner| {
            Workers::spawn(
                engine(store.clone()),
                Arc::new(Outbound::dry_run(store.clone())),
                signal.clone(),
                WorkerSettings {
                    owner: owner.to_owned(),
                    concurrency: 8,
                    poll: Duration::from_millis(20),
                    ..WorkerSettings::default()
                },
            )
        })
        .collect();

    let phone = |c: usize| format!("3461{c:07}");
    for m in 0..MESSAGES {
        for c in 0..CONVERSATIONS {
            let id = format!("wamid.P{c}.{m}");
            let text = format!("c{c} m{m}");
            let body = text_notification(&[(&id, &phone(c), &text)]);
            assert_eq!(app.post_webhook(body).await, StatusCode::OK);
        }
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    while !store
        .conversations_with_open_inbox(1)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "inbox not drained in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for workers in workers {
        workers.stop().await;
    }

    for c in 0..CONVERSATIONS {
        let sent: Vec<String> = (0..MESSAGES).map(|m| format!("c{c} m{m}")).collect();
        let ids: Vec<String> = (0..MESSAGES).map(|m| format!("wamid.P{c}.{m}")).collect();
        let turns =
            common::assert_answered_once_in_order(store.as_ref(), &phone(c), &sent, &ids).await;
        for (human, reply) in turns {
            assert_eq!(
                reply,
                format!("Recibido: {human}"),
                "the reply answers its own turn"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_conversations_are_answered_once_per_turn_in_order() {
    conversations_are_answered_once_per_turn_in_order(Arc::new(zaguan::store::MemoryStore::new()))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_conversations_are_answered_once_per_turn_in_order() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    conversations_are_answered_once_per_turn_in_order(Arc::new(db.store.clone())).await;
    db.drop().await;
}
