//! What lets instances share one MongoDB: the cleanup job (retention without TTL indexes), the
//! heartbeat that splits Meta's throughput between live instances, and the drain on SIGTERM
//! (the turn in flight finishes, the lease is released at once, nothing else is started).

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use zaguan::domain::MessageRole;
use zaguan::domain::{CallOutcome, LlmCall};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::{Llm, LlmError, LlmRequest, LlmResponse};
use zaguan::outbound::{Limiters, Outbound, SendLimits};
use zaguan::runtime::instances::Membership;
use zaguan::runtime::retention::Cleanup;
use zaguan::runtime::retention::Retention;
use zaguan::runtime::{WorkerSettings, Workers};
use zaguan::store::{
    InboxEntry, InboxStatus, InboxStore, NewMessage, NewOutbox, OutboxStore, OutboxUpdate, Store,
};

fn days(n: i64) -> chrono::Duration {
    chrono::Duration::days(n)
}

fn inbox(
    wa_id: &WaId,
    id: &str,
    status: InboxStatus,
    received_at: chrono::DateTime<Utc>,
) -> InboxEntry {
    InboxEntry {
        received_at,
        ..common::inbox_entry(id, wa_id, "Hola", status)
    }
}

fn message(wa_id: &WaId, content: &str, at: chrono::DateTime<Utc>) -> NewMessage {
    NewMessage {
        wa_id: wa_id.clone(),
        role: MessageRole::Human,
        content: content.to_owned(),
        agent: None,
        tool_calls: Vec::new(),
        tool_call_id: None,
        wamids: Vec::new(),
        attachments: Vec::new(),
        at,
    }
}

fn llm_call(at: chrono::DateTime<Utc>) -> LlmCall {
    LlmCall {
        conversation: Some("34600000501".into()),
        agent: "primary_assistant".into(),
        provider: "openai".into(),
        model: "gpt-test".into(),
        outcome: CallOutcome::Ok,
        input_tokens: 10,
        output_tokens: 5,
        latency: Duration::from_millis(300),
        error: None,
        at,
    }
}

async fn old_records_go_and_open_work_stays(store: Arc<dyn Store>, with_outbox: bool) {
    let now = Utc::now();
    let wa_id = WaId::parse("34600000501").unwrap();
    store
        .insert_inbox(&[
            inbox(&wa_id, "wamid.OLD1", InboxStatus::Done, now - days(40)),
            inbox(&wa_id, "wamid.OLD2", InboxStatus::Failed, now - days(40)),
            // Never answered: kept whatever its age, it is still work.
            inbox(&wa_id, "wamid.OLD3", InboxStatus::Pending, now - days(40)),
            inbox(&wa_id, "wamid.NEW1", InboxStatus::Done, now - days(1)),
        ])
        .await
        .unwrap();
    store
        .append_message(message(&wa_id, "hace dos años", now - days(800)))
        .await
        .unwrap();
    store
        .append_message(message(&wa_id, "ayer", now - days(1)))
        .await
        .unwrap();
    // Business events: an old delivered one goes, an old pending one and a recent one stay.
    let event = |reason: &str, age: i64| {
        zaguan::store::Event::new(
            &wa_id,
            zaguan::store::BusinessEvent::HandoffRequested {
                reason: reason.into(),
            },
            now - days(age),
        )
    };
    let (delivered_old, pending_old, delivered_new) = (
        event("old", 100),
        event("old, pending", 101),
        event("new", 1),
    );
    store
        .insert_events(&[
            delivered_old.clone(),
            pending_old.clone(),
            delivered_new.clone(),
        ])
        .await
        .unwrap();
    for id in [&delivered_old.id, &delivered_new.id] {
        store
            .settle_event(id, &zaguan::store::EventUpdate::Delivered { at: now })
            .await
            .unwrap();
    }
    store
        .insert_llm_calls(&[llm_call(now - days(100)), llm_call(now - days(1))])
        .await
        .unwrap();
    let ids = store
        .insert_outbox(&[
            NewOutbox::text(wa_id.clone(), None, "vieja", now - days(40)),
            NewOutbox::text(wa_id.clone(), None, "vieja sin enviar", now - days(40)),
            NewOutbox::text(wa_id.clone(), None, "nueva", now - days(1)),
        ])
        .await
        .unwrap();
    for id in [&ids[0], &ids[2]] {
        store
            .update_outbox(id, &OutboxUpdate::Sent { wamid: None })
            .await
            .unwrap();
    }
    for (i, age) in [40, 1].into_iter().enumerate() {
        store
            .record_rejected(&zaguan::store::RejectedEntry {
                what: "message".into(),
                reason: "unknown".into(),
                raw: format!("{{\"id\":{i}}}"),
                at: now - days(age),
            })
            .await
            .unwrap();
    }
    let cleanup = Cleanup::new(
        store.clone(),
        Retention {
            inbox: Some(Duration::from_secs(30 * 86_400)),
            outbox: Some(Duration::from_secs(30 * 86_400)),
            messages: Some(Duration::from_secs(365 * 86_400)),
            llm_calls: Some(Duration::from_secs(90 * 86_400)),
            events: Some(Duration::from_secs(90 * 86_400)),
        },
    );
    let counts = cleanup.run_once(now).await.unwrap();
    assert_eq!(
        (
            counts.inbox,
            counts.messages,
            counts.llm_calls,
            counts.webhook_rejects
        ),
        (2, 1, 1, 1),
        "{counts:?}"
    );
    assert_eq!(counts.events, 1, "{counts:?}");
    let kept: Vec<String> = store
        .list_events(&zaguan::store::EventQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(kept, [delivered_new.id.clone(), pending_old.id.clone()]);
    let rejects = store.rejected(10).await.unwrap();
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0].raw, "{\"id\":1}", "the recent reject stays");
    if with_outbox {
        assert_eq!(counts.outbox, 1, "{counts:?}");
        let unsent = store.unsent_outbox(&wa_id).await.unwrap();
        assert_eq!(unsent.len(), 1, "an unsent part is kept however old");
    }
    for (id, kept) in [
        ("wamid.OLD1", false),
        ("wamid.OLD2", false),
        ("wamid.OLD3", true),
        ("wamid.NEW1", true),
    ] {
        let found = store
            .inbox_entry(&WaMessageId::parse(id).unwrap())
            .await
            .unwrap();
        assert_eq!(found.is_some(), kept, "{id}");
    }
    let history = store.recent_messages(&wa_id, 10).await.unwrap();
    let said: Vec<&str> = history.iter().map(|m| m.message.content.as_str()).collect();
    assert_eq!(said, ["ayer"]);
    // A new message after a purge still gets a place at the end of the history.
    store
        .append_message(message(&wa_id, "hoy", now))
        .await
        .unwrap();
    let history = store.recent_messages(&wa_id, 10).await.unwrap();
    let said: Vec<&str> = history.iter().map(|m| m.message.content.as_str()).collect();
    assert_eq!(said, ["ayer", "hoy"]);
    // A second pass has nothing left to do.
    assert_eq!(
        cleanup.run_once(now).await.unwrap(),
        zaguan::store::PurgeCounts::default()
    );
}

#[tokio::test]
async fn memory_old_records_go_and_open_work_stays() {
    // The in-memory outbox is kept (it goes with the process).
    old_records_go_and_open_work_stays(Arc::new(zaguan::store::MemoryStore::new()), false).await;
}

#[tokio::test]
async fn mongo_old_records_go_and_open_work_stays() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    old_records_go_and_open_work_stays(Arc::new(db.store.clone()), true).await;
    db.drop().await;
}

async fn live_instances_split_the_throughput(store: Arc<dyn Store>) {
    let limiters: Vec<Arc<Limiters>> = (0..3)
        .map(|_| Arc::new(Limiters::new(&SendLimits::default())))
        .collect();
    let mut members = Vec::new();
    for (i, limiter) in limiters.iter().enumerate() {
        members.push(
            Membership::establish(
                store.clone(),
                format!("instance-{i}"),
                Duration::from_secs(10),
                Some(limiter.clone()),
                Arc::default(),
            )
            .await
            .unwrap(),
        );
    }
    // Each beat counts the instances alive; once all three beat, each sees three.
    for member in &members {
        assert!(member.beat().await);
    }
    assert_eq!(members[0].live().len(), 3);
    assert_eq!(limiters[0].share(), 26);
    assert_eq!(limiters[2].share(), 26);
    // One drains and says so: the others take its share at their next beat.
    let leaving = members.pop().unwrap().spawn();
    tokio::time::sleep(Duration::from_millis(50)).await;
    leaving.leave().await;
    assert!(members[0].beat().await);
    assert_eq!(members[0].live().len(), 2);
    assert_eq!(limiters[0].share(), 40);
}

#[tokio::test]
async fn memory_live_instances_split_the_throughput() {
    live_instances_split_the_throughput(Arc::new(zaguan::store::MemoryStore::new())).await;
}

#[tokio::test]
async fn mongo_live_instances_split_the_throughput() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    live_instances_split_the_throughput(Arc::new(db.store.clone())).await;
    db.drop().await;
}

/// Answers after `delay`.
struct SlowLlm(Duration);

#[async_trait]
impl Llm for SlowLlm {
    async fn complete(&self, _request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        tokio::time::sleep(self.0).await;
        Ok(LlmResponse {
            content: "Hecho.".to_owned(),
            ..LlmResponse::default()
        })
    }
}

fn instance(store: Arc<dyn Store>, llm_delay: Duration, app: &common::TestApp) -> Workers {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.clone(),
        Arc::new(SlowLlm(llm_delay)),
        Arc::new(
            zaguan::agents::AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap(),
        ),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    Workers::spawn(
        Arc::new(engine),
        Arc::new(Outbound::dry_run(store)),
        app.state.arrivals.clone(),
        WorkerSettings {
            owner: "draining".into(),
            poll: Duration::from_millis(20),
            lease: Duration::from_secs(30),
            ..WorkerSettings::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_finishes_the_turn_in_flight_releases_the_lease_and_starts_nothing_new() {
    let store: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let app = common::TestApp::with_store(store.clone());
    let workers = instance(store.clone(), Duration::from_millis(400), &app);
    let customer = "34600000601";
    let body = common::text_notification(&[("wamid.D1", customer, "Hola")]);
    assert_eq!(app.post_webhook(body).await, axum::http::StatusCode::OK);
    // The turn is inside the LLM call when the drain starts; a second message arrives.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let body = common::text_notification(&[("wamid.D2", customer, "¿Sigues ahí?")]);
    assert_eq!(app.post_webhook(body).await, axum::http::StatusCode::OK);
    assert!(
        workers.drain(Duration::from_secs(10)).await,
        "drained in time"
    );

    let first = store
        .inbox_entry(&WaMessageId::parse("wamid.D1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.status,
        InboxStatus::Done,
        "the turn in flight finished"
    );
    let second = store
        .inbox_entry(&WaMessageId::parse("wamid.D2").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        second.status,
        InboxStatus::Pending,
        "nothing new started while draining: left for another instance"
    );
    assert_eq!(
        store.active_leases(Utc::now(), &[]).await.unwrap(),
        0,
        "lease released"
    );
    // Another instance takes the conversation at once, without waiting for a lease to expire.
    let next = instance(store.clone(), Duration::ZERO, &app);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !store
        .conversations_with_open_inbox(1)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "not taken over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    next.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_gives_up_at_its_deadline() {
    let store: Arc<dyn Store> = Arc::new(zaguan::store::MemoryStore::new());
    let app = common::TestApp::with_store(store.clone());
    let workers = instance(store.clone(), Duration::from_secs(3600), &app);
    let body = common::text_notification(&[("wamid.S1", "34600000602", "Hola")]);
    assert_eq!(app.post_webhook(body).await, axum::http::StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = std::time::Instant::now();
    assert!(!workers.drain(Duration::from_millis(300)).await);
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Delegates a message asking for a visit to the appointment assistant (once per message),
/// which answers; the primary answers anything else itself.
struct RoutingLlm;

#[async_trait]
impl Llm for RoutingLlm {
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let last_human = common::last_human(request);
        let delegated = request.messages.iter().rev().any(|m| {
            matches!(m, zaguan::llm::ChatMessage::Ai { tool_calls, .. } if !tool_calls.is_empty())
        });
        let content = match request.agent.as_str() {
            "primary_assistant" if last_human.contains("visita") && !delegated => {
                return Ok(LlmResponse {
                    tool_calls: vec![zaguan::domain::ToolCall {
                        id: "call_visit".to_owned(),
                        name: "ToAppointmentAssistant".to_owned(),
                        args: serde_json::json!({"query": last_human}).into(),
                    }],
                    ..LlmResponse::default()
                });
            }
            "primary_assistant" => "¿En qué puedo ayudarte?",
            _ => "¿Qué día te viene bien?",
        };
        Ok(LlmResponse {
            content: content.to_owned(),
            ..LlmResponse::default()
        })
    }
}

/// What a turn costs MongoDB, counted on the wire, webhook to reply sent: a customer's next
/// message in a conversation this instance serves (the contact is fresh, so not written
/// again), a plain answer (≤ 6 round trips) and a delegation (≤ 9); and, for the record, the
/// first message of a conversation (its claim). The bounds catch a change that adds round
/// trips; the figures are the cost model of docs/scaling.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_store_round_trips_of_a_turn() {
    use mongodb::event::EventHandler;
    use mongodb::event::command::CommandEvent;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let commands: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let seen = commands.clone();
    let store = zaguan::store::MongoStore::connect_with(
        &zaguan::store::pool::MongoConfig {
            uri: secrecy::SecretString::from(std::env::var("MONGODB_URI").unwrap()),
            database: db.store.database().name().to_owned(),
        },
        move |options| {
            let seen = seen.clone();
            options.command_event_handler = Some(EventHandler::callback(move |event| {
                if let CommandEvent::Started(started) = event {
                    let collection = started
                        .command
                        .get_str(&started.command_name)
                        .unwrap_or_default()
                        .to_owned();
                    seen.lock()
                        .unwrap()
                        .push((started.command_name.clone(), collection));
                }
            }));
        },
    )
    .await
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let app = common::TestApp::with_store(store.clone());
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.clone(),
        Arc::new(RoutingLlm),
        Arc::new(
            zaguan::agents::AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap(),
        ),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    let workers = Workers::spawn(
        Arc::new(engine),
        Arc::new(Outbound::dry_run(store.clone())),
        app.state.arrivals.clone(),
        WorkerSettings {
            // Woken by the webhook only: the count is one turn's, not the idle polls'.
            poll: Duration::from_secs(3600),
            ..WorkerSettings::default()
        },
    );
    let customer = "34600000801";
    // Watched through another connection, so only the service's commands are counted.
    let watcher = db.store.clone();
    let turn = async |wamid: &str, text: &str| -> (usize, usize, BTreeMap<String, usize>) {
        commands.lock().unwrap().clear();
        let body = common::text_notification(&[(wamid, customer, text)]);
        assert_eq!(app.post_webhook(body).await, axum::http::StatusCode::OK);
        let wamid = WaMessageId::parse(wamid).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let answered = watcher
                .inbox_entry(&wamid)
                .await
                .unwrap()
                .is_some_and(|e| e.status == InboxStatus::Done);
            let replies = watcher.outbox_in_reply_to(&wamid).await.unwrap();
            if answered
                && replies
                    .iter()
                    .any(|r| r.status == zaguan::store::OutboxStatus::Sent)
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not answered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = commands.lock().unwrap().clone();
        let mut by_command: BTreeMap<&str, usize> = BTreeMap::new();
        let mut by_collection: BTreeMap<String, usize> = BTreeMap::new();
        for (command, collection) in &sent {
            *by_command.entry(command.as_str()).or_default() += 1;
            *by_collection
                .entry(format!("{command} {collection}"))
                .or_default() += 1;
        }
        let writes: usize = ["insert", "update", "delete", "findAndModify"]
            .iter()
            .map(|c| by_command.get(c).copied().unwrap_or(0))
            .sum();
        let reads: usize = ["find", "aggregate", "count", "getMore"]
            .iter()
            .map(|c| by_command.get(c).copied().unwrap_or(0))
            .sum();
        assert_eq!(
            writes + reads,
            sent.len(),
            "every command counted: {sent:?}"
        );
        (writes, reads, by_collection)
    };
    let (writes, reads, first) = turn("wamid.COST1", "Hola").await;
    eprintln!("first message of a conversation: {writes} writes, {reads} reads: {first:?}");
    let (writes, reads, plain) = turn("wamid.COST2", "¿Tenéis pisos en Chamberí?").await;
    eprintln!("plain turn: {writes} writes, {reads} reads: {plain:?}");
    assert!(writes + reads <= 6, "{plain:?}");
    assert!(writes >= 4, "the turn's writes were counted: {plain:?}");
    let (writes, reads, delegation) = turn("wamid.COST3", "Quiero agendar una visita").await;
    eprintln!("delegation: {writes} writes, {reads} reads: {delegation:?}");
    assert!(writes + reads <= 9, "{delegation:?}");
    assert_eq!(
        delegation.get("update conversations"),
        Some(&1),
        "the dialog_state was written: {delegation:?}"
    );
    workers.stop().await;
    db.drop().await;
}

/// The workers serve fewer conversations at once while the database answers slowly — slower
/// progress, not failed calls — and more again once it is fast: nothing is lost or marked
/// failed either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_the_workers_concurrency_follows_the_database() {
    use common::proxy::Mode;

    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let (proxy, store) = db.behind_proxy().await;
    let store: Arc<dyn Store> = store;
    let app = common::TestApp::with_store(store.clone());
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.clone(),
        Arc::new(SlowLlm(Duration::ZERO)),
        Arc::new(
            zaguan::agents::AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap(),
        ),
        Arc::new(ToolRegistry::new()),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    );
    let workers = Workers::spawn(
        Arc::new(engine),
        Arc::new(Outbound::dry_run(store.clone())),
        app.state.arrivals.clone(),
        WorkerSettings {
            owner: "adaptive".into(),
            concurrency: 256,
            poll: Duration::from_millis(200),
            ..WorkerSettings::default()
        },
    );
    let started = workers.concurrency();
    let batch = |round: usize| {
        let messages: Vec<(String, String, String)> = (0..120)
            .map(|c| {
                (
                    format!("wamid.ADAPT{round}.{c}"),
                    format!("34612{c:06}"),
                    format!("Hola, mensaje {round}"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str, &str)> = messages
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        common::text_notification(&refs)
    };
    let all_answered = async |round: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let mut answered = 0;
            for c in 0..120 {
                let wamid = WaMessageId::parse(&format!("wamid.ADAPT{round}.{c}")).unwrap();
                if db
                    .store
                    .inbox_entry(&wamid)
                    .await
                    .unwrap()
                    .is_some_and(|e| e.status == InboxStatus::Done)
                {
                    answered += 1;
                }
            }
            if answered == 120 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: {answered} of 120 answered"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };

    // With the database fast and more to do than the limit allows, it grows past `from`.
    let grows_past = async |from: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while workers.concurrency() <= from {
            assert!(
                std::time::Instant::now() < deadline,
                "the limit stayed at {from} with the database fast"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // A database starts at the fewest conversations at once; fast, the limit grows.
    assert_eq!(started, 2);
    assert_eq!(app.post_webhook(batch(0)).await, axum::http::StatusCode::OK);
    grows_past(started).await;
    all_answered(0).await;
    let grown = workers.concurrency();

    // Every answer of the database takes 400 ms: the limit comes down, to a few at once. (Where
    // it was, the database may already have been queueing: then, fast again, it would rightly
    // hold there rather than grow.)
    proxy.set(Mode::Slow(Duration::from_millis(400)));
    assert_eq!(app.post_webhook(batch(1)).await, axum::http::StatusCode::OK);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while workers.concurrency() > (2 * started).min(grown - 1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the limit stayed at {}",
            workers.concurrency()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let eased = workers.concurrency();
    proxy.set(Mode::Pass);
    all_answered(1).await;
    // Fast again: it grows back.
    assert_eq!(app.post_webhook(batch(2)).await, axum::http::StatusCode::OK);
    grows_past(eased).await;
    all_answered(2).await;
    let failed = db
        .store
        .database()
        .collection::<bson::Document>("inbox")
        .count_documents(bson::doc! {"status": "failed"})
        .await
        .unwrap();
    assert_eq!(
        failed, 0,
        "nothing marked failed for the database's slowness"
    );
    workers.stop().await;
    db.drop().await;
}
