//! What the service writes first, within what WhatsApp and the customer allow: an opted-out
//! customer gets no alert until they opt back in, a reminder goes in the customer's template
//! language (and skips a paused template), a reaction is never a yes nor a message to answer, a
//! message delivered a day late gets only the re-engagement template, a late `failed` status
//! falls back once, template webhooks are recorded, and an operator cannot write past the
//! window. On the memory store and on MongoDB.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{NaiveTime, Utc};
use serde_json::json;
use zaguan::agents::AgentRegistry;
use zaguan::domain::{Content, DialogState, MessageRole, WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::alerts::{AlertSettings, Alerts};
use zaguan::realestate::reminders::{ReminderSettings, Reminders};
use zaguan::realestate::{Alert, AlertCriteria, Appointment, AppointmentStatus, RealEstateStore};
use zaguan::store::{
    ContactSeen, InboxStatus, Media, NewOutbox, OutboxEntry, OutboxStatus, Store, TemplateStatus,
};

const TZ: chrono_tz::Tz = chrono_tz::Europe::Madrid;

fn engine(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    llm: &Arc<ScriptedLlm>,
) -> Arc<Engine> {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    Arc::new(Engine::new(
        store.clone(),
        llm.clone(),
        Arc::new(AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap()),
        Arc::new(zaguan::realestate::tools::registry(realestate.clone())),
        EngineSettings {
            fast_route: false,
            ..EngineSettings::default()
        },
    ))
}

async fn seen_hours_ago(store: &Arc<dyn Store>, wa_id: &WaId, hours: i64) {
    store
        .record_contact(&ContactSeen {
            wa_id: wa_id.clone(),
            phone: Some(wa_id.as_str().to_owned()),
            user_id: None,
            name: Some("Ana".into()),
            username: None,
            seen_at: Utc::now() - chrono::Duration::hours(hours),
        })
        .await
        .unwrap();
}

/// «BAJA» is acknowledged without a model and stops the saved-search alerts; «ALTA» brings
/// them back, and the alert held meanwhile goes out.
async fn an_opted_out_customer_gets_no_alert_until_they_opt_back_in(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let llm = Arc::new(ScriptedLlm::new());
    let engine = engine(&store, &realestate, &llm);
    let customer = WaId::parse("34611000951").unwrap();
    store
        .set_dialog_state(
            &customer,
            &DialogState::entered("searcher_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    let listing = set
        .properties
        .iter()
        .find(|p| p.status == zaguan::realestate::ListingStatus::Available)
        .unwrap();
    realestate
        .save_alert(&Alert {
            id: "S-OPT1".into(),
            wa_id: customer.clone(),
            criteria: AlertCriteria {
                city: Some(listing.city.clone()),
                operation: Some(listing.operation),
                ..AlertCriteria::default()
            },
            created_at: Utc::now() - chrono::Duration::hours(1),
            cancelled_at: None,
        })
        .await
        .unwrap();

    let reply = common::say(&engine, &store, &customer, 1, "BAJA").await;
    assert_eq!(
        reply.as_deref(),
        Some(zaguan::domain::phrases::opted_out(Some("es")))
    );
    assert!(llm.requests().is_empty(), "no model call");
    let user = store.user(&customer).await.unwrap().unwrap();
    assert!(user.opted_out_at.is_some());
    assert_eq!(user.opt_out_source.as_deref(), Some("keyword:BAJA"));

    // A matching listing comes in: no notice while opted out.
    let mut fresh = listing.clone();
    fresh.id = "P-9901".into();
    fresh.listed_at = Utc::now();
    realestate.upsert_properties(&[fresh]).await.unwrap();
    let alerts = Alerts::new(
        realestate.clone(),
        engine.clone(),
        AlertSettings {
            phone_number_id: "109876543210".into(),
            every: Duration::from_secs(60),
        },
    );
    assert_eq!(alerts.tick(Utc::now()).await.unwrap(), 0);
    let queued = |store: Arc<dyn Store>, customer: WaId| async move {
        store
            .unsent_outbox(&customer)
            .await
            .unwrap()
            .into_iter()
            .filter(|o| o.body.contains("P-9901"))
            .count()
    };
    assert_eq!(queued(store.clone(), customer.clone()).await, 0);

    let reply = common::say(&engine, &store, &customer, 2, "alta").await;
    assert_eq!(
        reply.as_deref(),
        Some(zaguan::domain::phrases::opted_in(Some("es")))
    );
    assert!(llm.requests().is_empty(), "no model call");
    assert!(
        store
            .user(&customer)
            .await
            .unwrap()
            .unwrap()
            .opted_out_at
            .is_none()
    );
    assert_eq!(alerts.tick(Utc::now()).await.unwrap(), 1);
    assert_eq!(queued(store.clone(), customer.clone()).await, 1);
}

/// Outside the window a reminder is the template in the customer's language; a paused one
/// gives way to the fallback language's.
async fn a_reminder_speaks_the_customers_template_language(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let property = &set.properties[0];
    let tomorrow = Utc::now().with_timezone(&TZ).date_naive() + chrono::Days::new(1);
    let at = |h| {
        use chrono::TimeZone as _;
        TZ.from_local_datetime(&tomorrow.and_hms_opt(h, 0, 0).unwrap())
            .unwrap()
            .to_utc()
    };
    let english = WaId::parse("34611000961").unwrap();
    let portuguese = WaId::parse("34611000962").unwrap();
    for (id, wa_id, lang, hour) in [
        ("A-EN1", &english, "en", 10),
        ("A-PT1", &portuguese, "pt", 11),
    ] {
        realestate
            .save_appointment(&Appointment {
                id: id.into(),
                property_id: property.id.clone(),
                slot_id: format!("S-{id}"),
                wa_id: wa_id.clone(),
                starts_at: at(hour),
                status: AppointmentStatus::Booked,
                created_at: Utc::now() - chrono::Duration::days(2),
                reminder_sent_at: None,
                moved_from: None,
                follow_up: Default::default(),
            })
            .await
            .unwrap();
        seen_hours_ago(&store, wa_id, 48).await;
        store.set_conversation_lang(wa_id, lang).await.unwrap();
    }
    // Meta paused the Portuguese reminder.
    store
        .record_template_status(&TemplateStatus {
            name: "visit_reminder".into(),
            language: "pt_PT".into(),
            status: "PAUSED".into(),
            category: Some("utility".into()),
            reason: None,
            quality: None,
            at: Utc::now(),
        })
        .await
        .unwrap();
    let llm = Arc::new(
        ScriptedLlm::new()
            .says("guard_translator", "Reminder: tomorrow you have a visit.")
            .says("guard_translator", "Lembrete: amanhã tem uma visita."),
    );
    let engine = engine(&store, &realestate, &llm);
    let reminders = Reminders::new(
        realestate.clone(),
        engine,
        ReminderSettings {
            min_notice: zaguan::realestate::reminders::DEFAULT_MIN_NOTICE,
            at: NaiveTime::MIN,
            timezone: TZ,
            phone_number_id: "109876543210".into(),
            every: Duration::from_secs(60),
        },
    );
    assert_eq!(reminders.tick(Utc::now()).await.unwrap(), 2);
    let sent = |parts: Vec<OutboxEntry>| {
        let template = parts[0]
            .template
            .clone()
            .expect("outside the window: a template");
        (template.name, template.language, template.category)
    };
    assert_eq!(
        sent(store.unsent_outbox(&english).await.unwrap()),
        ("visit_reminder".into(), "en".into(), Some("utility".into()))
    );
    assert_eq!(
        sent(store.unsent_outbox(&portuguese).await.unwrap()).1,
        "es",
        "the paused Portuguese template gives way to the fallback language's"
    );
    // The English template says its date in English.
    use chrono::Datelike as _;
    let english_when = &store.unsent_outbox(&english).await.unwrap()[0]
        .template
        .clone()
        .unwrap()
        .parameters[1];
    assert_eq!(
        english_when,
        &format!(
            "{} {} {} at 10:00",
            tomorrow.format("%A"),
            tomorrow.day(),
            tomorrow.format("%B")
        )
    );
}

/// A 👍 on an old message while a booking waits for the customer's yes: nothing booked, no
/// reply; the reaction is in the history for the next turn; then a plain yes books.
async fn a_reaction_neither_answers_nor_confirms(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let slot = set
        .slots
        .iter()
        .find(|s| {
            set.properties.iter().any(|p| {
                p.id == s.property_id && p.status == zaguan::realestate::ListingStatus::Available
            })
        })
        .unwrap();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "appointment_assistant",
                "book_appointment",
                json!({"slot_id": slot.id}),
            )
            .says("appointment_assistant", "¿Lo confirmas?")
            .says("appointment_assistant", "¡Reservada!"),
    );
    let engine = engine(&store, &realestate, &llm);
    let customer = WaId::parse("34611000971").unwrap();
    store
        .set_dialog_state(
            &customer,
            &DialogState::entered("appointment_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(&engine, &store, &customer, 1, "quiero visitarlo").await;
    assert!(
        store
            .conversation(&customer)
            .await
            .unwrap()
            .unwrap()
            .pending_action
            .is_some()
    );
    let our_question = store.unsent_outbox(&customer).await.unwrap();
    // An older message of ours, without buttons: the one the 👍 is on.
    let older = store
        .insert_outbox(&[zaguan::store::NewOutbox::text(
            customer.clone(),
            None,
            "Aquí tienes los huecos libres.",
            Utc::now() - chrono::Duration::minutes(5),
        )])
        .await
        .unwrap();
    let reacted_to = WaMessageId::parse("wamid.OURS-1").unwrap();
    store
        .update_outbox(
            &older[0],
            &zaguan::store::OutboxUpdate::Sent {
                wamid: Some(reacted_to.clone()),
            },
        )
        .await
        .unwrap();

    let mut reaction = common::inbox_entry("wamid.REACT1", &customer, "👍", InboxStatus::Pending);
    reaction.kind = "reaction".into();
    reaction.content = Content::Reaction {
        message_id: Some(reacted_to.as_str().to_owned()),
        emoji: Some("👍".into()),
    };
    store
        .insert_inbox(std::slice::from_ref(&reaction))
        .await
        .unwrap();
    let outcome = engine.run_turn(&customer, &[reaction]).await.unwrap();
    assert_eq!(outcome.reply, None, "a reaction is not answered");
    store
        .set_inbox_status(&outcome.answered, InboxStatus::Done)
        .await
        .unwrap();
    assert!(
        realestate
            .appointments_of(&customer)
            .await
            .unwrap()
            .is_empty(),
        "nothing booked"
    );
    assert!(
        store
            .conversation(&customer)
            .await
            .unwrap()
            .unwrap()
            .pending_action
            .is_some(),
        "still waiting for a yes"
    );
    let history = store.recent_messages(&customer, 20).await.unwrap();
    let last = &history.last().unwrap().message;
    assert_eq!(last.role, MessageRole::Human);
    assert!(
        last.content.starts_with("[Reacción 👍 a «"),
        "{}",
        last.content
    );
    assert_eq!(llm.remaining(), 1, "no model call for the reaction");

    // A 👍 on the summary with the Confirm / Cancel buttons: told once that it is not done and
    // how to confirm it; a second one, and its removal, get nothing more.
    let with_buttons = our_question
        .iter()
        .find(|p| !p.buttons.is_empty())
        .expect("the summary with its buttons");
    let buttons_wamid = WaMessageId::parse("wamid.OURS-2").unwrap();
    store
        .update_outbox(
            &with_buttons.id,
            &zaguan::store::OutboxUpdate::Sent {
                wamid: Some(buttons_wamid.clone()),
            },
        )
        .await
        .unwrap();
    let summary = store
        .conversation(&customer)
        .await
        .unwrap()
        .unwrap()
        .pending_action
        .unwrap()
        .summary;
    let mut replies = Vec::new();
    for (n, emoji) in [(2, "👍"), (3, "👌"), (4, "")] {
        let mut reaction = common::inbox_entry(
            &format!("wamid.REACT{n}"),
            &customer,
            emoji,
            InboxStatus::Pending,
        );
        reaction.kind = "reaction".into();
        reaction.content = Content::Reaction {
            message_id: Some(buttons_wamid.as_str().to_owned()),
            emoji: (!emoji.is_empty()).then(|| emoji.to_owned()),
        };
        store
            .insert_inbox(std::slice::from_ref(&reaction))
            .await
            .unwrap();
        let outcome = engine.run_turn(&customer, &[reaction]).await.unwrap();
        store
            .set_inbox_status(&outcome.answered, InboxStatus::Done)
            .await
            .unwrap();
        replies.push(outcome.reply);
    }
    assert_eq!(
        replies,
        [
            Some(format!(
                "Todavía no está hecho: {}. Para confirmarlo, pulsa «Confirmar» o responde «sí».",
                summary.trim_end_matches('.')
            )),
            None,
            None
        ]
    );
    assert!(summary.starts_with("Visita a P-"), "{summary}");
    assert!(
        realestate
            .appointments_of(&customer)
            .await
            .unwrap()
            .is_empty(),
        "a reaction confirms nothing"
    );
    assert_eq!(llm.remaining(), 1, "no model call for the reactions");

    assert_eq!(
        common::say(&engine, &store, &customer, 5, "sí")
            .await
            .as_deref(),
        Some("¡Reservada!")
    );
    let history: Vec<String> = store
        .recent_messages(&customer, 30)
        .await
        .unwrap()
        .iter()
        .map(|m| format!("{:?}: {}", m.message.role, m.message.content))
        .collect();
    assert_eq!(
        realestate.appointments_of(&customer).await.unwrap().len(),
        1,
        "{history:#?}"
    );
}

/// A message WhatsApp delivers 25 hours after it was written: no free text, the inbox entry
/// answered, the conversation flagged, and the re-engagement template as the only answer.
async fn a_message_delivered_a_day_late_gets_only_the_re_engagement_template(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let llm = Arc::new(ScriptedLlm::new());
    let engine = engine(&store, &realestate, &llm);
    let customer = WaId::parse("34611000981").unwrap();
    let written = Utc::now() - chrono::Duration::hours(25);
    let mut late = common::inbox_entry(
        "wamid.LATE1",
        &customer,
        "¿Sigue libre el piso?",
        InboxStatus::Pending,
    );
    late.sent_at = Some(written);
    seen_hours_ago(&store, &customer, 25).await;
    store
        .insert_inbox(std::slice::from_ref(&late))
        .await
        .unwrap();
    let outcome = engine.run_turn(&customer, &[late.clone()]).await.unwrap();
    assert_eq!(outcome.reply, None);
    assert_eq!(outcome.answered, [late.wamid.clone()]);
    assert!(llm.requests().is_empty(), "no model call");
    let conversation = store.conversation(&customer).await.unwrap().unwrap();
    let flagged = conversation
        .handoff_requested
        .expect("flagged for a person");
    assert!(flagged.reason.contains("24 h"), "{}", flagged.reason);
    let sent = store.outbox_in_reply_to(&late.wamid).await.unwrap();
    assert_eq!(sent.len(), 1);
    let template = sent[0].template.as_ref().expect("only a template");
    assert_eq!(template.name, "seguimos_aqui");
    assert_eq!(template.parameters[0], "Ana");
    // Running the turn again (a redelivery, a resume) queues nothing more.
    engine.run_turn(&customer, &[late.clone()]).await.unwrap();
    assert_eq!(
        store.outbox_in_reply_to(&late.wamid).await.unwrap().len(),
        1
    );
}

/// An image accepted by the Graph API and later reported `failed` (131053): a `failed` status
/// webhook sends it again as text with the link, once, however many times the status comes.
async fn a_late_media_failure_falls_back_to_text_once(store: Arc<dyn Store>) {
    let customer = WaId::parse("34611000991").unwrap();
    let mut part = NewOutbox::text(customer.clone(), None, "La terraza", Utc::now());
    part.phone_number_id = Some("109876543210".into());
    part.media = Some(Media::Image {
        link: "https://fotos.example/p1.jpg".into(),
    });
    let ids = store.insert_outbox(&[part]).await.unwrap();
    let wamid = WaMessageId::parse("wamid.IMG1").unwrap();
    store
        .update_outbox(
            &ids[0],
            &zaguan::store::OutboxUpdate::Sent {
                wamid: Some(wamid.clone()),
            },
        )
        .await
        .unwrap();
    let app = common::TestApp::with_store(store.clone());
    let failed = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": "109876543210"},
            "statuses": [{"id": wamid.as_str(), "status": "failed", "timestamp": common::now_timestamp(),
                          "recipient_id": customer.as_str(),
                          // Meta echoes it: a repeat must not find the part queued again.
                          "biz_opaque_callback_data": ids[0].callback_data(),
                          "errors": [{"code": 131053, "title": "Media upload error",
                                      "message": "Media upload error"}]}]
        }}]}]
    }))
    .unwrap();
    for _ in 0..2 {
        assert_eq!(
            app.post_webhook(failed.clone()).await,
            axum::http::StatusCode::OK
        );
    }
    let entry = store.outbox_entry(&ids[0]).await.unwrap().unwrap();
    assert!(entry.fell_back);
    assert_eq!(entry.status, OutboxStatus::Queued, "to be sent again");
    assert_eq!(entry.media, None);
    assert_eq!(entry.body, "La terraza\nhttps://fotos.example/p1.jpg");
    assert_eq!(store.unsent_outbox(&customer).await.unwrap().len(), 1);
}

/// Meta's template webhooks are recorded: a paused template is known as such.
async fn template_webhooks_are_recorded(store: Arc<dyn Store>) {
    let app = common::TestApp::with_store(store.clone());
    let body = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "time": 1751247548, "changes": [
            {"field": "message_template_status_update", "value": {
                "event": "PAUSED", "message_template_id": 1_689_556_908_129_832_u64,
                "message_template_name": "listing_alert", "message_template_language": "es",
                "reason": "NONE", "message_template_category": "UTILITY"}},
            {"field": "template_category_update", "value": {
                "message_template_id": 1_689_556_908_129_833_u64,
                "message_template_name": "seguimos_aqui", "message_template_language": "en",
                "new_category": "MARKETING"}}
        ]}]
    }))
    .unwrap();
    assert_eq!(app.post_webhook(body).await, axum::http::StatusCode::OK);
    let statuses = store.template_statuses().await.unwrap();
    let find = |name: &str| statuses.iter().find(|s| s.name == name).unwrap().clone();
    let paused = find("listing_alert");
    assert_eq!((paused.status.as_str(), paused.usable()), ("PAUSED", false));
    let moved = find("seguimos_aqui");
    assert_eq!(moved.category.as_deref(), Some("marketing"));
    assert!(moved.usable());
}

/// An operator's reply to a customer who last wrote 25 hours ago is refused with the reason,
/// never queued; the follow-up template is offered instead and goes.
async fn an_operator_cannot_write_past_the_window(store: Arc<dyn Store>) {
    let customer = WaId::parse("34611000993").unwrap();
    let entry = common::inbox_entry("wamid.OLD1", &customer, "Hola", InboxStatus::Done);
    store.insert_inbox(&[entry]).await.unwrap();
    seen_hours_ago(&store, &customer, 25).await;
    // The running prompts' templates, as `zaguan serve` has them.
    let realestate: Arc<dyn RealEstateStore> =
        Arc::new(zaguan::realestate::MemoryRealEstate::new());
    let engine = engine(&store, &realestate, &Arc::new(ScriptedLlm::new()));
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let reloader = Arc::new(zaguan::runtime::PromptReloader::new(
        prompts,
        zaguan::startup::known_tools(),
        engine,
    ));
    let app = common::TestApp::with_store(store.clone())
        .with_admin(Some(common::ADMIN_TOKEN))
        .with_state(|state| state.with_prompts(reloader));
    let bearer = common::bearer();
    let path = format!("/admin/conversations/{}", customer.as_str());
    let (status, _) = app
        .admin(
            "POST",
            &format!("{path}/handoff"),
            Some(&bearer),
            Some(r#"{"operator": "lucia"}"#),
        )
        .await;
    assert_eq!(status, axum::http::StatusCode::OK);
    let (status, body) = app
        .admin(
            "POST",
            &format!("{path}/messages"),
            Some(&bearer),
            Some(r#"{"operator": "lucia", "text": "Hola, ¿sigues interesada?"}"#),
        )
        .await;
    assert_eq!(status, axum::http::StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("24-hour window"), "{body}");
    assert!(body.to_string().contains("follow-up template"), "{body}");
    assert!(
        store.unsent_outbox(&customer).await.unwrap().is_empty(),
        "nothing queued"
    );
    let (status, body) = app
        .admin(
            "POST",
            &format!("{path}/follow-up"),
            Some(&bearer),
            Some(r#"{"operator": "lucia"}"#),
        )
        .await;
    assert_eq!(status, axum::http::StatusCode::ACCEPTED, "{body}");
    let queued = store.unsent_outbox(&customer).await.unwrap();
    let template = queued[0].template.as_ref().unwrap();
    assert_eq!(template.name, "operator_follow_up");
    // Sent with the bootstrap token: the customer reads the business, never «admin».
    assert_eq!(
        template.parameters,
        ["Ana", "Zaguan Inmobiliaria", "Zaguan Inmobiliaria"],
        "name, operator, business"
    );
    // An operator with a display name is read by it.
    let team = app.state.team();
    let issued = team
        .add(
            "lucia.perez",
            zaguan::admin::team::OperatorRole::Operator,
            Some(" Lucía   Pérez "),
            "test",
            Utc::now(),
        )
        .await
        .unwrap();
    let (status, body) = app
        .admin(
            "POST",
            &format!("{path}/follow-up"),
            Some(&format!("Bearer {}", issued.token)),
            None,
        )
        .await;
    assert_eq!(status, axum::http::StatusCode::ACCEPTED, "{body}");
    let queued = store.unsent_outbox(&customer).await.unwrap();
    assert_eq!(
        queued.last().unwrap().template.as_ref().unwrap().parameters[1],
        "Lucía Pérez"
    );
    // A customer who opted out gets no follow-up either, and the operator is told why.
    store
        .set_opt_out(
            &customer,
            Some(&zaguan::store::OptOut {
                at: Utc::now(),
                source: "keyword:BAJA".into(),
            }),
        )
        .await
        .unwrap();
    let (status, body) = app
        .admin(
            "POST",
            &format!("{path}/follow-up"),
            Some(&bearer),
            Some(r#"{"operator": "lucia"}"#),
        )
        .await;
    assert_eq!(status, axum::http::StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("opted out"), "{body}");
    assert_eq!(
        store.unsent_outbox(&customer).await.unwrap().len(),
        2,
        "nothing more"
    );
}

crate::both_stores!(|s| (s.store.clone(), s.realestate.clone()) =>
    an_opted_out_customer_gets_no_alert_until_they_opt_back_in,
    a_reminder_speaks_the_customers_template_language,
    a_reaction_neither_answers_nor_confirms,
    a_message_delivered_a_day_late_gets_only_the_re_engagement_template,
);

mod without_data {
    crate::both_stores!(
        a_late_media_failure_falls_back_to_text_once,
        template_webhooks_are_recorded,
        an_operator_cannot_write_past_the_window,
    );

    use super::*;
}
