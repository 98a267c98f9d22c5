//! `/metrics` after a scripted conversation, read back by parsing the Prometheus exposition
//! format; and the health check's gauges: backlog, oldest pending age, leases, stuck
//! conversations.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use zaguan::agents::AgentRegistry;
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings, ToolRegistry};
use zaguan::llm::ScriptedLlm;
use zaguan::runtime::monitor::Monitor;
use zaguan::store::{InboxEntry, InboxStatus, MemoryStore, Store};

/// `name{labels} value` lines of the exposition format, by metric name (samples summed).
fn parse(exposition: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    for line in exposition.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        let name = series.split('{').next().unwrap().to_owned();
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("a number in {line}"));
        *samples.entry(name).or_insert(0.0) += value;
    }
    samples
}

fn entry(wa_id: &WaId, n: usize, received_at: chrono::DateTime<Utc>) -> InboxEntry {
    InboxEntry {
        wamid: WaMessageId::parse(&format!("wamid.M{n}")).unwrap(),
        wa_id: wa_id.clone(),
        phone_number_id: "109876543210".into(),
        kind: "text".into(),
        text: Some("Quiero agendar una visita".into()),
        payload: "{}".into(),
        content: zaguan::domain::Content::Text {
            body: "Quiero agendar una visita".into(),
        },
        context_id: None,
        sent_at: None,
        status: InboxStatus::Pending,
        received_at,
        attempts: 0,
    }
}

#[tokio::test]
async fn metrics_and_health_gauges_after_a_scripted_conversation() {
    let metrics = zaguan::telemetry::metrics_handle();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let now = Utc::now();

    // A turn through the fast path into appointments.
    let customer = WaId::parse("34600000301").unwrap();
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let engine = Engine::new(
        store.clone(),
        Arc::new(ScriptedLlm::new().says("appointment_assistant", "¿Qué día te viene bien?")),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(ToolRegistry::new()),
        EngineSettings::default(),
    );
    let message = entry(&customer, 1, now);
    store
        .insert_inbox(std::slice::from_ref(&message))
        .await
        .unwrap();
    engine.run_turn(&customer, &[message]).await.unwrap();

    // One conversation stuck in appointments for 3 hours, one waiting message 10 minutes old,
    // one conversation claimed by a worker.
    let stuck = WaId::parse("34600000302").unwrap();
    store
        .set_dialog_state(
            &stuck,
            &zaguan::domain::DialogState::entered("appointment_assistant"),
            now - chrono::Duration::hours(3),
        )
        .await
        .unwrap();
    let waiting = WaId::parse("34600000303").unwrap();
    store
        .insert_inbox(&[entry(&waiting, 2, now - chrono::Duration::minutes(10))])
        .await
        .unwrap();
    assert!(
        store
            .claim_conversation(
                &waiting,
                "worker-a",
                now,
                now + chrono::Duration::minutes(5),
                &[]
            )
            .await
            .unwrap()
    );

    let monitor = Monitor::new(store.clone(), Duration::from_secs(2 * 3600));
    let health = monitor.check(now).await.unwrap();
    assert_eq!(health.stuck, 1, "{health:?}");
    assert_eq!(health.active_leases, 1);
    // The customer's message is still open (the test ran the turn without closing it).
    assert_eq!(health.inbox_open, 2);
    assert!(health.oldest_pending_seconds >= 600, "{health:?}");

    let samples = parse(&metrics.render());
    for family in [
        "zaguan_turns_total",
        "zaguan_route_total",
        "zaguan_fast_route_total",
        "zaguan_turn_transitions_count",
        "zaguan_turn_duration_seconds_count",
        "zaguan_inbox_backlog",
        "zaguan_inbox_oldest_pending_seconds",
        "zaguan_active_leases",
        "zaguan_stuck_conversations",
    ] {
        assert!(
            samples.contains_key(family),
            "{family} missing from /metrics"
        );
    }
    assert_eq!(samples["zaguan_stuck_conversations"], 1.0);
    assert_eq!(samples["zaguan_active_leases"], 1.0);
    assert!(samples["zaguan_fast_route_total"] >= 1.0);
}
