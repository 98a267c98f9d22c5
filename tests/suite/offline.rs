//! Offline mode: no model at all, and the agency still finds flats, shows them and books a
//! visit, through the real tools and stores (in memory and on MongoDB), with the usual
//! confirmation, the events for the CRM, and the limited mode said once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chrono::Utc;
use serde_json::{Value, json};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::Engine;
use zaguan::llm::OfflineLlm;
use zaguan::realestate::offline::OfflineAgency;
use zaguan::realestate::{AppointmentStatus, Operation, RealEstateStore};
use zaguan::store::{EventQuery, InboxEntry, InboxStatus, ListRow, Media, OutboxEntry, Store};

use crate::common::{Backend, Stores, seeded_demo};

/// The words offline mode says once, with its first reply (Spanish).
const LIMITED: &str = "modo limitado";

/// A customer writing to an engine with no model.
pub struct Visitor {
    pub engine: Engine,
    pub store: Arc<dyn Store>,
    pub wa_id: WaId,
    n: AtomicU32,
    /// The replies so far, each as the texts of its parts.
    pub replies: std::sync::Mutex<Vec<Vec<String>>>,
}

/// An engine over the shipped prompts and every tool, with the offline engine and no model.
pub fn offline_engine(store: &Arc<dyn Store>, realestate: &Arc<dyn RealEstateStore>) -> Engine {
    engine_with(
        store,
        realestate,
        Arc::new(OfflineLlm),
        zaguan::engine::EngineSettings::default(),
    )
}

/// The same with `llm` and `settings`.
fn engine_with(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    llm: Arc<dyn zaguan::llm::Llm>,
    settings: zaguan::engine::EngineSettings,
) -> Engine {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry =
        zaguan::agents::AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    let desk = Arc::new(zaguan::engine::handoff::HandoffDesk::new(
        store.clone(),
        Some(Arc::new(zaguan::realestate::roles::DataRoles(
            realestate.clone(),
        ))),
        zaguan::engine::handoff::HandoffSettings::default(),
    ));
    let tools = zaguan::realestate::tools::registry(realestate.clone())
        .with(zaguan::engine::handoff::RequestHuman::new(desk.clone()));
    Engine::new(
        store.clone(),
        llm,
        Arc::new(registry),
        Arc::new(tools),
        settings,
    )
    .with_handoffs(desk)
    .with_offline(Arc::new(OfflineAgency::new(realestate.clone())))
}

impl Visitor {
    pub fn new(engine: Engine, store: Arc<dyn Store>, wa_id: &str) -> Self {
        Self {
            engine,
            store,
            wa_id: WaId::parse(wa_id).unwrap(),
            n: AtomicU32::new(0),
            replies: std::sync::Mutex::new(Vec::new()),
        }
    }

    async fn send(&self, kind: &str, text: &str, payload: Value) -> Vec<String> {
        let n = self.n.fetch_add(1, Ordering::Relaxed);
        let entry = InboxEntry {
            wamid: WaMessageId::parse(&format!("wamid.off{}.{n}", self.wa_id)).unwrap(),
            wa_id: self.wa_id.clone(),
            phone_number_id: "109876543210".into(),
            kind: kind.into(),
            text: Some(text.to_owned()),
            payload: payload.to_string(),
            content: zaguan::webhook::payload::message_content(&payload),
            context_id: None,
            sent_at: None,
            status: InboxStatus::Pending,
            received_at: Utc::now(),
            attempts: 0,
        };
        self.store
            .insert_inbox(std::slice::from_ref(&entry))
            .await
            .unwrap();
        let open = self.store.open_inbox(&self.wa_id).await.unwrap();
        let outcome = self.engine.run_turn(&self.wa_id, &open).await.unwrap();
        self.store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await
            .unwrap();
        self.replies.lock().unwrap().push(outcome.parts.clone());
        outcome.parts
    }

    pub async fn say(&self, text: &str) -> Vec<String> {
        self.send(
            "text",
            text,
            json!({"type": "text", "text": {"body": text}}),
        )
        .await
    }

    /// The parts queued for this customer, oldest first.
    pub async fn outbox(&self) -> Vec<OutboxEntry> {
        self.store.unsent_outbox(&self.wa_id).await.unwrap()
    }

    /// The rows of the last list sent.
    pub async fn last_list(&self) -> Vec<ListRow> {
        self.outbox()
            .await
            .into_iter()
            .rev()
            .find_map(|e| match e.media {
                Some(Media::List { rows, .. }) => Some(rows),
                _ => None,
            })
            .expect("a list was sent")
    }

    /// Taps `row` of a list.
    pub async fn tap(&self, row: &ListRow) -> Vec<String> {
        self.send(
            "interactive",
            &row.title,
            json!({"type": "interactive", "interactive": {"type": "list_reply",
                   "list_reply": {"id": row.id, "title": row.title, "description": row.description}}}),
        )
        .await
    }

    /// Presses the button titled `title` of the last message with buttons.
    pub async fn press(&self, title: &str) -> Vec<String> {
        let outbox = self.outbox().await;
        let buttons = &outbox
            .iter()
            .rev()
            .find(|e| !e.buttons.is_empty())
            .expect("a message with buttons")
            .buttons;
        let button = buttons
            .iter()
            .find(|b| b.title == title)
            .unwrap_or_else(|| panic!("no button {title} in {buttons:?}"));
        self.send(
            "interactive",
            title,
            json!({"type": "interactive", "interactive": {"type": "button_reply",
                   "button_reply": {"id": button.id, "title": title}}}),
        )
        .await
    }

    /// How many images were queued.
    /// The photos queued: images, and the cards of carousels.
    pub async fn images(&self) -> usize {
        self.outbox()
            .await
            .iter()
            .map(|e| match &e.media {
                Some(Media::Image { .. }) => 1,
                Some(Media::Carousel { cards, .. }) => cards.len(),
                _ => 0,
            })
            .sum()
    }
}

/// The whole journey the issue names, on `backend`.
async fn search_details_slots_and_a_booked_visit(backend: Backend) {
    let Some(stores) = Stores::open(backend).await else {
        return;
    };
    seeded_demo(stores.realestate.as_ref()).await;
    let engine = offline_engine(&stores.store, &stores.realestate);
    let visitor = Visitor::new(engine, stores.store.clone(), "34611999001");

    let reply = visitor
        .say("Hola, busco un piso de 2 habitaciones en Valencia para alquilar")
        .await
        .join("\n");
    assert!(reply.contains(LIMITED), "{reply}");
    let rows = visitor.last_list().await;
    assert!(!rows.is_empty(), "{reply}");
    for row in &rows {
        let id = row.id.rsplit(':').next().unwrap();
        let listing = stores.realestate.property(id).await.unwrap().unwrap();
        assert_eq!(listing.city, "Valencia", "{row:?}");
        assert_eq!(listing.operation, Operation::Rent, "{row:?}");
        assert!(listing.bedrooms >= 2, "{row:?}");
        assert_eq!(listing.kind, zaguan::realestate::PropertyType::Flat);
        assert!(row.title.contains("€/mes"), "each with its price: {row:?}");
    }

    // Picking one: its details and photos.
    let picked = rows[0].clone();
    let id = picked.id.rsplit(':').next().unwrap().to_owned();
    let listing = stores.realestate.property(&id).await.unwrap().unwrap();
    let reply = visitor.tap(&picked).await.join("\n");
    assert!(reply.contains(&listing.address), "{reply}");
    assert!(!reply.contains("send_property_photos"), "{reply}");
    assert_eq!(
        visitor.images().await,
        listing.photos.len().min(3),
        "its photos are sent"
    );

    // «quiero visitarlo» → slots.
    let reply = visitor.press("Quiero visitarlo").await.join("\n");
    assert!(reply.contains(&id), "{reply}");
    let slots = visitor.last_list().await;
    assert!(
        slots
            .iter()
            .all(|r| r.id.starts_with("ask:appointment_assistant:S-")),
        "{slots:?}"
    );

    // Picking one and confirming: the appointment is in `appointments`, its event written.
    visitor.tap(&slots[0]).await;
    let reply = visitor.press("Confirmar").await.join("\n");
    let slot_id = slots[0].id.rsplit(':').next().unwrap();
    let booked = stores
        .realestate
        .appointments_of(&visitor.wa_id)
        .await
        .unwrap();
    assert_eq!(booked.len(), 1, "{reply}");
    assert_eq!(booked[0].slot_id, slot_id);
    assert_eq!(booked[0].property_id, id);
    assert_eq!(booked[0].status, AppointmentStatus::Booked);
    assert!(reply.contains(&booked[0].id), "{reply}");
    let events = visitor
        .store
        .list_events(&EventQuery {
            wa_id: Some(visitor.wa_id.clone()),
            kind: Some("appointment.booked".into()),
            limit: 10,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");

    // Said once: the limited mode, in the first reply only.
    let replies = visitor.replies.lock().unwrap().clone();
    let told = replies
        .iter()
        .filter(|parts| parts.join("\n").contains(LIMITED))
        .count();
    assert_eq!(told, 1, "{replies:#?}");
    stores.close().await;
}

#[tokio::test]
async fn without_a_model_a_customer_finds_a_flat_and_books_a_visit() {
    search_details_slots_and_a_booked_visit(Backend::Memory).await;
}

#[tokio::test]
async fn without_a_model_a_customer_finds_a_flat_and_books_a_visit_on_mongodb() {
    search_details_slots_and_a_booked_visit(Backend::Mongo).await;
}

/// A model that answers every call with the same words, and counts them.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl zaguan::llm::Llm for Counting {
    async fn complete(
        &self,
        _request: &zaguan::llm::LlmRequest,
    ) -> Result<zaguan::llm::LlmResponse, zaguan::llm::LlmError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(zaguan::llm::LlmResponse {
            content: "Recibido.".into(),
            ..Default::default()
        })
    }
}

/// A conversation past its daily token budget is served from the data without a model (and
/// flagged for a person), not refused.
#[tokio::test]
async fn past_its_budget_a_conversation_is_served_offline() {
    let stores = Stores::open(Backend::Memory).await.unwrap();
    seeded_demo(stores.realestate.as_ref()).await;
    let llm = Arc::new(Counting::default());
    let engine = engine_with(
        &stores.store,
        &stores.realestate,
        llm.clone(),
        zaguan::engine::EngineSettings {
            daily_token_budget: 1_000,
            ..zaguan::engine::EngineSettings::default()
        },
    );
    let visitor = Visitor::new(engine, stores.store.clone(), "34611999002");
    assert_eq!(visitor.say("Hola").await.join(""), "Recibido.");
    let calls = llm.0.load(Ordering::SeqCst);
    stores
        .store
        .insert_llm_calls(&[zaguan::domain::LlmCall {
            conversation: Some(visitor.wa_id.as_str().to_owned()),
            agent: "primary_assistant".into(),
            provider: "openai".into(),
            model: "gpt-4.1-mini".into(),
            outcome: zaguan::domain::CallOutcome::Ok,
            input_tokens: 900,
            output_tokens: 300,
            latency: std::time::Duration::from_millis(800),
            error: None,
            at: Utc::now(),
        }])
        .await
        .unwrap();
    let reply = visitor
        .say("busco piso de 2 habitaciones en Valencia para alquilar")
        .await
        .join("\n");
    assert!(reply.contains("He encontrado"), "{reply}");
    assert!(!visitor.last_list().await.is_empty());
    assert_eq!(
        llm.0.load(Ordering::SeqCst),
        calls,
        "no model call past the budget"
    );
    let flagged = visitor
        .store
        .conversation(&visitor.wa_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        flagged.handoff_requested.map(|r| r.reason).as_deref(),
        Some(zaguan::engine::abuse::BUDGET_HANDOFF_REASON)
    );
}

/// The budget is the agency's day: tokens spent at 23:50 in Madrid belong to the day before,
/// and those after midnight there (still 23:10 UTC) to today.
#[tokio::test]
async fn the_daily_budget_follows_the_agencys_midnight() {
    use chrono::TimeZone as _;
    let stores = Stores::open(Backend::Memory).await.unwrap();
    seeded_demo(stores.realestate.as_ref()).await;
    let llm = Arc::new(Counting::default());
    // 2 December 2026, 23:30 UTC: 00:30 on the 3rd in Madrid.
    let now = Utc.with_ymd_and_hms(2026, 12, 2, 23, 30, 0).unwrap();
    let clock = Arc::new(zaguan::domain::ManualClock::new(now));
    let engine = engine_with(
        &stores.store,
        &stores.realestate,
        llm.clone(),
        zaguan::engine::EngineSettings {
            daily_token_budget: 1_000,
            timezone: chrono_tz::Europe::Madrid,
            clock: clock.clone(),
            ..zaguan::engine::EngineSettings::default()
        },
    );
    let visitor = Visitor::new(engine, stores.store.clone(), "34611999003");
    let spent = |at| zaguan::domain::LlmCall {
        conversation: Some(visitor.wa_id.as_str().to_owned()),
        agent: "primary_assistant".into(),
        provider: "openai".into(),
        model: "gpt-4.1-mini".into(),
        outcome: zaguan::domain::CallOutcome::Ok,
        input_tokens: 900,
        output_tokens: 300,
        latency: std::time::Duration::from_millis(800),
        error: None,
        at,
    };
    // Yesterday in Madrid (22:50 UTC, 23:50 there): not today's.
    stores
        .store
        .insert_llm_calls(&[spent(Utc.with_ymd_and_hms(2026, 12, 2, 22, 50, 0).unwrap())])
        .await
        .unwrap();
    let calls = llm.0.load(Ordering::SeqCst);
    assert_eq!(visitor.say("Hola").await.join(""), "Recibido.");
    assert_eq!(llm.0.load(Ordering::SeqCst), calls + 1, "a model answers");
    // After midnight in Madrid (23:10 UTC): today's, and over the budget.
    stores
        .store
        .insert_llm_calls(&[spent(Utc.with_ymd_and_hms(2026, 12, 2, 23, 10, 0).unwrap())])
        .await
        .unwrap();
    let calls = llm.0.load(Ordering::SeqCst);
    visitor.say("Hola otra vez").await;
    assert_eq!(
        llm.0.load(Ordering::SeqCst),
        calls,
        "no model past today's budget"
    );
}
