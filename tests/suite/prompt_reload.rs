//! Prompt hot reload: a valid change in the folder is picked up by the watcher, an invalid one
//! is refused and reported (the running set stays), and a turn already running finishes with
//! the set it started with. Through the admin API: `GET /admin/prompts`, `POST
//! /admin/prompts/reload`.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::StatusCode;
use common::{TestApp, bearer};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use zaguan::agents::AgentRegistry;
use zaguan::domain::ToolCall;
use zaguan::domain::WaId;
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::{Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::runtime::PromptReloader;
use zaguan::store::{InboxEntry, InboxStatus, MemoryStore, Store};

/// The primary delegates to appointments, which answers; every system prompt is recorded. The
/// first call waits until the test opens the gate, so a turn can be held mid-flight.
struct GatedLlm {
    gate: Semaphore,
    systems: Mutex<Vec<(String, String)>>,
}

#[async_trait]
impl Llm for GatedLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let first = {
            let mut systems = self.systems.lock().unwrap();
            systems.push((
                request.agent.to_string(),
                request.system.text().into_owned(),
            ));
            systems.len() == 1
        };
        if first {
            self.gate.acquire().await.unwrap().forget();
        }
        Ok(if request.agent == "primary_assistant" {
            LlmResponse {
                tool_calls: vec![ToolCall {
                    id: format!("call_{}", self.systems.lock().unwrap().len()),
                    name: "ToAppointmentAssistant".to_owned(),
                    args: json!({"query": "agendar una visita"}).into(),
                }],
                ..LlmResponse::default()
            }
        } else {
            LlmResponse {
                content: "¿Qué día te viene bien?".to_owned(),
                ..LlmResponse::default()
            }
        })
    }
}

/// A copy of the project's prompts, to edit.
fn prompts_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    for entry in std::fs::read_dir(source).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let path = dir.path().to_owned();
    (dir, path)
}

fn inbox(wa_id: &WaId, n: usize) -> InboxEntry {
    common::inbox_entry(
        &format!("wamid.R{n}"),
        wa_id,
        "Hola, necesito ayuda",
        InboxStatus::Pending,
    )
}

/// Rewrites the body of `file`, keeping its front matter.
fn append_to(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    let mut content = std::fs::read_to_string(&path).unwrap();
    content.push_str(text);
    std::fs::write(&path, content).unwrap();
}

async fn status(app: &TestApp) -> Value {
    let (status, body) = app
        .admin("GET", "/admin/prompts", Some(&bearer()), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Polls `GET /admin/prompts` until `done` holds (the watcher settles changes for 300 ms).
async fn wait_for(app: &TestApp, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let body = status(app).await;
        if done(&body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} within 10 s; last status: {}", status(app).await);
}

#[tokio::test]
async fn prompt_changes_are_reloaded_checked_and_never_touch_a_running_turn() {
    let (_keep, dir) = prompts_copy();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let llm = Arc::new(GatedLlm {
        gate: Semaphore::new(0),
        systems: Mutex::default(),
    });
    let engine = Arc::new(Engine::new(
        store.clone(),
        llm.clone(),
        Arc::new(AgentRegistry::load(&dir, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    ));
    let reloader = Arc::new(PromptReloader::new(
        dir.clone(),
        zaguan::startup::known_tools(),
        engine.clone(),
    ));
    let watch = reloader.clone().spawn();
    let app = TestApp::with_store(store.clone())
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_prompts(reloader.clone()));

    let first = status(&app).await;
    let v1 = first["version"].as_str().unwrap().to_owned();
    assert_eq!(v1.len(), 12, "{first}");
    assert!(
        first["agents"]
            .as_array()
            .unwrap()
            .contains(&json!("appointment_assistant")),
        "{first}"
    );
    assert_eq!(first["last_rejected"], Value::Null);

    // A turn starts and waits inside its first LLM call.
    let early = WaId::parse("34600000401").unwrap();
    let message = inbox(&early, 1);
    store
        .insert_inbox(std::slice::from_ref(&message))
        .await
        .unwrap();
    let running = {
        let engine = engine.clone();
        let early = early.clone();
        tokio::spawn(async move { engine.run_turn(&early, &[message]).await })
    };
    while llm.systems.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Staff change the appointments prompt: the watcher loads the new set.
    append_to(&dir, "appointment_assistant.md", "\nMARCA-VERSION-DOS\n");
    let second = wait_for(&app, "the valid change loaded", |s| {
        s["version"] != json!(v1)
    })
    .await;
    let v2 = second["version"].as_str().unwrap().to_owned();

    // The running turn goes on into appointments with the set it started with.
    llm.gate.add_permits(1);
    let outcome = running.await.unwrap().unwrap();
    assert_eq!(
        outcome.dialog_state.to_list(),
        vec!["appointment_assistant".to_owned()]
    );
    let systems = llm.systems.lock().unwrap().clone();
    assert_eq!(systems.len(), 2, "{systems:?}");
    assert_eq!(systems[1].0, "appointment_assistant");
    assert!(
        !systems[1].1.contains("MARCA-VERSION-DOS"),
        "the running turn must keep its set"
    );

    // A turn that starts now uses the new one.
    let later = WaId::parse("34600000402").unwrap();
    let message = inbox(&later, 2);
    store
        .insert_inbox(std::slice::from_ref(&message))
        .await
        .unwrap();
    engine.run_turn(&later, &[message]).await.unwrap();
    let systems = llm.systems.lock().unwrap().clone();
    assert_eq!(systems.len(), 4, "{systems:?}");
    assert!(systems[3].1.contains("MARCA-VERSION-DOS"));

    // A broken change is refused with file:line problems; the running set stays.
    let path = dir.join("searcher_assistant.md");
    let broken =
        std::fs::read_to_string(&path)
            .unwrap()
            .replacen("+++\n", "+++\nmodel = \"gpt-9\"\n", 1);
    std::fs::write(&path, broken).unwrap();
    let refused = wait_for(&app, "the broken change refused", |s| {
        s["last_rejected"] != Value::Null
    })
    .await;
    assert_eq!(refused["version"], json!(v2), "the running set stays");
    let problems = refused["last_rejected"]["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| {
            let p = p.as_str().unwrap();
            p.contains("searcher_assistant.md:2:") && p.contains("model")
        }),
        "{problems:?}"
    );
    let (code, body) = app
        .admin("POST", "/admin/prompts/reload", Some(&bearer()), None)
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["problems"][0]
            .as_str()
            .unwrap()
            .contains("searcher_assistant.md:2:"),
        "{body}"
    );
    assert_eq!(engine.prompts().version(), v2);

    // Fixed: a forced reload takes it, and says whether anything changed.
    let fixed = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("model = \"gpt-9\"\n", "", 1);
    std::fs::write(&path, fixed).unwrap();
    let (code, body) = app
        .admin("POST", "/admin/prompts/reload", Some(&bearer()), None)
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(
        body["version"],
        json!(v2),
        "the same files, the same version"
    );
    assert_eq!(body["last_rejected"], Value::Null);
    watch.abort();
}

#[tokio::test]
async fn the_prompt_routes_need_the_token_and_an_engine() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let closed = TestApp::with_store(store.clone()).with_admin(None);
    for (method, uri) in [("GET", "/admin/prompts"), ("POST", "/admin/prompts/reload")] {
        let (code, _) = closed.admin(method, uri, Some(&bearer()), None).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{method} {uri}, admin API off");
    }
    let open = TestApp::with_store(store).with_admin(Some(common::ADMIN_TOKEN));
    for (method, uri) in [("GET", "/admin/prompts"), ("POST", "/admin/prompts/reload")] {
        let (code, _) = open.admin(method, uri, None, None).await;
        assert_eq!(
            code,
            StatusCode::UNAUTHORIZED,
            "{method} {uri} without token"
        );
        let (code, _) = open.admin(method, uri, Some("Bearer wrong"), None).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "{method} {uri} wrong token");
        // No engine in this process: nothing to show.
        let (code, body) = open.admin(method, uri, Some(&bearer()), None).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{method} {uri}: {body}");
    }
}

/// The business file is part of the prompt set: an edit is reloaded (the next turn's
/// `business_info` says the new hours), a broken edit is refused with its line and the running
/// file stays.
#[tokio::test]
async fn the_business_file_is_reloaded_with_the_prompts_and_a_broken_one_is_refused() {
    let (_keep, dir) = prompts_copy();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = Arc::new(Engine::new(
        store.clone(),
        Arc::new(zaguan::llm::OfflineLlm),
        Arc::new(AgentRegistry::load(&dir, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings::default(),
    ));
    let reloader = Arc::new(PromptReloader::new(
        dir.clone(),
        zaguan::startup::known_tools(),
        engine.clone(),
    ));
    let watch = reloader.clone().spawn();
    let app = TestApp::with_store(store.clone())
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_prompts(reloader.clone()));
    let saturday = |engine: &Engine| {
        let business = engine.prompts().business().clone();
        zaguan::business::Business::hours_lines(business.hours.as_ref().unwrap())[5].clone()
    };
    assert_eq!(saturday(&engine), "sábado: 10:00–13:30");
    let v1 = status(&app).await["version"].clone();

    let path = dir.join(zaguan::business::BUSINESS_FILE);
    let shipped = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        shipped.replace(
            "saturday = [\"10:00-13:30\"]",
            "saturday = [\"10:00-14:00\"]",
        ),
    )
    .unwrap();
    let loaded = wait_for(&app, "the new hours loaded", |s| s["version"] != v1).await;
    assert_eq!(saturday(&engine), "sábado: 10:00–14:00");

    let broken = shipped.replace(
        "saturday = [\"10:00-13:30\"]",
        "saturday = [\"14:00-10:00\"]",
    );
    let line = broken
        .lines()
        .position(|l| l.contains("14:00-10:00"))
        .unwrap()
        + 1;
    std::fs::write(&path, broken).unwrap();
    let refused = wait_for(&app, "the broken file refused", |s| {
        s["last_rejected"] != Value::Null
    })
    .await;
    assert_eq!(
        refused["version"], loaded["version"],
        "the running set stays"
    );
    let problems = refused["last_rejected"]["problems"].to_string();
    assert!(
        problems.contains(&format!(
            "business.toml:{line}: hours: `14:00-10:00` ends before it starts"
        )),
        "{problems}"
    );
    assert_eq!(saturday(&engine), "sábado: 10:00–14:00");
    watch.abort();
}
