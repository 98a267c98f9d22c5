//! The loop back from agents and owners, on the in-memory store and on FerretDB: a booked
//! visit reaches its agent; once over, the agent is asked and presses «Realizada»; the customer
//! is asked and presses «Me interesa»; an offer reaches the owner, who counters by message, and
//! the customer accepts with a button; a no-show is offered another time once. Every press is
//! answered without a model, and every notice is sent once however often the job looks.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use zaguan::domain::{Content, ManualClock, WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::follow_up::{
    FollowUpPresses, FollowUpSettings, FollowUps, Outcome, record_outcome,
};
use zaguan::realestate::{
    Appointment, AppointmentStatus, FollowUp, MemoryRealEstate, MongoRealEstate, Notice, Offer,
    OfferAnswer, OfferStatus, RealEstateStore, Settled, VisitOutcome,
};
use zaguan::store::{
    ContactSeen, EventQuery, InboxEntry, InboxStatus, MemoryStore, OutboxEntry, Store,
};

const TZ: chrono_tz::Tz = chrono_tz::Europe::Madrid;

fn settings(agenda_at: Option<chrono::NaiveTime>) -> FollowUpSettings {
    FollowUpSettings {
        timezone: TZ,
        phone_number_id: "109876543210".into(),
        every: Duration::from_secs(2),
        outcome_delay: Duration::from_secs(30 * 60),
        agenda_at,
        offers_to_owners: true,
        public_url: Some("https://zaguan.example/".parse().unwrap()),
    }
}

struct World {
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
    engine: Arc<Engine>,
    clock: Arc<ManualClock>,
    job: FollowUps,
    agent: WaId,
    owner: WaId,
    customer: WaId,
    property: String,
    inbound: std::sync::atomic::AtomicU32,
    /// Every button queued for anyone so far: who got it, its id and title.
    buttons: std::sync::Mutex<Vec<(WaId, String, String)>>,
}

impl World {
    async fn new(store: Arc<dyn Store>, realestate: Arc<dyn RealEstateStore>) -> World {
        let set = common::seeded_demo(realestate.as_ref()).await;
        // A listing whose owner is on WhatsApp, shown by its own agent.
        let mut property = set
            .properties
            .iter()
            .find(|p| {
                set.owners
                    .iter()
                    .any(|o| o.id == p.owner_id && o.wa_id.is_some())
            })
            .expect("a demo listing with an owner on WhatsApp")
            .clone();
        let mut agent = set.staff[0].clone();
        property.agent_id = Some(agent.id.clone());
        realestate
            .upsert_properties(std::slice::from_ref(&property))
            .await
            .unwrap();
        let agent_wa = WaId::parse("34600111222").unwrap();
        agent.wa_id = Some(agent_wa.clone());
        realestate.upsert_staff(&[agent]).await.unwrap();
        let owner = set
            .owners
            .iter()
            .find(|o| o.id == property.owner_id)
            .unwrap()
            .clone();
        let customer = WaId::parse("34611222333").unwrap();
        let owner_wa = owner.wa_id.clone().unwrap();
        // Everyone wrote a little while ago: inside their 24-hour windows, texts go.
        for (wa_id, name) in [
            (&agent_wa, "Marta"),
            (&owner_wa, owner.name.as_str()),
            (&customer, "Lucía"),
        ] {
            store
                .record_contact(&ContactSeen {
                    wa_id: wa_id.clone(),
                    phone: Some(wa_id.as_str().to_owned()),
                    user_id: None,
                    name: Some(name.to_owned()),
                    username: None,
                    seen_at: Utc::now() - chrono::Duration::minutes(10),
                })
                .await
                .unwrap();
        }
        // Whole seconds: MongoDB keeps milliseconds.
        let clock = Arc::new(ManualClock::new(Utc::now().trunc_subsecs(0)));
        let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        let llm = Arc::new(ScriptedLlm::new());
        let engine = Arc::new(
            Engine::new(
                store.clone(),
                llm,
                Arc::new(
                    zaguan::agents::AgentRegistry::load(&prompts, &zaguan::startup::known_tools())
                        .unwrap(),
                ),
                Arc::new(zaguan::realestate::tools::registry(realestate.clone())),
                EngineSettings {
                    fast_route: false,
                    clock: clock.clone(),
                    ..EngineSettings::default()
                },
            )
            .with_presses(Arc::new(FollowUpPresses::new(
                realestate.clone(),
                store.clone(),
            ))),
        );
        let job = FollowUps::new(realestate.clone(), engine.clone(), settings(None));
        World {
            store,
            realestate,
            engine,
            clock,
            job,
            agent: agent_wa,
            owner: owner_wa,
            customer,
            property: property.id,
            inbound: Default::default(),
            buttons: Default::default(),
        }
    }

    fn now(&self) -> DateTime<Utc> {
        self.engine.now()
    }

    async fn tick(&self) -> usize {
        self.job.tick(self.now()).await.unwrap()
    }

    /// What is queued for `wa_id` and not sent yet, oldest first.
    async fn outbox(&self, wa_id: &WaId) -> Vec<OutboxEntry> {
        let queued = self.store.unsent_outbox(wa_id).await.unwrap();
        let mut seen = self.buttons.lock().unwrap();
        for button in queued.iter().flat_map(|m| &m.buttons) {
            let key = (wa_id.clone(), button.id.clone(), button.title.clone());
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
        queued
    }

    async fn turn(&self, wa_id: &WaId, content: Content, text: &str) -> String {
        let n = self
            .inbound
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut entry: InboxEntry = common::inbox_entry(
            &format!("wamid.follow.{n}"),
            wa_id,
            text,
            InboxStatus::Pending,
        );
        entry.content = content;
        entry.kind = match entry.content {
            Content::Text { .. } => "text".into(),
            _ => "interactive".into(),
        };
        self.store.insert_inbox(&[entry]).await.unwrap();
        let open = self.store.open_inbox(wa_id).await.unwrap();
        let outcome = self.engine.run_turn(wa_id, &open).await.unwrap();
        self.store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await
            .unwrap();
        outcome.reply.unwrap_or_default()
    }

    /// Presses the button `id` of a message queued for `wa_id` (now or earlier).
    async fn press(&self, wa_id: &WaId, id: &str) -> String {
        let queued = self.outbox(wa_id).await;
        let title = self
            .buttons
            .lock()
            .unwrap()
            .iter()
            .find(|(to, button, _)| to == wa_id && button == id)
            .map(|(_, _, title)| title.clone())
            .unwrap_or_else(|| panic!("no button {id} for {wa_id}: {queued:#?}"));
        // The press came in: what was queued is taken as sent.
        for entry in &queued {
            let wamid = WaMessageId::parse(&format!("wamid.sent.{}", entry.id.0)).unwrap();
            self.store
                .mark_outbox_sent(&entry.id, &wamid)
                .await
                .unwrap();
        }
        self.turn(
            wa_id,
            Content::ButtonReply {
                id: id.to_owned(),
                title: title.clone(),
            },
            &title,
        )
        .await
    }

    async fn say(&self, wa_id: &WaId, text: &str) -> String {
        self.turn(wa_id, Content::Text { body: text.into() }, text)
            .await
    }

    async fn event_kinds(&self) -> Vec<String> {
        let events = self
            .store
            .list_events(&EventQuery {
                limit: 100,
                ..EventQuery::default()
            })
            .await
            .unwrap();
        events.iter().map(|e| e.event.kind().to_owned()).collect()
    }

    /// A visit booked by the customer as `book_appointment` saves it, starting in an hour.
    async fn book(&self, id: &str) -> Appointment {
        let starts_at = self.now() + chrono::Duration::hours(1);
        let appointment = Appointment {
            id: id.into(),
            property_id: self.property.clone(),
            slot_id: format!("S-{id}"),
            wa_id: self.customer.clone(),
            starts_at,
            status: AppointmentStatus::Booked,
            created_at: self.now(),
            reminder_sent_at: None,
            moved_from: None,
            follow_up: FollowUp {
                agent: None,
                minutes: Some(45),
                notice: Some(Notice::Booked.key(starts_at)),
                ..FollowUp::default()
            },
        };
        self.realestate
            .save_appointment(&appointment)
            .await
            .unwrap();
        appointment
    }
}

async fn the_loop_comes_back(store: Arc<dyn Store>, realestate: Arc<dyn RealEstateStore>) {
    let world = World::new(store, realestate).await;
    let booked = world.book("A-F1").await;

    // The agent hears of the booking at once, and only once.
    assert_eq!(world.tick().await, 1);
    assert_eq!(world.tick().await, 0);
    let notice = world.outbox(&world.agent).await;
    assert_eq!(notice.len(), 1, "{notice:#?}");
    let body = &notice[0].body;
    assert!(body.starts_with("Nueva visita"), "{body}");
    assert!(body.contains(&world.property), "{body}");
    assert!(body.contains("+34611222333"), "{body}");
    assert!(body.contains("Lucía"), "{body}");
    assert!(
        body.contains("https://zaguan.example/console/conversations/34611222333"),
        "{body}"
    );

    // Not asked before the end of the visit plus the delay: 1 h + 45 min + 30 min.
    world.clock.advance(chrono::Duration::minutes(60 + 45 + 29));
    assert_eq!(world.tick().await, 0);
    world.clock.advance(chrono::Duration::minutes(2));
    assert_eq!(world.tick().await, 1);
    assert_eq!(world.tick().await, 0, "asked once");

    // The agent presses «Realizada»: no model, the visit is recorded.
    let reply = world.press(&world.agent, "visit:A-F1:done").await;
    assert!(reply.starts_with("Anotado"), "{reply}");
    let done = world.realestate.appointment("A-F1").await.unwrap().unwrap();
    assert_eq!(done.status, AppointmentStatus::Done);
    assert!(done.follow_up.outcome_by.unwrap().starts_with("agent:"));
    let visits = world.realestate.visits_to(&world.property).await.unwrap();
    let visit = visits.iter().find(|v| v.id == "V-F1").expect("the visit");
    assert_eq!(visit.visited_at, booked.starts_at);
    // Pressed again (or from the console after it): already recorded, nothing changes.
    let again = world.press(&world.agent, "visit:A-F1:no_show").await;
    assert!(again.contains("ya estaba anotada"), "{again}");
    let by_console = record_outcome(
        world.realestate.as_ref(),
        world.store.as_ref(),
        "A-F1",
        Outcome::NoShow,
        "operator:ana",
        world.now(),
    )
    .await
    .unwrap();
    assert!(matches!(by_console, Some(Settled::Already(a)) if a.status == AppointmentStatus::Done));

    // The customer is asked how it went, with three buttons, and presses «Me interesa».
    assert_eq!(world.tick().await, 1);
    assert_eq!(world.tick().await, 0);
    let asked = world.outbox(&world.customer).await;
    let titles: Vec<&str> = asked
        .iter()
        .flat_map(|m| &m.buttons)
        .map(|b| b.title.as_str())
        .collect();
    assert_eq!(titles, ["Me interesa", "No me convence", "Verlo otra vez"]);
    let thanks = world
        .press(&world.customer, "visit_feedback:V-F1:interested")
        .await;
    assert!(thanks.contains("te interesa"), "{thanks}");
    let visits = world.realestate.visits_to(&world.property).await.unwrap();
    let visit = visits.iter().find(|v| v.id == "V-F1").unwrap();
    assert_eq!(visit.outcome, Some(VisitOutcome::Interested));
    // Their first words after it are the visit's feedback (and still answered as usual).
    world
        .say(&world.customer, "La cocina es pequeña, pero qué luz")
        .await;
    let visits = world.realestate.visits_to(&world.property).await.unwrap();
    let visit = visits.iter().find(|v| v.id == "V-F1").unwrap();
    assert_eq!(
        visit.feedback.as_deref(),
        Some("La cocina es pequeña, pero qué luz")
    );

    // An offer: the owner is told, with accept, reject and counter.
    let offer = Offer {
        id: "F-F1".into(),
        property_id: world.property.clone(),
        wa_id: world.customer.clone(),
        amount: 230_000,
        currency: "EUR".into(),
        conditions: None,
        status: OfferStatus::Submitted,
        created_at: world.now(),
        answer: OfferAnswer {
            notice: Some("received".into()),
            ..OfferAnswer::default()
        },
    };
    world.realestate.upsert_offers(&[offer]).await.unwrap();
    assert_eq!(world.tick().await, 1);
    assert_eq!(world.tick().await, 0);
    let told = world.outbox(&world.owner).await;
    assert!(told.iter().any(|m| m.body.contains("230.000")), "{told:#?}");
    let ask = world.press(&world.owner, "offer:F-F1:counter").await;
    assert!(ask.contains("importe"), "{ask}");
    // Words without an amount: asked again, nothing recorded.
    let unclear = world.say(&world.owner, "déjame pensarlo").await;
    assert!(unclear.contains("No veo el importe"), "{unclear}");
    let countered = world.say(&world.owner, "250.000 €").await;
    assert!(countered.contains("250.000"), "{countered}");
    let offer = world.realestate.offer("F-F1").await.unwrap().unwrap();
    assert_eq!(offer.status, OfferStatus::Countered);
    assert_eq!(offer.answer.counter_amount, Some(250_000));
    assert_eq!(offer.answer.awaiting_counter_from, None);

    // The customer hears the counter-offer and accepts it with the button.
    assert_eq!(world.tick().await, 1);
    let heard = world.outbox(&world.customer).await;
    assert!(
        heard
            .iter()
            .any(|m| m.body.contains("contraoferta de 250.000")),
        "{heard:#?}"
    );
    let accepted = world.press(&world.customer, "counter:F-F1:accept").await;
    assert!(accepted.contains("Aceptas la contraoferta"), "{accepted}");
    let offer = world.realestate.offer("F-F1").await.unwrap().unwrap();
    assert_eq!(offer.status, OfferStatus::Accepted);
    assert_eq!(offer.answer.answered_by.as_deref(), Some("customer"));
    // The agent is told; the customer, who said it, is not told again.
    let before = world.outbox(&world.customer).await.len();
    assert_eq!(world.tick().await, 1);
    assert_eq!(world.outbox(&world.customer).await.len(), before);
    let agent_told = world.outbox(&world.agent).await;
    assert!(
        agent_told
            .iter()
            .any(|m| m.body.starts_with("Oferta aceptada") && m.body.contains("250.000")),
        "{agent_told:#?}"
    );

    // A no-show: the customer is offered another time, once.
    world.book("A-F2").await;
    assert_eq!(world.tick().await, 1);
    world.clock.advance(chrono::Duration::hours(3));
    assert_eq!(world.tick().await, 1);
    let noted = world.press(&world.agent, "visit:A-F2:no_show").await;
    assert!(noted.contains("no vino"), "{noted}");
    let before = world.outbox(&world.customer).await.len();
    assert_eq!(world.tick().await, 1);
    assert_eq!(world.tick().await, 0);
    let offered = world.outbox(&world.customer).await;
    assert_eq!(offered.len(), before + 1);
    assert!(
        offered.last().unwrap().body.contains("otro día"),
        "{offered:#?}"
    );

    // The records' events, each once.
    let kinds = world.event_kinds().await;
    for kind in [
        "visit.done",
        "visit.no_show",
        "visit_feedback.recorded",
        "offer.countered",
        "offer.accepted",
    ] {
        assert_eq!(
            kinds.iter().filter(|k| *k == kind).count(),
            1,
            "{kind} in {kinds:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_the_loop_comes_back() {
    the_loop_comes_back(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_the_loop_comes_back() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    the_loop_comes_back(Arc::new(db.store.clone()), realestate).await;
    db.drop().await;
}

/// `/admin/appointments` and `/admin/offers`: the lists, an outcome and an answer recorded by
/// an operator, a second attempt refused with what was recorded (409), bad words (400) and
/// unknown records (404).
async fn operators_record_outcomes_and_answers(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    use axum::http::StatusCode;
    let world = World::new(store.clone(), realestate.clone()).await;
    let appointment = world.book("A-API1").await;
    world
        .realestate
        .upsert_offers(&[Offer {
            id: "F-API1".into(),
            property_id: world.property.clone(),
            wa_id: world.customer.clone(),
            amount: 200_000,
            currency: "EUR".into(),
            conditions: None,
            status: OfferStatus::Submitted,
            created_at: Utc::now(),
            answer: OfferAnswer::default(),
        }])
        .await
        .unwrap();
    let app = common::TestApp::with_store(store)
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_realestate(realestate.clone()));
    let auth = common::bearer();

    let (status, listed) = app
        .admin(
            "GET",
            "/admin/appointments?view=upcoming",
            Some(&auth),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let today = app
        .admin("GET", "/admin/appointments?view=today", Some(&auth), None)
        .await
        .1;
    let all: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .chain(today.as_array().unwrap())
        .collect();
    assert!(
        all.iter().any(|a| a["id"] == "A-API1"),
        "booked in an hour: today or upcoming: {all:?}"
    );
    let (status, _) = app
        .admin("GET", "/admin/appointments?view=someday", Some(&auth), None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, _) = app
        .admin(
            "POST",
            "/admin/appointments/A-API1/outcome",
            Some(&auth),
            Some(r#"{"outcome": "maybe"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = app
        .admin(
            "POST",
            "/admin/appointments/A-NONE/outcome",
            Some(&auth),
            Some(r#"{"outcome": "done"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, recorded) = app
        .admin(
            "POST",
            "/admin/appointments/A-API1/outcome",
            Some(&auth),
            Some(r#"{"outcome": "no-show"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{recorded}");
    assert_eq!(recorded["status"], "no_show");
    assert!(
        recorded["outcome_by"]
            .as_str()
            .unwrap()
            .starts_with("operator:")
    );
    let (status, refused) = app
        .admin(
            "POST",
            "/admin/appointments/A-API1/outcome",
            Some(&auth),
            Some(r#"{"outcome": "done"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused.to_string().contains("no_show"), "{refused}");
    let stored = realestate
        .appointment(&appointment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, AppointmentStatus::NoShow);

    let (status, open) = app
        .admin("GET", "/admin/offers?view=open", Some(&auth), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(open.as_array().unwrap().iter().any(|o| o["id"] == "F-API1"));
    let (status, _) = app
        .admin(
            "POST",
            "/admin/offers/F-API1/answer",
            Some(&auth),
            Some(r#"{"answer": "counter"}"#),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a counter needs its amount"
    );
    let (status, countered) = app
        .admin(
            "POST",
            "/admin/offers/F-API1/answer",
            Some(&auth),
            Some(r#"{"answer": "counter", "amount": "215.000"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{countered}");
    assert_eq!(countered["status"], "countered");
    assert_eq!(countered["counter_amount"], 215_000);
    let (status, _) = app
        .admin(
            "POST",
            "/admin/offers/F-API1/answer",
            Some(&auth),
            Some(r#"{"answer": "reject"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let answered = app
        .admin("GET", "/admin/offers?view=answered", Some(&auth), None)
        .await
        .1;
    assert!(answered.as_array().unwrap().iter().any(
        |o| o["id"] == "F-API1" && o["answered_by"].as_str().unwrap().starts_with("operator:")
    ));
    let offer = realestate.offer("F-API1").await.unwrap().unwrap();
    assert_eq!(offer.status, OfferStatus::Countered);
    assert_eq!(offer.answer.counter_amount, Some(215_000));
    // The customer hears of the counter-offer from the follow-up loop.
    assert!(world.tick().await >= 1);
    assert!(
        world
            .outbox(&world.customer)
            .await
            .iter()
            .any(|m| m.body.contains("215.000"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_operators_record_outcomes_and_answers() {
    operators_record_outcomes_and_answers(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_operators_record_outcomes_and_answers() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    operators_record_outcomes_and_answers(Arc::new(db.store.clone()), realestate).await;
    db.drop().await;
}

/// `/console/visits` and `/console/offers`: an operator sees the visit waiting for its outcome
/// and records it; a second outcome is shown what was recorded; a viewer reads the list with
/// the number masked, has no buttons, and is refused the action.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_and_records() {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use zaguan::admin::team::OperatorRole;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let realestate: Arc<dyn RealEstateStore> = Arc::new(MemoryRealEstate::new());
    let world = World::new(store.clone(), realestate.clone()).await;
    let mut waiting = world.book("A-CON1").await;
    waiting.starts_at = Utc::now() - chrono::Duration::hours(2);
    realestate.save_appointment(&waiting).await.unwrap();
    let app = common::TestApp::with_store(store)
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_realestate(realestate.clone()));
    let request = |method: &str, uri: &str, cookie: &str, form: Option<String>| {
        let builder = Request::builder()
            .method(method)
            .uri(uri)
            .header("cookie", cookie);
        match form {
            Some(form) => builder
                .header("content-type", "application/x-www-form-urlencoded")
                .body(Body::from(form))
                .unwrap(),
            None => builder.body(Body::empty()).unwrap(),
        }
    };
    let csrf_of = |html: &str| {
        let at = html.find("name=\"csrf\" value=\"").expect("a form") + 19;
        html[at..].split('"').next().unwrap().to_owned()
    };

    let (ana, _) = app.operator("ana", OperatorRole::Operator).await;
    let cookie = common::console_sign_in(&app, "ana", &ana.password)
        .await
        .unwrap();
    let (status, page) = app
        .request(request(
            "GET",
            "/console/visits?view=waiting",
            &cookie,
            None,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("data-id=\"A-CON1\""), "{page}");
    assert!(page.contains("34611222333"), "an operator sees the number");
    assert!(page.contains("/console/visits/A-CON1/outcome"));
    // Filtered by another listing: not there.
    let (_, other) = app
        .request(request(
            "GET",
            "/console/visits?view=waiting&property=P-0000",
            &cookie,
            None,
        ))
        .await;
    assert!(!other.contains("data-id=\"A-CON1\""));
    let csrf = csrf_of(&page);
    let (status, done) = app
        .request(request(
            "POST",
            "/console/visits/A-CON1/outcome",
            &cookie,
            Some(format!("csrf={csrf}&outcome=done&view=waiting")),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert!(done.contains("A-CON1: done"), "{done}");
    assert!(!done.contains("data-id=\"A-CON1\""), "no longer waiting");
    let (_, again) = app
        .request(request(
            "POST",
            "/console/visits/A-CON1/outcome",
            &cookie,
            Some(format!("csrf={csrf}&outcome=no-show")),
        ))
        .await;
    assert!(
        again.contains("is done already (by operator:ana)"),
        "{again}"
    );
    let stored = realestate.appointment("A-CON1").await.unwrap().unwrap();
    assert_eq!(stored.status, AppointmentStatus::Done);
    let (status, offers) = app
        .request(request(
            "GET",
            "/console/offers?view=answered",
            &cookie,
            None,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{offers}");

    let (vera, _) = app.operator("vera", OperatorRole::Viewer).await;
    let viewer = common::console_sign_in(&app, "vera", &vera.password)
        .await
        .unwrap();
    let mut upcoming = world.book("A-CON2").await;
    upcoming.starts_at = Utc::now() - chrono::Duration::hours(1);
    realestate.save_appointment(&upcoming).await.unwrap();
    let (status, page) = app
        .request(request("GET", "/console/visits", &viewer, None))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("data-id=\"A-CON2\""), "{page}");
    assert!(
        !page.contains("34611222333"),
        "a viewer's numbers are masked"
    );
    assert!(
        !page.contains("/console/visits/A-CON2/outcome"),
        "no buttons"
    );
    let (status, _) = app
        .request(request(
            "POST",
            "/console/visits/A-CON2/outcome",
            &viewer,
            Some(format!("csrf={}&outcome=done", csrf_of(&page))),
        ))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let still = realestate.appointment("A-CON2").await.unwrap().unwrap();
    assert_eq!(still.status, AppointmentStatus::Booked);
}

/// From the agenda time, each agent with visits that day gets one list of them; not before,
/// and not twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_get_the_days_agenda_once() {
    use chrono::TimeZone;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let realestate: Arc<dyn RealEstateStore> = Arc::new(MemoryRealEstate::new());
    let world = World::new(store, realestate.clone()).await;
    let today = world.now().with_timezone(&TZ).date_naive();
    let at = |h: u32, m: u32| {
        TZ.from_local_datetime(&today.and_hms_opt(h, m, 0).unwrap())
            .unwrap()
            .to_utc()
    };
    let mut visit = world.book("A-AG1").await;
    visit.starts_at = at(11, 0);
    visit.follow_up.notice = None;
    realestate.save_appointment(&visit).await.unwrap();
    let agenda = FollowUps::new(
        realestate.clone(),
        world.engine.clone(),
        settings(chrono::NaiveTime::from_hms_opt(8, 30, 0)),
    );
    assert_eq!(agenda.tick(at(8, 29)).await.unwrap(), 0, "not before 08:30");
    assert_eq!(agenda.tick(at(8, 31)).await.unwrap(), 1);
    assert_eq!(agenda.tick(at(9, 0)).await.unwrap(), 0, "once a day");
    // Another instance (or a restart) the same morning: still once.
    let other = FollowUps::new(
        realestate.clone(),
        world.engine.clone(),
        settings(chrono::NaiveTime::from_hms_opt(8, 30, 0)),
    );
    assert_eq!(other.tick(at(9, 5)).await.unwrap(), 0);
    let sent = world.outbox(&world.agent).await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert!(sent[0].body.starts_with("Buenos días"), "{}", sent[0].body);
    assert!(sent[0].body.contains("11:00"), "{}", sent[0].body);
    assert!(sent[0].body.contains(&world.property), "{}", sent[0].body);
}

/// A visit of days ago still `booked` (from before the follow-ups, or a long outage) is not
/// asked about: it waits in the console's list of visits waiting for an outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_visits_are_not_asked_about() {
    use zaguan::realestate::follow_up::lists::{AppointmentView, appointments};
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let realestate: Arc<dyn RealEstateStore> = Arc::new(MemoryRealEstate::new());
    let world = World::new(store, realestate.clone()).await;
    let mut old = world.book("A-OLD").await;
    old.starts_at = world.now() - chrono::Duration::days(10);
    old.follow_up.notice = None;
    realestate.save_appointment(&old).await.unwrap();
    assert_eq!(world.tick().await, 0);
    assert!(world.outbox(&world.agent).await.is_empty());
    let stored = realestate.appointment("A-OLD").await.unwrap().unwrap();
    assert!(
        stored.follow_up.outcome_asked_at.is_some(),
        "settled as not to ask"
    );
    let waiting = appointments(
        realestate.as_ref(),
        AppointmentView::Waiting,
        world.now(),
        TZ,
    )
    .await
    .unwrap();
    assert!(waiting.iter().any(|a| a.id == "A-OLD"));
}

/// A move and a cancellation are told to the agent as such, each once; a second move is a
/// new notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_and_cancellations_reach_the_agent() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let realestate: Arc<dyn RealEstateStore> = Arc::new(MemoryRealEstate::new());
    let world = World::new(store, realestate.clone()).await;
    let mut visit = world.book("A-MV1").await;
    assert_eq!(world.tick().await, 1, "booked");
    for (kind, hours) in [(Notice::Moved, 2), (Notice::Moved, 3)] {
        visit.starts_at = world.now() + chrono::Duration::hours(hours);
        visit.follow_up.notice = Some(kind.key(visit.starts_at));
        realestate.save_appointment(&visit).await.unwrap();
        assert_eq!(world.tick().await, 1, "each move its notice");
        assert_eq!(world.tick().await, 0);
    }
    visit.status = AppointmentStatus::Cancelled;
    visit.follow_up.notice = Some(Notice::Cancelled.key(visit.starts_at));
    realestate.save_appointment(&visit).await.unwrap();
    assert_eq!(world.tick().await, 1);
    let told: Vec<String> = world
        .outbox(&world.agent)
        .await
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert_eq!(told.len(), 4, "{told:#?}");
    assert!(told[0].starts_with("Nueva visita"), "{told:#?}");
    assert!(told[1].starts_with("Visita cambiada"), "{told:#?}");
    assert!(told[2].starts_with("Visita cambiada"), "{told:#?}");
    assert!(told[3].starts_with("Visita cancelada"), "{told:#?}");
    // A cancelled visit is never asked about.
    world.clock.advance(chrono::Duration::hours(6));
    assert_eq!(world.tick().await, 0);
}
