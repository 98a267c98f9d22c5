//! Abuse limits: a user flooding the bot gets one answer for the flood and one "slow down";
//! a conversation past its daily token budget gets a fixed reply without a model call and is
//! flagged for a person.

use crate::common;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::StatusCode;
use chrono::Utc;
use secrecy::SecretString;

use common::graph::FakeGraph;
use common::{TestApp, text_notification};
use zaguan::agents::AgentRegistry;
use zaguan::domain::MessageRole;
use zaguan::domain::{CallOutcome, LlmCall};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::abuse::{BUDGET_HANDOFF_REASON, BUDGET_REPLY, SLOW_DOWN};
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::{Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::runtime::{WorkerSettings, Workers};
use zaguan::store::{InboxStatus, MemoryStore, Store};

const CUSTOMER: &str = "34611222333";

/// Echoes the user's last message, counting its calls.
#[derive(Default)]
struct EchoLlm(AtomicUsize);

#[async_trait]
impl Llm for EchoLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let last_human = common::last_human(request);
        Ok(LlmResponse {
            content: format!("Recibido: {last_human}"),
            ..LlmResponse::default()
        })
    }
}

fn engine(store: Arc<dyn Store>, llm: Arc<EchoLlm>, settings: EngineSettings) -> Engine {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    Engine::new(
        store,
        llm,
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..settings
        },
    )
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two turns in a burst are answered at once; the third waits for the user's bucket, the
/// user is told once to slow down, and the messages sent while waiting are merged into that
/// turn: five messages, three model calls, three answers and one notice, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_user_is_told_once_and_answered_once_for_the_flood() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
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
    let llm = Arc::new(EchoLlm::default());
    let app = TestApp::with_store(store.clone());
    let workers = Workers::spawn(
        Arc::new(engine(
            store.clone(),
            llm.clone(),
            EngineSettings::default(),
        )),
        Arc::new(outbound),
        app.state.arrivals.clone(),
        WorkerSettings {
            poll: Duration::from_millis(20),
            user_turns: Some(
                governor::Quota::with_period(Duration::from_secs(4))
                    .unwrap()
                    .allow_burst(NonZeroU32::new(2).unwrap()),
            ),
            ..WorkerSettings::default()
        },
    );
    let texts = [
        "Hola, busco un piso en Valencia",
        "Con tres habitaciones, por favor",
        "¿Tenéis alguno con terraza?",
        "Que tenga garaje también",
        "Y cerca del metro",
    ];
    let say = async |i: usize| {
        let body = text_notification(&[(&format!("wamid.F{i}"), CUSTOMER, texts[i])]);
        assert_eq!(app.post_webhook(body).await, StatusCode::OK);
    };
    say(0).await;
    wait_for("first answer", async || graph.texts().len() == 1).await;
    say(1).await;
    wait_for("second answer", async || graph.texts().len() == 2).await;
    say(2).await;
    wait_for("the notice", async || graph.texts().len() == 3).await;
    // The third turn is waiting for the bucket: these join it.
    say(3).await;
    say(4).await;
    wait_for("the merged answer", async || graph.texts().len() == 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    workers.stop().await;

    let sent = graph.texts();
    assert_eq!(
        sent,
        [
            format!("Recibido: {}", texts[0]),
            format!("Recibido: {}", texts[1]),
            SLOW_DOWN.to_owned(),
            format!("Recibido: {}", texts[2..].join("\n")),
        ]
    );
    assert_eq!(llm.0.load(Ordering::SeqCst), 3, "one model call per turn");
    let ids: Vec<String> = (0..texts.len()).map(|i| format!("wamid.F{i}")).collect();
    let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
    let turns = common::assert_answered_once_in_order(store.as_ref(), CUSTOMER, &texts, &ids).await;
    assert_eq!(turns.len(), 3);
}

/// A backlog answered after the customer's window closed (the service was down for a day):
/// the «slow down» would not be delivered, so it is not sent, and the outbox says why.
#[tokio::test]
async fn a_notice_past_the_customers_window_is_kept_unsent_with_why() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(
        store.clone(),
        Arc::new(EchoLlm::default()),
        EngineSettings::default(),
    );
    let wa_id = WaId::parse(CUSTOMER).unwrap();
    let wrote = Utc::now() - chrono::Duration::hours(30);
    let mut via = common::inbox_entry("wamid.OLD1", &wa_id, "hola", InboxStatus::Pending);
    via.sent_at = Some(wrote);
    via.received_at = wrote;
    engine.notice(&wa_id, SLOW_DOWN, &via).await.unwrap();
    assert!(store.unsent_outbox(&wa_id).await.unwrap().is_empty());
    let kept = store
        .outbox_entry(&zaguan::domain::OutboxId::for_notice(&via.wamid, wrote, 0))
        .await
        .unwrap()
        .expect("the notice is on the outbox");
    assert_eq!(kept.status, zaguan::store::OutboxStatus::Skipped);
    let why = kept.error.unwrap().message.unwrap();
    assert!(why.contains("24-hour window"), "{why}");

    // Inside the window it is queued.
    let mut fresh = common::inbox_entry("wamid.NEW1", &wa_id, "hola", InboxStatus::Pending);
    fresh.sent_at = Some(Utc::now());
    engine.notice(&wa_id, SLOW_DOWN, &fresh).await.unwrap();
    let queued = store.unsent_outbox(&wa_id).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].body, SLOW_DOWN);
}

fn call(wa_id: &WaId, tokens: u64, at: chrono::DateTime<Utc>) -> LlmCall {
    LlmCall {
        conversation: Some(wa_id.as_str().to_owned()),
        agent: "primary_assistant".into(),
        provider: "openai".into(),
        model: "gpt-4.1-mini".into(),
        outcome: CallOutcome::Ok,
        input_tokens: tokens - tokens / 4,
        output_tokens: tokens / 4,
        latency: Duration::from_millis(800),
        error: None,
        at,
    }
}

/// Under the budget the model answers; once the day's calls reach it, turns get the fixed
/// reply without a model call and the conversation is flagged for a person, once. Calls of
/// yesterday and of other conversations do not count.
async fn a_conversation_past_its_daily_budget_gets_the_fixed_reply(store: Arc<dyn Store>) {
    let wa_id = WaId::parse(CUSTOMER).unwrap();
    let other = WaId::parse("34699000111").unwrap();
    // A minute before the agency's midnight (Madrid's, the default time zone): within the
    // last 24 hours, but yesterday.
    let midnight = zaguan::business::start_of_today(Utc::now(), chrono_tz::Europe::Madrid);
    let yesterday = midnight - chrono::Duration::minutes(1);
    store
        .insert_llm_calls(&[
            call(&wa_id, 50_000, yesterday),
            call(&other, 50_000, Utc::now()),
            call(&wa_id, 600, Utc::now()),
        ])
        .await
        .unwrap();
    assert_eq!(
        store
            .llm_tokens_since(wa_id.as_str(), midnight)
            .await
            .unwrap(),
        600,
        "since midnight: not yesterday's, not another conversation's"
    );
    let llm = Arc::new(EchoLlm::default());
    let engine = engine(
        store.clone(),
        llm.clone(),
        EngineSettings {
            daily_token_budget: 1_000,
            ..EngineSettings::default()
        },
    );
    let mut n = 0;
    let mut say = async |text: &str| {
        n += 1;
        let entry = common::inbox_entry(&format!("wamid.B{n}"), &wa_id, text, InboxStatus::Pending);
        store.insert_inbox(&[entry]).await.unwrap();
        let open = store.open_inbox(&wa_id).await.unwrap();
        let reply = engine.run_turn(&wa_id, &open).await.unwrap().reply;
        let ids: Vec<WaMessageId> = open.iter().map(|e| e.wamid.clone()).collect();
        store
            .set_inbox_status(&ids, InboxStatus::Done)
            .await
            .unwrap();
        reply.unwrap()
    };

    assert_eq!(say("Hola, busco piso").await, "Recibido: Hola, busco piso");
    assert_eq!(llm.0.load(Ordering::SeqCst), 1);
    // What the usage recorder writes for that call.
    store
        .insert_llm_calls(&[call(&wa_id, 500, Utc::now())])
        .await
        .unwrap();
    // No staff to tell in this engine: the customer is told so, not promised a person, and
    // given the business file's contact line.
    let contact = engine.prompts().business().contact_line();
    let budget_reply = format!(
        "{BUDGET_REPLY} {}",
        zaguan::domain::phrases::handoff_unreachable(None, contact.as_deref())
    );
    assert_eq!(say("¿Y con terraza?").await, budget_reply);
    assert_eq!(
        llm.0.load(Ordering::SeqCst),
        1,
        "no model call past the budget"
    );
    let flagged = store.conversation(&wa_id).await.unwrap().unwrap();
    let request = flagged.handoff_requested.expect("flagged for a person");
    assert_eq!(request.reason, BUDGET_HANDOFF_REASON);
    assert_eq!(say("¿Hola?").await, budget_reply);
    assert_eq!(llm.0.load(Ordering::SeqCst), 1);
    let again = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(
        again.handoff_requested.unwrap().at,
        request.at,
        "flagged once"
    );
    let history = store.recent_messages(&wa_id, 100).await.unwrap();
    let agents: Vec<Option<&str>> = history
        .iter()
        .filter(|m| m.message.role == MessageRole::Ai)
        .map(|m| m.message.agent.as_deref())
        .collect();
    assert_eq!(
        agents,
        [Some("primary_assistant"), Some("guard"), Some("guard")]
    );
}

#[tokio::test]
async fn memory_a_conversation_past_its_daily_budget_gets_the_fixed_reply() {
    a_conversation_past_its_daily_budget_gets_the_fixed_reply(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn mongo_a_conversation_past_its_daily_budget_gets_the_fixed_reply() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    a_conversation_past_its_daily_budget_gets_the_fixed_reply(Arc::new(db.store.clone())).await;
    db.drop().await;
}
