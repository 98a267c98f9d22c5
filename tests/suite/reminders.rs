//! Visit reminders: the day before, from the configured time; a text inside the 24-hour window,
//! the approved template outside it; once per visit, however many instances look at once.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use zaguan::agents::AgentRegistry;
use zaguan::domain::MessageRole;
use zaguan::domain::WaId;
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::reminders::REMINDER_AGENT;
use zaguan::realestate::reminders::{ReminderSettings, Reminders};
use zaguan::realestate::{
    Appointment, AppointmentStatus, MemoryRealEstate, MongoRealEstate, RealEstateStore, demo,
};
use zaguan::store::{ContactSeen, MemoryStore, Store};

const TZ: chrono_tz::Tz = chrono_tz::Europe::Madrid;

fn settings() -> ReminderSettings {
    ReminderSettings {
        min_notice: zaguan::realestate::reminders::DEFAULT_MIN_NOTICE,
        at: NaiveTime::from_hms_opt(19, 0, 0).unwrap(),
        timezone: TZ,
        phone_number_id: "109876543210".into(),
        every: Duration::from_secs(60),
    }
}

/// The engine reminders are said through, its translator scripted to answer `translations`.
fn engine(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    translations: &[&str],
) -> (Arc<Engine>, Arc<ScriptedLlm>) {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let llm = translations
        .iter()
        .fold(ScriptedLlm::new(), |llm, text| {
            llm.says("guard_translator", text)
        })
        .says("primary_assistant", "Claro, ¿qué día te viene mejor?");
    let llm = Arc::new(llm);
    let engine = Arc::new(Engine::new(
        store.clone(),
        llm.clone(),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(zaguan::realestate::tools::registry(realestate.clone())),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    ));
    (engine, llm)
}

fn local(day: chrono::NaiveDate, h: u32, m: u32) -> DateTime<Utc> {
    TZ.from_local_datetime(&day.and_hms_opt(h, m, 0).unwrap())
        .unwrap()
        .to_utc()
}

async fn reminders_go_out_once_as_text_or_template(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let today = Utc::now().with_timezone(&TZ).date_naive();
    let set = demo::demo_set(today, TZ);
    demo::seed(realestate.as_ref(), &set).await.unwrap();
    let property = &set.properties[0];
    let tomorrow = today + chrono::Days::new(1);
    let recent = WaId::parse("34611000801").unwrap();
    let silent = WaId::parse("34611000802").unwrap();
    let english = WaId::parse("34611000803").unwrap();
    let book = |id: &str, wa_id: &WaId, starts_at: DateTime<Utc>| Appointment {
        id: id.into(),
        property_id: property.id.clone(),
        slot_id: format!("S-{id}"),
        wa_id: wa_id.clone(),
        starts_at,
        status: AppointmentStatus::Booked,
        // Booked days ago: the evening before is long enough after the booking.
        created_at: local(today, 9, 0) - chrono::Duration::days(2),
        reminder_sent_at: None,
        moved_from: None,
        follow_up: Default::default(),
    };
    for appointment in [
        book("A-R1", &recent, local(tomorrow, 10, 0)),
        book("A-R2", &silent, local(tomorrow, 17, 0)),
        book("A-R4", &english, local(tomorrow, 12, 0)),
        // The day after tomorrow: not yet.
        book(
            "A-R3",
            &silent,
            local(tomorrow + chrono::Days::new(1), 10, 0),
        ),
    ] {
        realestate.save_appointment(&appointment).await.unwrap();
    }
    let evening = local(today, 19, 30);
    // One customer wrote two hours ago (inside the window), the other two days ago.
    for (wa_id, hours) in [(&recent, 2), (&silent, 48), (&english, 3)] {
        store
            .record_contact(&ContactSeen {
                wa_id: wa_id.clone(),
                phone: Some(wa_id.as_str().to_owned()),
                user_id: None,
                name: None,
                username: None,
                seen_at: evening - chrono::Duration::hours(hours),
            })
            .await
            .unwrap();
    }

    store.set_conversation_lang(&english, "en").await.unwrap();
    let in_english =
        "Reminder: tomorrow you have a visit to the flat. Write to us here to change it.";
    let (engine, llm) = engine(&store, &realestate, &[in_english]);
    let reminders = Reminders::new(realestate.clone(), engine.clone(), settings());
    assert_eq!(
        reminders.tick(local(today, 18, 59)).await.unwrap(),
        0,
        "not before 19:00"
    );
    // Two instances look at the same moment: each visit is reminded once.
    let other = Reminders::new(realestate.clone(), engine.clone(), settings());
    let (a, b) = tokio::join!(reminders.tick(evening), other.tick(evening));
    assert_eq!(a.unwrap() + b.unwrap(), 3);
    assert_eq!(
        reminders
            .tick(evening + chrono::Duration::minutes(1))
            .await
            .unwrap(),
        0
    );

    let text = store.unsent_outbox(&recent).await.unwrap();
    assert_eq!(text.len(), 1);
    assert!(text[0].template.is_none(), "inside the window: plain text");
    assert!(
        text[0]
            .body
            .starts_with("Recordatorio de Zaguan Inmobiliaria: mañana"),
        "{}",
        text[0].body
    );
    assert!(text[0].body.contains(&property.title));
    // The contact lines come from the business file.
    assert!(
        text[0]
            .body
            .ends_with("Si prefieres llamar: Tel. 910 000 000 · hola@zaguan.example."),
        "{}",
        text[0].body
    );
    assert_eq!(text[0].phone_number_id.as_deref(), Some("109876543210"));
    let template = store.unsent_outbox(&silent).await.unwrap();
    assert_eq!(template.len(), 1, "only tomorrow's visit");
    let sent = template[0]
        .template
        .as_ref()
        .expect("outside the window: a template");
    assert_eq!(sent.name, "visit_reminder");
    // The date in the template's language (Spanish here), with its weekday.
    const WEEKDAYS: [&str; 7] = [
        "lunes",
        "martes",
        "miércoles",
        "jueves",
        "viernes",
        "sábado",
        "domingo",
    ];
    use chrono::Datelike as _;
    assert_eq!(
        sent.parameters,
        [
            property.title.clone(),
            format!(
                "{} {} a las 17:00",
                WEEKDAYS[tomorrow.weekday().num_days_from_monday() as usize],
                tomorrow.format("%d/%m")
            ),
            property.address.clone()
        ]
    );

    // In the conversation's language, like any reply.
    let translated = store.unsent_outbox(&english).await.unwrap();
    assert_eq!(translated.len(), 1);
    assert_eq!(translated[0].body, in_english);
    // And in the history, so the next turn knows what the customer is answering.
    for (wa_id, starts) in [
        (&recent, "Recordatorio de Zaguan Inmobiliaria: mañana"),
        (&silent, "Recordatorio de Zaguan Inmobiliaria: mañana"),
        (&english, "Reminder:"),
    ] {
        let history = store.recent_messages(wa_id, 10).await.unwrap();
        assert_eq!(history.len(), 1, "{wa_id}");
        let said = &history[0].message;
        assert_eq!(said.role, MessageRole::Ai);
        assert_eq!(said.agent.as_deref(), Some(REMINDER_AGENT));
        assert!(said.content.starts_with(starts), "{}", said.content);
        let conversation = store.conversation(wa_id).await.unwrap().unwrap();
        assert!(
            conversation.history_at.is_some(),
            "a held window is read again"
        );
    }

    // The customer answers the reminder: the assistant is shown what they are answering.
    let answer = common::inbox_entry(
        "wamid.REMINDED",
        &recent,
        "¿Me la puedes pasar al viernes?",
        zaguan::store::InboxStatus::Pending,
    );
    store
        .insert_inbox(std::slice::from_ref(&answer))
        .await
        .unwrap();
    let outcome = engine.run_turn(&recent, &[answer]).await.unwrap();
    assert_eq!(
        outcome.reply.as_deref(),
        Some("Claro, ¿qué día te viene mejor?")
    );
    let request = llm.requests().pop().unwrap();
    let zaguan::llm::ChatMessage::Human { content } = &request.messages[0] else {
        panic!("{:?}", request.messages);
    };
    assert!(
        content.starts_with(
            "[Antes, la agencia escribió: «Recordatorio de Zaguan Inmobiliaria: mañana"
        ),
        "{content}"
    );
    assert!(
        content.ends_with("¿Me la puedes pasar al viernes?"),
        "{content}"
    );
}

/// A reminder comes at least `ZAGUAN_REMINDER_MIN_NOTICE` (3 h) after its booking: booked in
/// the evening for the next morning, two hours before the visit; a visit the same day, two
/// hours before it; one too close for that, none.
#[test]
fn a_reminder_never_follows_its_booking_within_the_minimum_notice() {
    use zaguan::realestate::reminders::reminder_due;
    let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 2).unwrap();
    let next = day + chrono::Days::new(1);
    let settings = settings();
    // Booked days before: the evening before, at 19:00.
    assert_eq!(
        reminder_due(
            &settings,
            local(next, 10, 0),
            local(day, 9, 0) - chrono::Duration::days(3)
        ),
        Some(local(day, 19, 0))
    );
    // Booked at 19:30 for tomorrow at 10:00: not minutes later, but at 8:00 tomorrow.
    assert_eq!(
        reminder_due(&settings, local(next, 10, 0), local(day, 19, 30)),
        Some(local(next, 8, 0))
    );
    // Booked at 15:30 for tomorrow at 10:00: the evening before is 3.5 h later, kept.
    assert_eq!(
        reminder_due(&settings, local(next, 10, 0), local(day, 15, 30)),
        Some(local(day, 19, 0))
    );
    // The same day: booked at 10:00 for 18:00, reminded at 16:00.
    assert_eq!(
        reminder_due(&settings, local(day, 18, 0), local(day, 10, 0)),
        Some(local(day, 16, 0))
    );
    // Booked at 8:30 for 10:00: too close for any reminder.
    assert_eq!(
        reminder_due(&settings, local(day, 10, 0), local(day, 8, 30)),
        None
    );
}

/// The reminder loop keeps that timing: nothing right after an evening booking, the reminder
/// two hours before the visit; a same-day visit reminded «hoy».
async fn reminders_respect_the_booking(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let today = chrono::NaiveDate::from_ymd_opt(2026, 12, 2).unwrap();
    let tomorrow = today + chrono::Days::new(1);
    let set = demo::demo_set(today, TZ);
    demo::seed(realestate.as_ref(), &set).await.unwrap();
    let property = &set.properties[0];
    let evening = WaId::parse("34611000811").unwrap();
    let same_day = WaId::parse("34611000812").unwrap();
    for (id, wa_id, starts_at, booked_at) in [
        (
            "A-M1",
            &evening,
            local(tomorrow, 10, 0),
            local(today, 19, 30),
        ),
        ("A-M2", &same_day, local(today, 18, 0), local(today, 10, 0)),
    ] {
        realestate
            .save_appointment(&Appointment {
                id: id.into(),
                property_id: property.id.clone(),
                slot_id: format!("S-{id}"),
                wa_id: wa_id.clone(),
                starts_at,
                status: AppointmentStatus::Booked,
                created_at: booked_at,
                reminder_sent_at: None,
                moved_from: None,
                follow_up: Default::default(),
            })
            .await
            .unwrap();
        store
            .record_contact(&ContactSeen {
                wa_id: wa_id.clone(),
                phone: Some(wa_id.as_str().to_owned()),
                user_id: None,
                name: None,
                username: None,
                seen_at: booked_at,
            })
            .await
            .unwrap();
    }
    let (engine, _) = engine(&store, &realestate, &[]);
    let reminders = Reminders::new(realestate.clone(), engine, settings());
    assert_eq!(reminders.tick(local(today, 15, 59)).await.unwrap(), 0);
    assert_eq!(reminders.tick(local(today, 16, 0)).await.unwrap(), 1);
    let said = store.unsent_outbox(&same_day).await.unwrap();
    assert!(
        said[0].body.starts_with(
            "Recordatorio de Zaguan Inmobiliaria: hoy a las 18:00, tienes la visita a"
        ),
        "{}",
        said[0].body
    );
    // The evening booking: nothing at 19:45 nor at midnight, then at 8:00.
    for at in [
        local(today, 19, 45),
        local(today, 23, 59),
        local(tomorrow, 7, 59),
    ] {
        assert_eq!(reminders.tick(at).await.unwrap(), 0, "{at}");
    }
    assert!(store.unsent_outbox(&evening).await.unwrap().is_empty());
    assert_eq!(reminders.tick(local(tomorrow, 8, 0)).await.unwrap(), 1);
    let said = store.unsent_outbox(&evening).await.unwrap();
    assert!(
        said[0]
            .body
            .starts_with("Recordatorio de Zaguan Inmobiliaria: hoy a las 10:00,"),
        "{}",
        said[0].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reminders_respect_the_booking() {
    reminders_respect_the_booking(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_reminders_respect_the_booking() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    reminders_respect_the_booking(Arc::new(db.store.clone()), realestate).await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reminders_go_out_once_as_text_or_template() {
    reminders_go_out_once_as_text_or_template(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_reminders_go_out_once_as_text_or_template() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    reminders_go_out_once_as_text_or_template(Arc::new(db.store.clone()), realestate).await;
    db.drop().await;
}
