//! Full turns through the engine with a scripted LLM: dialog_state and message sequence for each
//! path of the seed's graph, with the in-memory store and with MongoDB.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use common::inbox_entry;
use serde_json::json;
use zaguan::agents::{AgentKind, AgentRegistry};
use zaguan::domain::{MessageRole, Role};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings, Tool, ToolContext, ToolError, ToolRegistry};
use zaguan::llm::{ScriptedLlm, ToolSpec};
use zaguan::store::{InboxEntry, InboxStatus, Store, StoredMessage};

/// A domain tool for the tests: looks a property up.
struct LookupProperty;

#[async_trait]
impl Tool for LookupProperty {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "consultar_inmueble".into(),
            description: "Ficha de una propiedad por referencia".into(),
            parameters: json!({"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}),
        }
    }

    async fn run(
        &self,
        args: serde_json::Value,
        _: &ToolContext,
    ) -> Result<zaguan::engine::tools::ToolOutput, ToolError> {
        match args.get("ref").and_then(|r| r.as_str()) {
            Some("P-102") => Ok("P-102: piso en Chamberí, 3 hab., 95 m², 450.000 €".into()),
            Some(other) => Err(ToolError::Failed(format!("no property {other}"))),
            None => Err(ToolError::InvalidArgs("`ref` is required".into())),
        }
    }
}

/// The shipped prompts, with the test tool given to `property_assistant`.
fn prompts_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "zaguan-engine-prompts-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    for entry in std::fs::read_dir(shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            // The domain tools are replaced by the test's one tool.
            let mut text: String = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|line| !line.starts_with("tools = "))
                .map(|line| format!("{line}\n"))
                .collect();
            if path.file_stem().unwrap() == "property_assistant" {
                text = text.replacen(
                    "kind = \"subgraph\"\n",
                    "kind = \"subgraph\"\ntools = [\"consultar_inmueble\"]\n",
                    1,
                );
            }
            std::fs::write(dir.join(path.file_name().unwrap()), text).unwrap();
        }
    }
    dir
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

struct Harness {
    engine: Engine,
    store: Arc<dyn Store>,
    llm: Arc<ScriptedLlm>,
    wa_id: WaId,
    next: std::sync::atomic::AtomicU32,
}

impl Harness {
    fn new(store: Arc<dyn Store>, llm: ScriptedLlm, settings: EngineSettings) -> Self {
        let tools = ToolRegistry::new().with(LookupProperty);
        let agents = Arc::new(AgentRegistry::load(&prompts_dir(), &tools.names()).unwrap());
        let llm = Arc::new(llm);
        let engine = Engine::new(
            store.clone(),
            llm.clone(),
            agents.clone(),
            Arc::new(tools),
            settings,
        );
        Self {
            engine,
            store,
            llm,
            wa_id: WaId::parse("34600111222").unwrap(),
            next: Default::default(),
        }
    }

    /// Stores `text` as a new inbound message and runs the turn that answers it.
    async fn say(&self, text: &str) -> Option<String> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        common::say(&self.engine, &self.store, &self.wa_id, n, text).await
    }

    async fn dialog_state(&self) -> Vec<String> {
        self.store
            .conversation(&self.wa_id)
            .await
            .unwrap()
            .map(|c| c.dialog_state.to_list())
            .unwrap_or_default()
    }

    async fn set_state(&self, agent: &str) {
        self.store
            .set_dialog_state(
                &self.wa_id,
                &zaguan::domain::DialogState::entered(agent),
                Utc::now(),
            )
            .await
            .unwrap();
    }

    async fn history(&self) -> Vec<StoredMessage> {
        self.store.recent_messages(&self.wa_id, 500).await.unwrap()
    }

    /// The history as `role:agent` tags, e.g. `human`, `ai:primary_assistant`, `tool`.
    async fn shape(&self) -> Vec<String> {
        self.history()
            .await
            .iter()
            .map(|m| match (m.message.role, &m.message.agent) {
                (MessageRole::Ai, Some(agent)) if !m.message.tool_calls.is_empty() => {
                    let names: Vec<&str> = m
                        .message
                        .tool_calls
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect();
                    format!("ai:{agent}->{}", names.join("+"))
                }
                (MessageRole::Ai, Some(agent)) => format!("ai:{agent}"),
                (role, _) => role.as_str().to_owned(),
            })
            .collect()
    }

    async fn outbox_len(&self) -> usize {
        let mut total = 0;
        for m in self.history().await {
            for wamid in &m.message.wamids {
                total += self.store.outbox_in_reply_to(wamid).await.unwrap().len();
            }
        }
        total
    }
}

fn memory() -> Arc<dyn Store> {
    Arc::new(zaguan::store::MemoryStore::new())
}

async fn a_plain_answer_comes_from_the_primary_assistant(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new().says("primary_assistant", "¡Hola! ¿En qué te ayudo?"),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("hola").await.as_deref(),
        Some("¡Hola! ¿En qué te ayudo?")
    );
    assert!(h.dialog_state().await.is_empty());
    assert_eq!(h.shape().await, ["human", "ai:primary_assistant"]);
    assert_eq!(h.outbox_len().await, 1);
    let request = &h.llm.requests()[0];
    let today_in_madrid = Utc::now()
        .with_timezone(&chrono_tz::Europe::Madrid)
        .format("%Y-%m-%d")
        .to_string();
    assert!(
        request.system.text().contains(&today_in_madrid),
        "{}",
        request.system
    );
    assert!(
        request
            .tools
            .iter()
            .any(|t| t.name == "ToAppointmentAssistant")
    );
    assert!(!request.tools.iter().any(|t| t.name == "CompleteOrEscalate"));
    assert!(
        !request
            .tools
            .iter()
            .any(|t| t.name == "ToOwnerInfoAssistant"),
        "role filter"
    );
}

async fn the_primary_delegates_into_every_subgraph(store: Arc<dyn Store>) {
    let agents = AgentRegistry::load(
        &prompts_dir(),
        &ToolRegistry::new().with(LookupProperty).names(),
    )
    .unwrap();
    let subgraphs: Vec<(String, Vec<Role>)> = agents
        .agents()
        .filter(|a| a.kind == AgentKind::Subgraph)
        .map(|a| (a.name.to_string(), a.roles.clone()))
        .collect();
    assert_eq!(subgraphs.len(), 7);
    for (i, (name, roles)) in subgraphs.iter().enumerate() {
        let role = roles[0];
        let primary = agents.primary_for(role).name.clone();
        let tool = AgentRegistry::delegation_tool_name(name);
        let h = Harness::new(
            store.clone(),
            ScriptedLlm::new()
                .calls(&primary, &tool, json!({"query": "quiero información"}))
                .says(name, "Claro, te ayudo con eso."),
            EngineSettings::default(),
        );
        let h = Harness {
            wa_id: WaId::parse(&format!("3460000{i:04}")).unwrap(),
            ..h
        };
        h.store.set_user_role(&h.wa_id, role).await.unwrap();
        assert_eq!(
            h.say("necesito ayuda").await.as_deref(),
            Some("Claro, te ayudo con eso.")
        );
        assert_eq!(h.dialog_state().await, std::slice::from_ref(name), "{name}");
        assert_eq!(
            h.shape().await,
            [
                "human".to_owned(),
                format!("ai:{primary}->{tool}"),
                "tool".into(),
                format!("ai:{name}")
            ]
        );
        let requests = h.llm.requests();
        let sub = &requests[1];
        assert!(
            sub.tools.iter().any(|t| t.name == "CompleteOrEscalate"),
            "{name}"
        );
        assert!(
            !sub.tools.iter().any(|t| t.name == tool),
            "{name} offered itself"
        );
    }
}

async fn a_subgraph_loops_over_its_tools(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .calls(
                "property_assistant",
                "consultar_inmueble",
                json!({"ref": "P-999"}),
            )
            .calls(
                "property_assistant",
                "consultar_inmueble",
                json!({"ref": "P-102"}),
            )
            .says("property_assistant", "El P-102 cuesta 450.000 €."),
        EngineSettings::default(),
    );
    h.set_state("property_assistant").await;
    assert_eq!(
        h.say("¿Cuánto cuesta el P-102?").await.as_deref(),
        Some("El P-102 cuesta 450.000 €.")
    );
    assert_eq!(h.dialog_state().await, ["property_assistant"]);
    let history = h.history().await;
    let tool_results: Vec<&str> = history
        .iter()
        .filter(|m| m.message.role == MessageRole::Tool)
        .map(|m| m.message.content.as_str())
        .collect();
    assert_eq!(tool_results.len(), 2);
    assert!(tool_results[0].starts_with("Error: no property P-999"));
    assert!(tool_results[1].contains("450.000 €"));
}

async fn complete_or_escalate_returns_to_the_primary_in_the_same_turn(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .calls(
                "appointment_assistant",
                "CompleteOrEscalate",
                json!({"cancel": false, "reason": "cita gestionada"}),
            )
            .says("primary_assistant", "¡A ti! ¿Te ayudo en algo más?"),
        EngineSettings::default(),
    );
    h.set_state("appointment_assistant").await;
    assert_eq!(
        h.say("perfecto, muchas gracias").await.as_deref(),
        Some("¡A ti! ¿Te ayudo en algo más?")
    );
    assert!(h.dialog_state().await.is_empty());
    assert_eq!(
        h.shape().await,
        [
            "human",
            "ai:appointment_assistant->CompleteOrEscalate",
            "tool",
            "ai:primary_assistant"
        ]
    );
    let primary_request = &h.llm.requests()[1];
    assert!(
        !primary_request
            .tools
            .iter()
            .any(|t| t.name == "CompleteOrEscalate")
    );
}

async fn a_delegation_the_role_may_not_reach_is_refused(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .calls(
                "primary_assistant",
                "ToOwnerInfoAssistant",
                json!({"query": "datos del dueño"}),
            )
            .says("primary_assistant", "No puedo darte datos del propietario."),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("dame el teléfono del dueño").await.as_deref(),
        Some("No puedo darte datos del propietario.")
    );
    assert!(h.dialog_state().await.is_empty());
    let history = h.history().await;
    assert!(
        history[2]
            .message
            .content
            .starts_with("Error: ToOwnerInfoAssistant is not available")
    );
}

async fn parallel_calls_are_each_answered_and_the_delegation_wins(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .calls_many(
                "primary_assistant",
                &[
                    ("ToPropertyAssistant", json!({"query": "precio del P-102"})),
                    ("ToAppointmentAssistant", json!({"query": "visita"})),
                    ("consultar_inmueble", json!({"ref": "P-102"})),
                ],
            )
            .says("property_assistant", "Te paso el precio."),
        EngineSettings::default(),
    );
    h.say("precio y visita del P-102").await;
    assert_eq!(h.dialog_state().await, ["property_assistant"]);
    let history = h.history().await;
    let calls = &history[1].message.tool_calls;
    let answers: Vec<(&str, &str)> = history[2..5]
        .iter()
        .map(|m| {
            (
                m.message.tool_call_id.as_deref().unwrap(),
                m.message.content.as_str(),
            )
        })
        .collect();
    for (call, (id, _)) in calls.iter().zip(&answers) {
        assert_eq!(call.id, *id, "one tool message per call id, in order");
    }
    assert!(answers[0].1.contains("now handled by property_assistant"));
    assert!(answers[1].1.starts_with("Not executed"));
    assert!(answers[2].1.starts_with("Not executed"));
}

async fn an_unknown_agent_in_dialog_state_falls_back_to_the_primary(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new().says("primary_assistant", "Hola de nuevo."),
        EngineSettings::default(),
    );
    h.set_state("removed_assistant").await;
    assert_eq!(h.say("hola").await.as_deref(), Some("Hola de nuevo."));
    assert!(
        h.dialog_state().await.is_empty(),
        "the stale state is cleared"
    );
}

/// The log lines of what `run` does, as the service prints them.
async fn logged<F: std::future::Future>(run: F) -> (F::Output, String) {
    #[derive(Clone, Default)]
    struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let output = {
        let _default = tracing::subscriber::set_default(subscriber);
        run.await
    };
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    (output, text)
}

/// The logs name the agent that answered, and the idle subgraph a later message leaves.
async fn the_logs_name_the_agent_that_ran(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says("appointment_assistant", "¿Qué día te va bien?")
            .says("primary_assistant", "¡Hola otra vez!"),
        EngineSettings {
            dialog_idle_ttl: Duration::from_millis(300),
            ..EngineSettings::default()
        },
    );
    h.store
        .set_dialog_state(
            &h.wa_id,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    let (reply, logs) = logged(h.say("quiero una cita")).await;
    assert_eq!(reply.as_deref(), Some("¿Qué día te va bien?"));
    let answered = logs.lines().find(|l| l.contains("turn answered")).unwrap();
    assert!(answered.contains("agent=appointment_assistant"), "{logs}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (reply, logs) = logged(h.say("hola")).await;
    assert_eq!(reply.as_deref(), Some("¡Hola otra vez!"));
    let left = logs
        .lines()
        .find(|l| l.contains("idle subgraph left"))
        .unwrap();
    assert!(left.contains("agent=appointment_assistant"), "{logs}");
    let answered = logs.lines().find(|l| l.contains("turn answered")).unwrap();
    assert!(answered.contains("agent=primary_assistant"), "{logs}");
}

async fn a_runaway_turn_is_cut_at_25_transitions(store: Arc<dyn Store>) {
    let mut llm = ScriptedLlm::new();
    for _ in 0..30 {
        llm = llm.calls("primary_assistant", "herramienta_inexistente", json!({}));
    }
    let h = Harness::new(store, llm, EngineSettings::default());
    h.set_state("removed_assistant").await;
    let reply = h.say("hola").await.unwrap();
    assert!(reply.starts_with("Lo siento"), "{reply}");
    assert_eq!(
        h.llm.requests().len(),
        13,
        "13 assistant + 12 router transitions = 25"
    );
    assert!(h.dialog_state().await.is_empty());
    assert_eq!(h.outbox_len().await, 1);
}

async fn an_idle_subgraph_is_left_before_the_next_message(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says("appointment_assistant", "¿Qué día te va bien?")
            .says("primary_assistant", "¡Hola otra vez!"),
        EngineSettings {
            dialog_idle_ttl: Duration::from_millis(300),
            ..EngineSettings::default()
        },
    );
    h.set_state("appointment_assistant").await;
    h.say("quiero una cita").await;
    assert_eq!(h.dialog_state().await, ["appointment_assistant"]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(h.say("hola").await.as_deref(), Some("¡Hola otra vez!"));
    assert!(h.dialog_state().await.is_empty());
}

async fn messages_that_arrive_together_are_merged_into_one_turn(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new().says("primary_assistant", "Vale, piso en Sevilla con terraza."),
        EngineSettings::default(),
    );
    for (i, text) in ["busco piso", "en Sevilla", "con terraza"]
        .iter()
        .enumerate()
    {
        let entry = InboxEntry {
            received_at: Utc::now() + chrono::Duration::milliseconds(i as i64),
            ..common::inbox_entry(&format!("wamid.M{i}"), &h.wa_id, text, InboxStatus::Pending)
        };
        h.store.insert_inbox(&[entry]).await.unwrap();
    }
    let open = h.store.open_inbox(&h.wa_id).await.unwrap();
    h.engine.run_turn(&h.wa_id, &open).await.unwrap();
    let history = h.history().await;
    assert_eq!(
        history[0].message.content,
        "busco piso\nen Sevilla\ncon terraza"
    );
    assert_eq!(history[0].message.wamids.len(), 3);
    assert_eq!(h.llm.requests().len(), 1);
}

// ---- fast path and offline mode -----------------------------------------------------------

fn offline_reply_of(agent: &str) -> String {
    let agents = AgentRegistry::load(
        &prompts_dir(),
        &ToolRegistry::new().with(LookupProperty).names(),
    )
    .unwrap();
    agents.get(agent).unwrap().offline_reply.clone().unwrap()
}

/// The primary delegated to `appointment_assistant`, which answered and stays active.
async fn assert_entered_appointments_by_delegation(h: &Harness) {
    assert_eq!(h.dialog_state().await, ["appointment_assistant"]);
    assert_eq!(
        h.shape().await,
        [
            "human",
            "ai:primary_assistant->ToAppointmentAssistant",
            "tool",
            "ai:appointment_assistant"
        ]
    );
}

async fn a_message_naming_one_subgraph_enters_it_without_asking_the_primary(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says(
                "appointment_assistant",
                "¿Qué propiedad y qué día te viene bien?",
            )
            .says("appointment_assistant", "Eso te lo cuento en un momento."),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("Quiero agendar una visita").await.as_deref(),
        Some("¿Qué propiedad y qué día te viene bien?")
    );
    // Recorded exactly as if the primary's LLM had delegated.
    assert_entered_appointments_by_delegation(&h).await;
    let history = h.history().await;
    let call = &history[1].message.tool_calls[0];
    assert_eq!(*call.args, json!({"query": "Quiero agendar una visita"}));
    assert!(
        call.id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "{}",
        call.id
    );
    assert_eq!(
        history[2].message.tool_call_id.as_deref(),
        Some(call.id.as_str())
    );
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 1, "only the subgraph's LLM was asked");
    assert_eq!(
        requests[0].messages.len(),
        3,
        "human, delegation, tool result"
    );
    assert_eq!(requests[0].conversation.as_deref(), Some("34600111222"));

    // Inside a subgraph, a follow-up stays with the assistant that holds the conversation.
    h.say("el jueves a las cinco mejor").await;
    assert_eq!(h.dialog_state().await, ["appointment_assistant"]);
    assert_eq!(h.llm.remaining(), 0);
}

/// A subgraph holds the conversation and the user asks for another assistant's work: the router
/// leaves and enters the right one in the same turn, recorded exactly as the subgraph's
/// CompleteOrEscalate and the primary's delegation would be, and only the new assistant's LLM
/// is asked.
async fn a_busy_subgraph_hands_a_message_for_another_assistant_over_in_the_same_turn(
    store: Arc<dyn Store>,
) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says("appointment_assistant", "¿Qué día te viene bien?")
            .says("mortgage_loan_assistant", "¿Qué precio tiene la vivienda?"),
        EngineSettings::default(),
    );
    h.say("Quiero agendar una visita").await;
    let text = "Oye y otra cosa, ¿cuánto me saldría la cuota de la hipoteca al mes?";
    assert_eq!(
        h.say(text).await.as_deref(),
        Some("¿Qué precio tiene la vivienda?")
    );
    assert_eq!(h.dialog_state().await, ["mortgage_loan_assistant"]);
    assert_eq!(
        h.shape().await[4..],
        [
            "human",
            "ai:appointment_assistant->CompleteOrEscalate",
            "tool",
            "ai:primary_assistant->ToMortgageLoanAssistant",
            "tool",
            "ai:mortgage_loan_assistant"
        ]
    );
    let history = h.history().await;
    assert_eq!(history[5].message.tool_calls[0].args["cancel"], json!(true));
    assert_eq!(
        *history[7].message.tool_calls[0].args,
        json!({ "query": text })
    );
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 2, "no LLM call for leaving or entering");
    assert_eq!(requests[1].agent, "mortgage_loan_assistant");
    assert_eq!(h.llm.remaining(), 0);
}

/// A first message that tells nothing about the language leaves the conversation in the
/// business's language all the same (the first of the configured languages).
async fn a_message_without_language_evidence_leaves_the_business_language(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new().says("primary_assistant", "¡Hola! ¿En qué te ayudo?"),
        EngineSettings {
            languages: vec!["pt".into(), "es".into(), "en".into()],
            ..EngineSettings::default()
        },
    );
    h.say("👍").await;
    assert_eq!(conversation_lang(&h).await.as_deref(), Some("pt"));
}

async fn ambiguous_words_or_a_switched_off_fast_path_leave_it_to_the_llm(store: Arc<dyn Store>) {
    let h = Harness::new(
        store.clone(),
        ScriptedLlm::new()
            .says("primary_assistant", "¿Empezamos por la visita?")
            .says("primary_assistant", "¡Hola!"),
        EngineSettings::default(),
    );
    h.say("Quiero agendar una visita y saber la cuota de la hipoteca")
        .await;
    h.say("hola").await;
    assert!(h.dialog_state().await.is_empty());
    assert_eq!(h.llm.remaining(), 0, "the primary was asked both times");

    let h = Harness::new(
        store,
        ScriptedLlm::new().says("primary_assistant", "¿Para qué propiedad?"),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    let h = Harness {
        wa_id: WaId::parse("34600111333").unwrap(),
        ..h
    };
    assert_eq!(
        h.say("Quiero agendar una visita").await.as_deref(),
        Some("¿Para qué propiedad?")
    );
    assert!(h.dialog_state().await.is_empty());
}

async fn with_the_llm_down_keywords_route_to_the_subgraphs_offline_reply(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new().fails("HTTP 503"),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    assert_eq!(
        h.say("Quiero agendar una visita").await,
        Some(offline_reply_of("appointment_assistant"))
    );
    assert_entered_appointments_by_delegation(&h).await;
    // Once the chain failed, the subgraph does not wait for it again in the same turn.
    assert_eq!(h.llm.requests().len(), 1);
}

/// Offline nobody calls CompleteOrEscalate: the keywords of each new message decide whether it
/// is still the subgraph's, so a conversation never stays stuck in one.
async fn with_the_llm_down_a_subgraph_lets_go_when_the_keywords_do(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .fails("HTTP 503")
            .fails("HTTP 503")
            .fails("HTTP 503")
            .fails("HTTP 503"),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("Quiero agendar una visita").await,
        Some(offline_reply_of("appointment_assistant"))
    );
    // Still about the visit: the same assistant.
    assert_eq!(
        h.say("¿Y si cambio la cita al viernes?").await,
        Some(offline_reply_of("appointment_assistant"))
    );
    assert_eq!(h.dialog_state().await, ["appointment_assistant"]);
    // Another topic: the keywords take it to the mortgage assistant.
    assert_eq!(
        h.say("¿Qué hipoteca me daríais?").await,
        Some(offline_reply_of("mortgage_loan_assistant"))
    );
    assert_eq!(h.dialog_state().await, ["mortgage_loan_assistant"]);
    // Nothing the keywords know: back to the primary assistant.
    assert_eq!(
        h.say("Gracias, hasta luego").await,
        Some(offline_reply_of("primary_assistant"))
    );
    assert!(h.dialog_state().await.is_empty());
}

async fn with_the_llm_down_and_no_keyword_the_primary_answers_offline(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new().fails("HTTP 503"),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("hola, buenas").await,
        Some(offline_reply_of("primary_assistant"))
    );
    assert!(h.dialog_state().await.is_empty());
    assert_eq!(h.shape().await, ["human", "ai:primary_assistant"]);
}

// ---- guard_translator: the user's language ------------------------------------------------

async fn conversation_lang(h: &Harness) -> Option<String> {
    h.store
        .conversation(&h.wa_id)
        .await
        .unwrap()
        .and_then(|c| c.lang)
}

async fn a_spanish_reply_to_a_spanish_user_is_not_translated(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says(
                "primary_assistant",
                "¡Hola! Claro, te cuento todo sobre el piso de la calle Mayor.",
            )
            .says("primary_assistant", "Perfecto, seguimos cuando quieras."),
        EngineSettings::default(),
    );
    h.say("Hola, quiero información sobre el piso de la calle Mayor")
        .await;
    assert_eq!(conversation_lang(&h).await.as_deref(), Some("es"));
    // "ok" says nothing about the language: Spanish stays.
    h.say("ok").await;
    assert_eq!(conversation_lang(&h).await.as_deref(), Some("es"));
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 2, "no translation call");
    assert!(requests.iter().all(|r| r.agent == "primary_assistant"));
}

async fn a_spanish_reply_to_an_english_user_is_translated_once(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says(
                "primary_assistant",
                "¡Hola! El piso de la calle Mayor tiene tres habitaciones y cuesta 450.000 €.",
            )
            .says(
                "guard_translator",
                "Hi! The flat on Calle Mayor has three bedrooms and costs €450,000.",
            ),
        EngineSettings::default(),
    );
    let reply = h
        .say("Hello, I would like some information about the flat on Calle Mayor")
        .await;
    assert_eq!(
        reply.as_deref(),
        Some("Hi! The flat on Calle Mayor has three bedrooms and costs €450,000.")
    );
    assert_eq!(conversation_lang(&h).await.as_deref(), Some("en"));
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 2);
    let translation = &requests[1];
    assert_eq!(translation.agent, "guard_translator");
    assert!(translation.tools.is_empty(), "the translator gets no tools");
    assert!(
        translation.system.text().contains("«en»"),
        "{}",
        translation.system
    );
    assert_eq!(
        translation.messages,
        [zaguan::llm::ChatMessage::human(
            "¡Hola! El piso de la calle Mayor tiene tres habitaciones y cuesta 450.000 €."
        )]
    );
}

async fn a_failed_translation_sends_the_reply_untranslated(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says(
                "primary_assistant",
                "Soy el asistente de la inmobiliaria y puedo ayudarte con pisos y visitas.",
            )
            .fails("HTTP 503"),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("Hi there, good afternoon, who am I talking to please?")
            .await
            .as_deref(),
        Some("Soy el asistente de la inmobiliaria y puedo ayudarte con pisos y visitas.")
    );
}

async fn internal_artefacts_never_reach_the_user(store: Arc<dyn Store>) {
    let h = Harness::new(
        store,
        ScriptedLlm::new()
            .says(
                "primary_assistant",
                "Voy a usar ToAppointmentAssistant. {\"query\": \"visita\"}\n\n**¿Qué día** te viene bien?",
            )
            .says("primary_assistant", "CompleteOrEscalate"),
        EngineSettings::default(),
    );
    assert_eq!(
        h.say("hola").await.as_deref(),
        Some("*¿Qué día* te viene bien?")
    );
    // Nothing left: never an empty message, an apology in the user's language instead.
    let apology = h.say("vale, gracias").await.unwrap();
    assert!(apology.starts_with("Lo siento"), "{apology}");
}

crate::both_stores!(
    the_logs_name_the_agent_that_ran,
    a_plain_answer_comes_from_the_primary_assistant,
    the_primary_delegates_into_every_subgraph,
    a_subgraph_loops_over_its_tools,
    complete_or_escalate_returns_to_the_primary_in_the_same_turn,
    a_delegation_the_role_may_not_reach_is_refused,
    parallel_calls_are_each_answered_and_the_delegation_wins,
    an_unknown_agent_in_dialog_state_falls_back_to_the_primary,
    a_runaway_turn_is_cut_at_25_transitions,
    an_idle_subgraph_is_left_before_the_next_message,
    messages_that_arrive_together_are_merged_into_one_turn,
    a_message_naming_one_subgraph_enters_it_without_asking_the_primary,
    ambiguous_words_or_a_switched_off_fast_path_leave_it_to_the_llm,
    a_busy_subgraph_hands_a_message_for_another_assistant_over_in_the_same_turn,
    a_message_without_language_evidence_leaves_the_business_language,
    with_the_llm_down_keywords_route_to_the_subgraphs_offline_reply,
    with_the_llm_down_and_no_keyword_the_primary_answers_offline,
    with_the_llm_down_a_subgraph_lets_go_when_the_keywords_do,
    a_spanish_reply_to_a_spanish_user_is_not_translated,
    a_spanish_reply_to_an_english_user_is_translated_once,
    a_failed_translation_sends_the_reply_untranslated,
    internal_artefacts_never_reach_the_user,
);

// ---- crash after each node, then resume ---------------------------------------------------

use std::sync::atomic::{AtomicUsize, Ordering};
use zaguan::domain::OutboxId;
use zaguan::domain::StatusUpdate;
use zaguan::domain::ToolCall;
use zaguan::llm::{ChatMessage, Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::store::{
    Conversation, ConversationStore, HistoryStore, LeaseStore, MaintenanceStore, NewMessage,
    NewOutbox, OutboxEntry, OutboxStore, OutboxUpdate, StatusOutcome, StoreError, StoreParts,
    StoreResult,
};

/// A real store whose `crash_at`-th engine write fails, as if the process died right before it.
struct CrashingStore {
    inner: Arc<dyn Store>,
    writes: AtomicUsize,
    crash_at: usize,
    /// While set, lease claims and instance heartbeats hang (a store too slow to answer them).
    stall_claims: std::sync::atomic::AtomicBool,
    /// The next this-many writes answer `Unavailable` (an overloaded database).
    unavailable_for: AtomicUsize,
    /// The next this-many records of a part as `sent` answer `Unavailable`.
    unavailable_sent_records: AtomicUsize,
    /// Every write waits this long first (a slow database).
    delay: Duration,
    /// The conversations whose leases were won, in the order the claims were answered.
    claimed: std::sync::Mutex<Vec<WaId>>,
}

impl CrashingStore {
    /// `inner` with no fault armed.
    fn over(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            writes: AtomicUsize::new(0),
            crash_at: 0,
            stall_claims: Default::default(),
            unavailable_for: Default::default(),
            unavailable_sent_records: Default::default(),
            delay: Duration::ZERO,
            claimed: Default::default(),
        }
    }

    async fn write(&self) -> StoreResult<()> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if self
            .unavailable_for
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Unavailable("simulated overload".into()));
        }
        if self.writes.fetch_add(1, Ordering::SeqCst) + 1 == self.crash_at {
            return Err(StoreError::Unavailable("simulated crash".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl MaintenanceStore for CrashingStore {
    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    async fn forget(&self, w: &WaId) -> StoreResult<zaguan::store::ForgetCounts> {
        self.inner.forget(w).await
    }

    async fn purge(
        &self,
        b: &zaguan::store::PurgeBefore,
    ) -> StoreResult<zaguan::store::PurgeCounts> {
        self.write().await?;
        self.inner.purge(b).await
    }
}

#[async_trait]
impl LeaseStore for CrashingStore {
    async fn lease_of(&self, w: &WaId) -> StoreResult<Option<zaguan::store::LeaseView>> {
        self.inner.lease_of(w).await
    }

    async fn claim_conversation(
        &self,
        w: &WaId,
        o: &str,
        n: chrono::DateTime<Utc>,
        u: chrono::DateTime<Utc>,
        live: &[String],
    ) -> StoreResult<bool> {
        while self.stall_claims.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let won = self.inner.claim_conversation(w, o, n, u, live).await?;
        if won {
            self.claimed.lock().unwrap().push(w.clone());
        }
        Ok(won)
    }

    async fn release_conversation(&self, w: &WaId, o: &str) -> StoreResult<()> {
        self.inner.release_conversation(w, o).await
    }

    async fn release_all_leases(&self, o: &str) -> StoreResult<u64> {
        self.inner.release_all_leases(o).await
    }

    async fn active_leases(&self, n: chrono::DateTime<Utc>, l: &[String]) -> StoreResult<u64> {
        self.inner.active_leases(n, l).await
    }

    async fn server_time(&self) -> StoreResult<chrono::DateTime<Utc>> {
        self.inner.server_time().await
    }

    async fn instance_beat(
        &self,
        i: &str,
        n: &str,
        t: bool,
    ) -> StoreResult<Option<chrono::DateTime<Utc>>> {
        while self.stall_claims.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        self.inner.instance_beat(i, n, t).await
    }

    async fn instances(&self) -> StoreResult<Vec<zaguan::store::InstanceRecord>> {
        self.inner.instances().await
    }

    async fn instance_left(&self, i: &str, n: &str) -> StoreResult<()> {
        self.inner.instance_left(i, n).await
    }
}

#[async_trait]
impl ConversationStore for CrashingStore {
    async fn conversation(&self, w: &WaId) -> StoreResult<Option<Conversation>> {
        self.inner.conversation(w).await
    }

    async fn set_dialog_state(
        &self,
        w: &WaId,
        d: &zaguan::domain::DialogState,
        a: chrono::DateTime<Utc>,
    ) -> StoreResult<()> {
        self.write().await?;
        self.inner.set_dialog_state(w, d, a).await
    }

    async fn list_conversations(
        &self,
        q: &zaguan::store::ConversationQuery,
    ) -> StoreResult<Vec<Conversation>> {
        self.inner.list_conversations(q).await
    }

    async fn reset_conversation(
        &self,
        w: &WaId,
        by: &str,
        at: chrono::DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.inner.reset_conversation(w, by, at).await
    }

    async fn set_handoff(
        &self,
        w: &WaId,
        h: Option<&zaguan::domain::Handoff>,
    ) -> StoreResult<bool> {
        self.write().await?;
        self.inner.set_handoff(w, h).await
    }

    async fn request_handoff(
        &self,
        w: &WaId,
        r: &zaguan::store::HandoffReason,
        first: Option<chrono::DateTime<Utc>>,
    ) -> StoreResult<zaguan::store::HandoffRequest> {
        self.write().await?;
        self.inner.request_handoff(w, r, first).await
    }

    async fn due_handoffs(
        &self,
        now: chrono::DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(WaId, zaguan::store::HandoffRequest)>> {
        self.inner.due_handoffs(now, limit).await
    }

    async fn advance_handoff(
        &self,
        w: &WaId,
        at: chrono::DateTime<Utc>,
        from: u8,
        step: &zaguan::store::HandoffStep,
    ) -> StoreResult<bool> {
        self.write().await?;
        self.inner.advance_handoff(w, at, from, step).await
    }

    async fn handoff_notice_failed(
        &self,
        w: &WaId,
        failure: &zaguan::store::NoticeFailure,
    ) -> StoreResult<bool> {
        self.write().await?;
        self.inner.handoff_notice_failed(w, failure).await
    }

    async fn set_pending_action(
        &self,
        w: &WaId,
        a: Option<&zaguan::domain::PendingAction>,
    ) -> StoreResult<()> {
        self.write().await?;
        self.inner.set_pending_action(w, a).await
    }

    async fn set_conversation_location(
        &self,
        w: &WaId,
        l: zaguan::domain::GeoPoint,
    ) -> StoreResult<()> {
        self.inner.set_conversation_location(w, l).await
    }

    async fn note_history_written(&self, w: &WaId, a: chrono::DateTime<Utc>) -> StoreResult<()> {
        self.inner.note_history_written(w, a).await
    }

    async fn set_conversation_lang(&self, w: &WaId, l: &str) -> StoreResult<()> {
        self.inner.set_conversation_lang(w, l).await
    }
}

#[async_trait]
impl HistoryStore for CrashingStore {
    async fn append_message(&self, m: NewMessage) -> StoreResult<StoredMessage> {
        self.write().await?;
        self.inner.append_message(m).await
    }

    async fn recent_messages(&self, w: &WaId, l: usize) -> StoreResult<Vec<StoredMessage>> {
        self.inner.recent_messages(w, l).await
    }

    async fn append_messages(
        &self,
        m: Vec<NewMessage>,
        after: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.write().await?;
        self.inner.append_messages(m, after).await
    }

    async fn messages_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.inner.messages_between(from, to, limit).await
    }
}

#[async_trait]
impl OutboxStore for CrashingStore {
    async fn insert_outbox(&self, e: &[NewOutbox]) -> StoreResult<Vec<OutboxId>> {
        self.write().await?;
        self.inner.insert_outbox(e).await
    }

    async fn record_reply(&self, parts: &[OutboxEntry]) -> StoreResult<()> {
        if parts
            .iter()
            .any(|p| p.status == zaguan::store::OutboxStatus::Sent)
            && self
                .unavailable_sent_records
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(StoreError::Unavailable("simulated outage".into()));
        }
        self.write().await?;
        self.inner.record_reply(parts).await
    }

    async fn outbox_entry(&self, i: &OutboxId) -> StoreResult<Option<OutboxEntry>> {
        self.inner.outbox_entry(i).await
    }

    async fn update_outbox(&self, i: &OutboxId, u: &OutboxUpdate) -> StoreResult<bool> {
        if matches!(u, OutboxUpdate::Sent { .. })
            && self
                .unavailable_sent_records
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(StoreError::Unavailable("simulated outage".into()));
        }
        self.inner.update_outbox(i, u).await
    }

    async fn unsent_outbox(&self, w: &WaId) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.unsent_outbox(w).await
    }

    async fn conversations_with_unsent_outbox(
        &self,
        n: chrono::DateTime<Utc>,
        l: usize,
    ) -> StoreResult<Vec<WaId>> {
        self.inner.conversations_with_unsent_outbox(n, l).await
    }

    async fn outbox_by_wamid(&self, w: &WaMessageId) -> StoreResult<Option<OutboxEntry>> {
        self.inner.outbox_by_wamid(w).await
    }

    async fn outbox_in_reply_to(&self, w: &WaMessageId) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.outbox_in_reply_to(w).await
    }

    async fn apply_status(&self, s: &StatusUpdate) -> StoreResult<StatusOutcome> {
        self.inner.apply_status(s).await
    }

    async fn fall_back(&self, i: &OutboxId, f: &zaguan::store::Fallback) -> StoreResult<bool> {
        self.write().await?;
        self.inner.fall_back(i, f).await
    }

    async fn undelivered_since(
        &self,
        s: chrono::DateTime<Utc>,
        l: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.undelivered_since(s, l).await
    }

    async fn record_template_status(&self, s: &zaguan::store::TemplateStatus) -> StoreResult<()> {
        self.inner.record_template_status(s).await
    }

    async fn template_statuses(&self) -> StoreResult<Vec<zaguan::store::TemplateStatus>> {
        self.inner.template_statuses().await
    }

    async fn record_account_health(
        &self,
        health: &zaguan::domain::AccountHealth,
    ) -> StoreResult<()> {
        self.inner.record_account_health(health).await
    }

    async fn account_health(&self) -> StoreResult<Vec<zaguan::domain::AccountHealth>> {
        self.inner.account_health().await
    }

    async fn initiated_since(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        with: &WaId,
    ) -> StoreResult<(u64, bool)> {
        self.inner.initiated_since(since, with).await
    }

    async fn pause_sends(
        &self,
        key: &str,
        until: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<()> {
        self.inner.pause_sends(key, until).await
    }

    async fn send_pauses(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<(String, chrono::DateTime<chrono::Utc>)>> {
        self.inner.send_pauses(now, limit).await
    }

    async fn billed_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> StoreResult<Vec<zaguan::store::OutboxEntry>> {
        self.inner.billed_between(from, to, limit).await
    }
}

impl CrashingStore {
    /// The store the engine sees: the inner one, with the collections this one breaks
    /// (MaintenanceStore, LeaseStore, ConversationStore, HistoryStore, OutboxStore) answered by it.
    fn store(self: &Arc<Self>) -> Arc<dyn Store> {
        let mut parts = StoreParts::of(self.inner.clone());
        parts.maintenance = self.clone();
        parts.leases = self.clone();
        parts.conversations = self.clone();
        parts.history = self.clone();
        parts.outbox = self.clone();
        Arc::new(parts)
    }
}

/// Answers from the history alone, so a resumed turn gets the same answers again: the
/// primary delegates to the property assistant, which looks the property up, then answers.
struct RuleLlm;

#[async_trait]
impl Llm for RuleLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let call = |name: &str, args: serde_json::Value| LlmResponse {
            tool_calls: vec![ToolCall {
                id: format!("call_{}", request.messages.len()),
                name: name.into(),
                args: args.into(),
            }],
            ..LlmResponse::default()
        };
        let last_tool = request.messages.iter().rev().find_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        });
        Ok(match (request.agent.as_str(), last_tool) {
            ("primary_assistant", _) => {
                call("ToPropertyAssistant", json!({"query": "precio P-102"}))
            }
            ("property_assistant", Some(t)) if t.contains("450.000") => LlmResponse {
                content: "El P-102 cuesta 450.000 €.".into(),
                ..LlmResponse::default()
            },
            ("property_assistant", _) => call("consultar_inmueble", json!({"ref": "P-102"})),
            (other, _) => {
                return Err(LlmError::Rejected {
                    status: 400,
                    message: format!("unexpected agent {other}"),
                });
            }
        })
    }
}

/// The engine over `store` answering from [`RuleLlm`], with the property lookup tool.
fn rule_engine(store: Arc<dyn Store>) -> Engine {
    let tools = ToolRegistry::new().with(LookupProperty);
    let agents = AgentRegistry::load(&prompts_dir(), &tools.names()).unwrap();
    Engine::new(
        store,
        Arc::new(RuleLlm),
        Arc::new(agents),
        Arc::new(tools),
        EngineSettings::default(),
    )
}

async fn a_turn_cut_after_any_node_resumes_to_exactly_one_reply(
    make_store: impl AsyncFn() -> Arc<dyn Store>,
) {
    let wa_id = WaId::parse("34600111222").unwrap();
    let expected = [
        "human",
        "ai:primary_assistant->ToPropertyAssistant",
        "tool",
        "ai:property_assistant->consultar_inmueble",
        "tool",
        "ai:property_assistant",
    ];
    // 4 writes in the whole turn: the human message with the primary's delegation, the
    // dialog_state, the subgraph's four messages (entry, tool call, its result, the answer),
    // the outbox entry.
    for crash_at in 1..=5 {
        let inner = make_store().await;
        let entry = common::inbox_entry(
            "wamid.CRASH",
            &wa_id,
            "¿Cuánto cuesta el P-102?",
            InboxStatus::Pending,
        );
        let wamid = entry.wamid.clone();
        inner.insert_inbox(&[entry]).await.unwrap();
        let crashing: Arc<dyn Store> = Arc::new(CrashingStore {
            crash_at,
            ..CrashingStore::over(inner.clone())
        })
        .store();
        let open = inner.open_inbox(&wa_id).await.unwrap();
        let first = rule_engine(crashing).run_turn(&wa_id, &open).await;
        assert_eq!(first.is_err(), crash_at <= 4, "crash at write {crash_at}");
        // The process restarts: the same inbox message is still open, and is resumed.
        let open = inner.open_inbox(&wa_id).await.unwrap();
        rule_engine(inner.clone())
            .run_turn(&wa_id, &open)
            .await
            .unwrap();

        let replies = inner.outbox_in_reply_to(&wamid).await.unwrap();
        assert_eq!(replies.len(), 1, "crash at write {crash_at}");
        assert_eq!(replies[0].body, "El P-102 cuesta 450.000 €.");
        let history = inner.recent_messages(&wa_id, 100).await.unwrap();
        let shape: Vec<String> = history
            .iter()
            .map(|m| match (m.message.role, &m.message.agent) {
                (MessageRole::Ai, Some(a)) if !m.message.tool_calls.is_empty() => {
                    format!("ai:{a}->{}", m.message.tool_calls[0].name)
                }
                (MessageRole::Ai, Some(a)) => format!("ai:{a}"),
                (role, _) => role.as_str().to_owned(),
            })
            .collect();
        assert_eq!(shape, expected, "crash at write {crash_at}");
        let conversation = inner.conversation(&wa_id).await.unwrap().unwrap();
        assert_eq!(conversation.dialog_state.to_list(), ["property_assistant"]);
    }
}

/// The cut-turn scenarios run a turn once per node it can be cut after, each on a fresh store
/// (one database on MongoDB, emptied between runs).
mod cut_turns {
    use super::*;

    crate::both_stores!(|s| (async || s.fresh().await) =>
        a_turn_cut_after_any_node_resumes_to_exactly_one_reply,
        a_message_arriving_before_a_cut_turn_resumes_gets_its_own_turn,
    );
}

/// A turn cut short, then a second message before the workers resume it: the cut turn is
/// finished with its own message and answers it, and the new message gets a turn of its own
/// (merging them would answer only the second and leave the first without a reply). A turn cut
/// before it stored anything left no trace: its message and the new one are answered together,
/// as two messages that arrive before a turn starts are.
async fn a_message_arriving_before_a_cut_turn_resumes_gets_its_own_turn(
    make_store: impl AsyncFn() -> Arc<dyn Store>,
) {
    let wa_id = WaId::parse("34600111333").unwrap();
    // Writes 1..=3 come before the reply is queued (the 4th); the first stores the human
    // message.
    for crash_at in 1..=3 {
        let inner = make_store().await;
        let first = inbox_entry(
            "wamid.CUT1",
            &wa_id,
            "¿Cuánto cuesta el P-102?",
            InboxStatus::Pending,
        );
        inner
            .insert_inbox(std::slice::from_ref(&first))
            .await
            .unwrap();
        let crashing: Arc<dyn Store> = Arc::new(CrashingStore {
            crash_at,
            ..CrashingStore::over(inner.clone())
        })
        .store();
        let cut = rule_engine(crashing)
            .run_turn(&wa_id, std::slice::from_ref(&first))
            .await;
        assert!(cut.is_err(), "crash at write {crash_at}");
        let second = inbox_entry(
            "wamid.CUT2",
            &wa_id,
            "¿Y tiene garaje?",
            InboxStatus::Pending,
        );
        inner
            .insert_inbox(std::slice::from_ref(&second))
            .await
            .unwrap();

        let workers = zaguan::runtime::Workers::spawn(
            Arc::new(rule_engine(inner.clone())),
            Arc::new(zaguan::outbound::Outbound::dry_run(inner.clone())),
            Arc::new(zaguan::runtime::Arrivals::new()),
            zaguan::runtime::WorkerSettings {
                poll: Duration::from_millis(20),
                ..zaguan::runtime::WorkerSettings::default()
            },
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !inner.open_inbox(&wa_id).await.unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "crash at write {crash_at}: not answered"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        workers.stop().await;
        let history = inner.recent_messages(&wa_id, 100).await.unwrap();
        let humans: Vec<&str> = history
            .iter()
            .filter(|m| m.message.role == MessageRole::Human)
            .map(|m| m.message.content.as_str())
            .collect();
        if crash_at == 1 {
            // Nothing of the cut turn was stored: one turn for both.
            assert_eq!(humans, ["¿Cuánto cuesta el P-102?\n¿Y tiene garaje?"]);
            assert!(
                inner
                    .outbox_in_reply_to(&first.wamid)
                    .await
                    .unwrap()
                    .is_empty()
            );
            let replies = inner.outbox_in_reply_to(&second.wamid).await.unwrap();
            assert_eq!(replies.len(), 1);
            continue;
        }
        for entry in [&first, &second] {
            let replies = inner.outbox_in_reply_to(&entry.wamid).await.unwrap();
            assert_eq!(
                replies.len(),
                1,
                "crash at write {crash_at}: {}",
                entry.wamid
            );
            assert_eq!(replies[0].body, "El P-102 cuesta 450.000 €.");
        }
        assert_eq!(
            humans,
            ["¿Cuánto cuesta el P-102?", "¿Y tiene garaje?"],
            "crash at write {crash_at}"
        );
    }
}

/// Answers after a second, counting its calls.
struct SlowCountingLlm(AtomicUsize);

#[async_trait]
impl Llm for SlowCountingLlm {
    async fn complete(&self, _request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        Ok(LlmResponse {
            content: "Aquí estoy.".to_owned(),
            ..LlmResponse::default()
        })
    }
}

/// Beside another live instance, a worker whose heartbeats stop being confirmed stops its
/// turn before the lease runs out (so it never runs beside an instance taking over); the turn
/// resumes once the store answers again, and the message is answered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_stops_when_its_lease_cannot_be_renewed_and_resumes_once() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let store = Arc::new(CrashingStore::over(inner.clone()));
    let wa_id = WaId::parse("34600000701").unwrap();
    let entry = common::inbox_entry("wamid.LEASE1", &wa_id, "Hola", InboxStatus::Pending);
    let wamid = entry.wamid.clone();
    inner.insert_inbox(&[entry]).await.unwrap();
    let llm = Arc::new(SlowCountingLlm(AtomicUsize::new(0)));
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.store(),
        llm.clone(),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    let companion = companion(&inner, Duration::from_millis(600)).await;
    let (workers, heartbeat) = instance_workers(
        store.clone(),
        engine,
        zaguan::outbound::Outbound::dry_run(store.store()),
        Duration::from_millis(600),
    )
    .await;
    // The turn is waiting on the model when the store stops confirming heartbeats.
    while llm.0.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    store.stall_claims.store(true, Ordering::SeqCst);
    // The model answers within a second: a reply by now would mean the turn went on without
    // its lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        inner.outbox_in_reply_to(&wamid).await.unwrap().is_empty(),
        "the turn stopped before its lease ran out"
    );
    store.stall_claims.store(false, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while inner.outbox_in_reply_to(&wamid).await.unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "not resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    workers.stop().await;
    heartbeat.leave().await;
    companion.leave().await;
    // Cut at least once (a loaded machine may cut a resumed attempt too), answered once.
    assert!(llm.0.load(Ordering::SeqCst) >= 2);
    assert_eq!(inner.outbox_in_reply_to(&wamid).await.unwrap().len(), 1);
    let history = inner.recent_messages(&wa_id, 10).await.unwrap();
    let roles: Vec<&str> = history.iter().map(|m| m.message.role.as_str()).collect();
    assert_eq!(roles, ["human", "ai"]);
    // The cuts were the store's fault: no attempt counted against the message.
    assert_eq!(
        inner.inbox_entry(&wamid).await.unwrap().unwrap().attempts,
        0
    );
}

/// A lone instance whose heartbeat stalls for three leases while ten turns wait on the model
/// goes on serving them: nobody could take its conversations over, so stopping would only
/// abandon the turns and redo them. Every message is answered once, during the stall, with one
/// model call each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_instance_whose_heartbeat_stalls_loses_abandons_and_redoes_no_turn() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let store = Arc::new(CrashingStore::over(inner.clone()));
    let mut wamids = Vec::new();
    for n in 0..10 {
        let wa_id = WaId::parse(&format!("3460000080{n}")).unwrap();
        let entry = inbox_entry(
            &format!("wamid.ALONE{n}"),
            &wa_id,
            "Hola",
            InboxStatus::Pending,
        );
        wamids.push((wa_id, entry.wamid.clone()));
        inner.insert_inbox(&[entry]).await.unwrap();
    }
    let llm = Arc::new(SlowCountingLlm(AtomicUsize::new(0)));
    let engine = shipped_engine(store.store(), llm.clone());
    let lease = Duration::from_millis(600);
    let (workers, heartbeat) = instance_workers(
        store.clone(),
        engine,
        zaguan::outbound::Outbound::dry_run(store.store()),
        lease,
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while llm.0.load(Ordering::SeqCst) < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "the turns did not start"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    store.stall_claims.store(true, Ordering::SeqCst);
    // The model answers within a second; the heartbeat stays silent for three leases.
    tokio::time::sleep(lease * 3).await;
    let mut answered_during_the_stall = 0;
    for (_, wamid) in &wamids {
        if !inner.outbox_in_reply_to(wamid).await.unwrap().is_empty() {
            answered_during_the_stall += 1;
        }
    }
    store.stall_claims.store(false, Ordering::SeqCst);
    tokio::time::sleep(lease).await;
    workers.stop().await;
    heartbeat.leave().await;
    assert_eq!(
        answered_during_the_stall, 10,
        "the turns went on while the heartbeat was late"
    );
    assert_eq!(llm.0.load(Ordering::SeqCst), 10, "no turn was redone");
    for (wa_id, wamid) in &wamids {
        assert_eq!(inner.outbox_in_reply_to(wamid).await.unwrap().len(), 1);
        let history = inner.recent_messages(wa_id, 10).await.unwrap();
        let roles: Vec<&str> = history.iter().map(|m| m.message.role.as_str()).collect();
        assert_eq!(roles, ["human", "ai"]);
    }
}

/// The heartbeat runs on a thread of its own: while every thread of the service's runtime is
/// busy for three leases, beats still land, so an instance beside others stays valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_beats_while_the_runtime_is_starved() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let lease = Duration::from_millis(600);
    let companion = companion(&inner, lease).await;
    let membership = zaguan::runtime::instances::Membership::establish(
        inner.clone(),
        "test-instance".to_owned(),
        lease,
        None,
        Arc::default(),
    )
    .await
    .unwrap();
    let heartbeat = membership.clone().spawn();
    // Beside the companion, a lapse would stop the work.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while membership.live().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the companion is not seen"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let epoch = membership.valid().expect("valid after a beat");
    let started = inner.server_time().await.unwrap();
    // Both runtime threads block for three leases; each then reads, still blocking, what the
    // heartbeat did meanwhile.
    let mut starving = Vec::new();
    for _ in 0..2 {
        let (membership, inner) = (membership.clone(), inner.clone());
        starving.push(tokio::spawn(async move {
            std::thread::sleep(lease * 3);
            let seen = futures::executor::block_on(inner.instances())
                .unwrap()
                .into_iter()
                .find(|record| record.id == "test-instance")
                .map(|record| record.seen_at);
            (membership.valid(), seen)
        }));
    }
    for task in starving {
        let (valid, seen) = task.await.unwrap();
        assert_eq!(
            valid,
            Some(epoch),
            "the instance stayed valid, in the same epoch"
        );
        let seen = seen.expect("registered");
        assert!(
            seen - started >= chrono::Duration::milliseconds(1200),
            "beats landed while the runtime was busy (last at +{:?})",
            seen - started
        );
    }
    heartbeat.leave().await;
    companion.leave().await;
}

/// Two instances: the one serving a conversation goes silent for good mid-turn (its model never
/// answers, its heartbeats hang). The other takes the conversation over once the lease runs out
/// and answers it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_takes_over_from_one_truly_gone() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let lease = Duration::from_millis(600);
    let wa_id = WaId::parse("34600000811").unwrap();
    let entry = inbox_entry("wamid.GONE1", &wa_id, "Hola", InboxStatus::Pending);
    let wamid = entry.wamid.clone();
    inner.insert_inbox(&[entry]).await.unwrap();
    // The first instance takes the turn; its model never answers.
    let hung = Arc::new(CrashingStore::over(inner.clone()));
    let stuck = Arc::new(SlowCountingLlm(AtomicUsize::new(0)));
    let (gone_workers, gone_heartbeat) = instance_workers_as(
        "gone-instance",
        hung.clone(),
        shipped_engine(hung.store(), Arc::new(NeverLlm(stuck.clone()))),
        zaguan::outbound::Outbound::dry_run(hung.store()),
        lease,
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stuck.0.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first turn did not start"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let survivor = Arc::new(CrashingStore::over(inner.clone()));
    let llm = Arc::new(SlowCountingLlm(AtomicUsize::new(0)));
    let (workers, heartbeat) = instance_workers_as(
        "survivor-instance",
        survivor.clone(),
        shipped_engine(survivor.store(), llm.clone()),
        zaguan::outbound::Outbound::dry_run(survivor.store()),
        lease,
    )
    .await;
    // The first instance has seen the second, then goes silent for good.
    tokio::time::sleep(lease).await;
    hung.stall_claims.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while inner.outbox_in_reply_to(&wamid).await.unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "not taken over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(lease).await;
    workers.stop().await;
    heartbeat.leave().await;
    assert_eq!(
        llm.0.load(Ordering::SeqCst),
        1,
        "the survivor served the turn once"
    );
    assert_eq!(inner.outbox_in_reply_to(&wamid).await.unwrap().len(), 1);
    assert_eq!(
        inner
            .lease_of(&wa_id)
            .await
            .unwrap()
            .map(|lease| lease.owner),
        Some("survivor-instance".to_owned())
    );
    drop((gone_workers, gone_heartbeat));
}

/// The engine over `store` with the shipped prompts, answering from `llm` (no fast path: the
/// model decides every turn).
fn shipped_engine(store: Arc<dyn Store>, llm: Arc<dyn Llm>) -> Engine {
    Engine::new(
        store,
        llm,
        Arc::new(
            AgentRegistry::load(
                &Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts"),
                &zaguan::startup::known_tools(),
            )
            .unwrap(),
        ),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    )
}

/// A model that never answers, counting the calls it received.
struct NeverLlm(Arc<SlowCountingLlm>);

#[async_trait]
impl Llm for NeverLlm {
    async fn complete(&self, _request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.0.0.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

/// Another instance, beating on `inner` (no workers): company for the instance under test.
async fn companion(
    inner: &Arc<dyn Store>,
    lease: Duration,
) -> zaguan::runtime::instances::MembershipTask {
    zaguan::runtime::instances::Membership::establish(
        inner.clone(),
        "companion-instance".to_owned(),
        lease,
        None,
        Arc::default(),
    )
    .await
    .unwrap()
    .spawn()
}

/// Workers of an instance over `store` (id `test-instance`, heartbeat running) with `lease`.
async fn instance_workers(
    store: Arc<CrashingStore>,
    engine: Engine,
    outbound: zaguan::outbound::Outbound,
    lease: Duration,
) -> (
    zaguan::runtime::Workers,
    zaguan::runtime::instances::MembershipTask,
) {
    instance_workers_as("test-instance", store, engine, outbound, lease).await
}

/// Workers of instance `id` over `store` (heartbeat running) with `lease`.
async fn instance_workers_as(
    id: &str,
    store: Arc<CrashingStore>,
    engine: Engine,
    outbound: zaguan::outbound::Outbound,
    lease: Duration,
) -> (
    zaguan::runtime::Workers,
    zaguan::runtime::instances::MembershipTask,
) {
    let membership = zaguan::runtime::instances::Membership::establish(
        store.store(),
        id.to_owned(),
        lease,
        None,
        Arc::default(),
    )
    .await
    .unwrap();
    let workers = zaguan::runtime::Workers::spawn_in(
        Arc::new(engine),
        Arc::new(outbound),
        Arc::new(zaguan::runtime::Arrivals::new()),
        zaguan::runtime::WorkerSettings {
            lease,
            poll: Duration::from_millis(20),
            ..zaguan::runtime::WorkerSettings::default()
        },
        membership.clone(),
    );
    (workers, membership.spawn())
}

/// Workers over `store` running the offline engine, sending through the real sender to a local
/// Graph API whose texts take `delay` to be answered; the lease lasts `lease`.
async fn workers_with_graph(
    store: Arc<CrashingStore>,
    delay: Duration,
    lease: Duration,
) -> (
    Arc<common::graph::FakeGraph>,
    zaguan::runtime::Workers,
    zaguan::runtime::instances::MembershipTask,
) {
    let graph = Arc::new(common::graph::FakeGraph::default());
    *graph.delay.lock().unwrap() = delay;
    let base = common::graph::serve(graph.clone()).await;
    let client = zaguan::outbound::GraphClient::new(
        format!("{base}/v21.0").parse().unwrap(),
        Some(secrecy::SecretString::from("EAAG-test".to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let outbound = zaguan::outbound::Outbound::new(
        store.store(),
        client,
        zaguan::outbound::Limiters::new(&zaguan::outbound::SendLimits::default()),
        zaguan::outbound::OutboundSettings::default(),
    );
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.store(),
        Arc::new(zaguan::llm::OfflineLlm),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings::default(),
    );
    let (workers, heartbeat) = instance_workers(store, engine, outbound, lease).await;
    (graph, workers, heartbeat)
}

/// The lease is lost while a reply is on its way to the Graph API: the work stops, but the
/// call and its record finish, so the next owner finds the part sent and the customer gets it
/// once (dropping the call mid-flight left it `sending`, and it went out twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_mid_send_does_not_send_the_reply_twice() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let store = Arc::new(CrashingStore::over(inner.clone()));
    let wa_id = WaId::parse("34600000703").unwrap();
    let entry = inbox_entry("wamid.MIDSEND", &wa_id, "Hola", InboxStatus::Pending);
    inner
        .insert_inbox(std::slice::from_ref(&entry))
        .await
        .unwrap();
    let companion = companion(&inner, Duration::from_millis(600)).await;
    let (graph, workers, heartbeat) = workers_with_graph(
        store.clone(),
        Duration::from_millis(700),
        Duration::from_millis(600),
    )
    .await;
    // The reply is in the outbox and on its way: the store stops confirming renewals.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while inner
        .outbox_in_reply_to(&entry.wamid)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "no reply queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    store.stall_claims.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    store.stall_claims.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    workers.stop().await;
    heartbeat.leave().await;
    companion.leave().await;
    let texts = graph.texts();
    assert_eq!(texts.len(), 1, "delivered once: {texts:?}");
    let parts = inner.outbox_in_reply_to(&entry.wamid).await.unwrap();
    assert_eq!(parts[0].status, zaguan::store::OutboxStatus::Sent);
    assert_eq!(parts[0].attempts, 1);
}

/// The store fails right after the Graph API accepted a reply: the `sent` record is retried
/// until the store answers, and the part is not sent again meanwhile (left `sending`, it went
/// out twice when the store came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_delivered_while_the_store_fails_is_recorded_late_not_sent_twice() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let store = Arc::new(CrashingStore {
        unavailable_sent_records: AtomicUsize::new(4),
        ..CrashingStore::over(inner.clone())
    });
    let wa_id = WaId::parse("34600000704").unwrap();
    let entry = inbox_entry("wamid.LATE1", &wa_id, "Hola", InboxStatus::Pending);
    inner
        .insert_inbox(std::slice::from_ref(&entry))
        .await
        .unwrap();
    let (graph, workers, heartbeat) = workers_with_graph(
        store.clone(),
        Duration::ZERO,
        zaguan::runtime::WorkerSettings::default().lease,
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let parts = inner.outbox_in_reply_to(&entry.wamid).await.unwrap();
        if parts
            .first()
            .is_some_and(|p| p.status == zaguan::store::OutboxStatus::Sent)
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never recorded as sent"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    workers.stop().await;
    heartbeat.leave().await;
    assert_eq!(store.unavailable_sent_records.load(Ordering::SeqCst), 0);
    let texts = graph.texts();
    assert_eq!(texts.len(), 1, "delivered once: {texts:?}");
}

/// A database too busy to take writes, more times in a row than a message may fail: the
/// attempts are the store's, not the message's, so it is answered once the store recovers
/// instead of being marked `failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_store_does_not_get_a_message_marked_failed() {
    let inner: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let store = Arc::new(CrashingStore {
        unavailable_for: AtomicUsize::new(12),
        ..CrashingStore::over(inner.clone())
    });
    let wa_id = WaId::parse("34600000702").unwrap();
    let entry = inbox_entry("wamid.BUSY1", &wa_id, "Hola", InboxStatus::Pending);
    inner
        .insert_inbox(std::slice::from_ref(&entry))
        .await
        .unwrap();
    let llm = Arc::new(SlowCountingLlm(AtomicUsize::new(0)));
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.store(),
        llm.clone(),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    let settings = zaguan::runtime::WorkerSettings {
        poll: Duration::from_millis(10),
        ..zaguan::runtime::WorkerSettings::default()
    };
    assert!(settings.max_attempts < 12);
    let workers = zaguan::runtime::Workers::spawn(
        Arc::new(engine),
        Arc::new(zaguan::outbound::Outbound::dry_run(store.store())),
        Arc::new(zaguan::runtime::Arrivals::new()),
        settings,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while inner
        .outbox_in_reply_to(&entry.wamid)
        .await
        .unwrap()
        .is_empty()
    {
        let status = inner
            .inbox_entry(&entry.wamid)
            .await
            .unwrap()
            .unwrap()
            .status;
        assert_ne!(
            status,
            InboxStatus::Failed,
            "marked failed for the store's overload"
        );
        assert!(std::time::Instant::now() < deadline, "not answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    workers.stop().await;
    assert_eq!(store.unavailable_for.load(Ordering::SeqCst), 0);
    let entry = inner.inbox_entry(&entry.wamid).await.unwrap().unwrap();
    assert_eq!(entry.status, InboxStatus::Done);
    // Every failed try was the store's: none counted against the message.
    assert_eq!(entry.attempts, 0);
}

/// Under a backlog on a slow store, conversations are answered in the order their first
/// messages arrived, give or take the number served at once — whatever order the workers heard
/// of them in (here newest first, as from webhooks delivered out of order).
///
/// The workers' choice is checked where it is made, at the claim: each conversation is taken
/// within twice the number served at once of its place. The answers are checked by rank: a
/// worker thread the loaded machine stalls mid-turn answers its one conversation late while
/// the others go on, which barely moves the rank correlation, where taking them newest first
/// or at random falls far below its bound.
async fn a_backlog_is_answered_oldest_first(inner: Arc<dyn Store>) {
    const CONVERSATIONS: usize = 200;
    const AT_ONCE: usize = 4;
    let start = Utc::now() - chrono::Duration::seconds(30);
    let entries: Vec<InboxEntry> = (0..CONVERSATIONS)
        .map(|i| {
            let wa_id = WaId::parse(&format!("3460020{i:04}")).unwrap();
            let mut entry = inbox_entry(
                &format!("wamid.BACKLOG{i:04}"),
                &wa_id,
                "hola",
                InboxStatus::Pending,
            );
            entry.received_at = start + chrono::Duration::milliseconds(i as i64 * 10);
            entry
        })
        .collect();
    inner.insert_inbox(&entries).await.unwrap();
    let mut slow = CrashingStore::over(inner.clone());
    slow.delay = Duration::from_millis(2);
    let claims = Arc::new(slow);
    let slow = claims.store();
    let arrivals = Arc::new(zaguan::runtime::Arrivals::new());
    arrivals.push(entries.iter().rev().cloned().collect());
    let workers = zaguan::runtime::Workers::spawn(
        Arc::new(rule_engine(slow.clone())),
        Arc::new(zaguan::outbound::Outbound::dry_run(slow)),
        arrivals,
        zaguan::runtime::WorkerSettings {
            concurrency: AT_ONCE,
            poll: Duration::from_secs(60),
            ..zaguan::runtime::WorkerSettings::default()
        },
    );
    // When each conversation's reply was queued.
    let mut answered_at = Vec::with_capacity(CONVERSATIONS);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    for entry in &entries {
        loop {
            let replies = inner.outbox_in_reply_to(&entry.wamid).await.unwrap();
            if let Some(reply) = replies.iter().map(|r| r.at).min() {
                answered_at.push(reply);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} not answered",
                entry.wamid
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    workers.stop().await;

    let arrived: std::collections::HashMap<WaId, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| (entry.wa_id.clone(), i))
        .collect();
    let claimed = claims.claimed.lock().unwrap().clone();
    assert_eq!(claimed.len(), CONVERSATIONS, "each claimed once");
    let by_claim: Vec<usize> = claimed.iter().map(|w| arrived[w]).collect();
    for (place, &i) in by_claim.iter().enumerate() {
        assert!(
            place <= i + 2 * AT_ONCE,
            "the conversation that arrived {i}th was taken {place}th: {:?}",
            &by_claim[..20]
        );
    }

    let mut by_answer: Vec<usize> = (0..CONVERSATIONS).collect();
    by_answer.sort_by_key(|&i| (answered_at[i], i));
    // Spearman's rank correlation of arrival and answer: 1 in order, 0 at random, -1 reversed.
    let n = CONVERSATIONS as f64;
    let squares: f64 = by_answer
        .iter()
        .enumerate()
        .map(|(place, &i)| (place as f64 - i as f64).powi(2))
        .sum();
    let rho = 1.0 - 6.0 * squares / (n * (n * n - 1.0));
    assert!(
        rho >= 0.995,
        "answered out of arrival order (rank correlation {rho:.4}): {:?}",
        &by_answer[..40]
    );
    assert!(
        by_answer[..2 * AT_ONCE].contains(&0),
        "the first to arrive was answered {}th",
        by_answer.iter().position(|&i| i == 0).unwrap()
    );
}

mod backlog {
    use super::*;

    crate::both_stores!(multi_thread |s| (s.store.clone()) => a_backlog_is_answered_oldest_first);
}

/// A turn's reply is sent by the caller and recorded once sent; if the process dies between
/// the two, the resumed turn reads the reply back from the history. It may have gone out, so
/// it is recorded `sending`, to wait for its status or its grace — not sent again at once — and
/// the turn answers its message.
#[tokio::test]
async fn a_reply_read_back_from_the_history_is_recorded_unconfirmed_not_sent() {
    let store = memory();
    let wa_id = WaId::parse("34600111444").unwrap();
    let entry = inbox_entry(
        "wamid.UNCONFIRMED",
        &wa_id,
        "¿Cuánto cuesta el P-102?",
        InboxStatus::Pending,
    );
    store
        .insert_inbox(std::slice::from_ref(&entry))
        .await
        .unwrap();
    let options = zaguan::engine::TurnOptions {
        send_now: true,
        unconfirmed_grace: Duration::from_secs(30),
        ..zaguan::engine::TurnOptions::default()
    };
    let first = rule_engine(store.clone())
        .serve_turn(&wa_id, std::slice::from_ref(&entry), options, || ())
        .await
        .unwrap();
    let parts = first.to_send.expect("a new reply, for the caller to send");
    assert_eq!(parts[0].body, "El P-102 cuesta 450.000 €.");
    assert!(
        store
            .outbox_in_reply_to(&entry.wamid)
            .await
            .unwrap()
            .is_empty(),
        "recorded only once sent"
    );
    // The process dies here, the reply sent or not: the message is still open.
    let resumed = rule_engine(store.clone())
        .serve_turn(&wa_id, std::slice::from_ref(&entry), options, || ())
        .await
        .unwrap();
    assert!(resumed.to_send.is_none(), "not sent again at once");
    assert_eq!(resumed.answered, vec![entry.wamid.clone()]);
    let recorded = store.outbox_in_reply_to(&entry.wamid).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].id, parts[0].id, "under the same id");
    assert_eq!(recorded[0].status, zaguan::store::OutboxStatus::Sending);
    let due = recorded[0].next_attempt_at.unwrap();
    assert!(due > Utc::now() + chrono::Duration::seconds(25), "{due}");
    // The history holds the turn once.
    let history = store.recent_messages(&wa_id, 100).await.unwrap();
    let humans = history
        .iter()
        .filter(|m| m.message.role == MessageRole::Human)
        .count();
    assert_eq!(humans, 1);
}
