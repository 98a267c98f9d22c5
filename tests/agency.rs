//! The agency's side of the loop through the real binary: `zaguan serve` with a business file,
//! signed webhooks, a fake OpenAI-format model and the fake Graph API, on the embedded store
//! and on MongoDB (FerretDB in CI). A customer asks for a person — in so many words, through an
//! assistant's `request_human`, or as a confirmed `request_callback` — and the staff member on
//! duty is told on WhatsApp within seconds while the customer gets one honest reply; nobody
//! taking it tells the next one after the SLA; outside opening hours the customer hears when
//! the office opens; and «¿a qué hora abrís el sábado?» is answered from the business file.
//! A refused notice goes to the next member at once, a burst reaches a member as one digest,
//! and two instances given the same webhooks tell each customer's request once.

mod common;

use std::time::Duration;

use zaguan::realestate::{AppointmentStore, PropertyStore, SlotStore, StaffStore};

use chrono::{Datelike as _, Utc};
use serde_json::{Value, json};

use common::TestMongo;
use common::service::{self, Options, Service, say};
use zaguan::domain::phrases;
use zaguan::store::EventStore as _;

/// The demo's staff who take handoffs: Lucía, then (on MongoDB, where the test sets the staff
/// up) Marta.
const LUCIA: &str = "34699000001";
const MARTA: &str = "34699000003";

// ---------------------------------------------------------------------------------------------
// The model: enough rules to ask for a person, a callback and the opening hours.

fn rule_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    let last = messages.last().unwrap();
    let role = last["role"].as_str().unwrap_or_default();
    let content = last["content"].as_str().unwrap_or_default();
    let call = |name: &str, args: Value| service::call(messages.len(), name, args);
    if system.contains("especialista en financiación") {
        if role == "tool" && content.starts_with("The conversation is now handled") {
            call(
                "request_callback",
                json!({"reason": "Estudio de hipoteca para el P-1001", "preferred_time": "por la tarde"}),
            )
        } else if content.starts_with("Waiting for the user's confirmation") {
            say("¿Te llamamos? Confírmalo con el botón.")
        } else if content.starts_with("Callback request") {
            say("Hecho: el asesor te llamará.")
        } else {
            say("¿Algo más sobre tu hipoteca?")
        }
    } else if role == "user" && content.contains("llamar") {
        call(
            "ToMortgageLoanAssistant",
            json!({"query": "quiere que le llame un asesor hipotecario"}),
        )
    } else if role == "user" && content.contains("precio del P-") {
        call(
            "request_human",
            json!({"reason": "Quiere negociar el precio del P-1001"}),
        )
    } else if role == "user" && content.contains("sábado") {
        call("business_info", json!({"topic": "hours"}))
    } else if role == "tool" && content.contains("Horario de apertura") {
        // Quotes the file's line for Saturday, as a model reading the tool result would.
        let saturday = content
            .lines()
            .find_map(|l| l.strip_prefix("- sábado: "))
            .unwrap_or("no consta");
        say(&format!("Los sábados abrimos: {saturday}."))
    } else if role == "tool" && content.starts_with("Done: a person") {
        say("Ya he avisado a una persona del equipo; te escribirá por aquí.")
    } else {
        say("¿En qué te ayudo?")
    }
}

// ---------------------------------------------------------------------------------------------
// The service.

/// Open all day, every day, but for `saturday`, so the Saturday hours say where they came from.
fn business_open_now() -> String {
    let mut text =
        String::from("name = \"Inmobiliaria Prueba\"\ncontact = [\"Tel. 960 111 222\"]\n[hours]\n");
    for day in zaguan::business::WEEKDAYS {
        if day == "saturday" {
            text.push_str("saturday = [\"0:00-11:00\", \"11:00-24:00\"]\n");
        } else {
            text.push_str(&format!("{day} = [\"0:00-24:00\"]\n"));
        }
    }
    text
}

/// Closed until 9:00 tomorrow (business time): only tomorrow has hours.
fn business_closed_until_tomorrow() -> String {
    let tomorrow = Utc::now()
        .with_timezone(&chrono_tz::Europe::Madrid)
        .weekday()
        .succ();
    let day = zaguan::business::WEEKDAYS[tomorrow.num_days_from_monday() as usize];
    format!("name = \"Inmobiliaria Prueba\"\n[hours]\n{day} = [\"9:00-10:00\"]\n")
}

/// The service with the agency's business file: open now, 2 s to take a handoff.
async fn start(mongo: Option<&TestMongo>) -> Service {
    Service::start(Options {
        rules: rule_model,
        business: Some(business_open_now()),
        env: vec![
            ("ZAGUAN_HANDOFF_SLA", "2s".to_owned()),
            ("ZAGUAN_HANDOFF_DIGEST", "1s".to_owned()),
        ],
        mongo,
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

async fn a_customer_asking_for_a_person_reaches_the_staff_on_duty(service: &mut Service) {
    let customer = "34611300001";
    let before = service.model_calls();
    service
        .customer_says(customer, "Ana Torres", "Quiero hablar con una persona")
        .await;
    let took = service
        .wait_for_message(LUCIA, "+34611300001", Duration::from_secs(5))
        .await;
    eprintln!("agency: staff told {took:?} after the customer asked for a person");
    // The notice names the customer and the reason; Lucía never wrote, so it is the template.
    let notice = service
        .messages_to(LUCIA)
        .into_iter()
        .find(|m| m.to_string().contains("+34611300001"))
        .unwrap();
    assert_eq!(notice["type"], json!("template"), "{notice}");
    assert_eq!(notice["template"]["name"], json!("staff_handoff"));
    let parameters = notice["template"]["components"][0]["parameters"].to_string();
    assert!(parameters.contains("Ana Torres"), "{parameters}");
    assert!(
        parameters.contains("ha pedido hablar con una persona"),
        "{parameters}"
    );
    assert!(
        parameters.contains("https://zaguan.example/console/conversations/34611300001"),
        "{parameters}"
    );
    // The customer: one honest reply, and no model was asked.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        service.texts_to(customer),
        [phrases::handoff_told(Some("es"))]
    );
    assert_eq!(service.model_calls(), before);
}

async fn an_assistants_request_human_reaches_the_staff(service: &mut Service) {
    let customer = "34611300002";
    service
        .customer_says(
            customer,
            "Bruno Díaz",
            "Quiero que alguien me ayude con el precio del P-1001",
        )
        .await;
    service
        .wait_for_message(
            LUCIA,
            "Quiere negociar el precio del P-1001",
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(service.mentions(LUCIA, "+34611300002"), 1);
    service
        .wait_for_message(customer, "Ya he avisado", Duration::from_secs(5))
        .await;
}

async fn a_confirmed_callback_reaches_the_staff(service: &mut Service) {
    let customer = "34611300003";
    service
        .customer_says(customer, "Carla Ruiz", "¿Me puede llamar un asesor?")
        .await;
    service
        .wait_for_message(customer, "Confírmalo", Duration::from_secs(5))
        .await;
    // Nothing before the yes.
    assert_eq!(service.mentions(LUCIA, "+34611300003"), 0);
    service.customer_says(customer, "Carla Ruiz", "sí").await;
    service
        .wait_for_message(
            LUCIA,
            "Llamar al cliente: Estudio de hipoteca para el P-1001",
            Duration::from_secs(5),
        )
        .await;
    service
        .wait_for_message(customer, "el asesor te llamará", Duration::from_secs(5))
        .await;
}

async fn saturday_hours_come_from_the_business_file(service: &mut Service) {
    let customer = "34611300004";
    service
        .customer_says(customer, "Diego Gil", "¿A qué hora abrís el sábado?")
        .await;
    service
        .wait_for_message(
            customer,
            "Los sábados abrimos: 0:00–11:00 y 11:00–24:00.",
            Duration::from_secs(5),
        )
        .await;
}

async fn nobody_taking_it_tells_the_next_one_after_the_sla(service: &mut Service) {
    let customer = "34611300005";
    let asked = std::time::Instant::now();
    service
        .customer_says(customer, "Elena Mora", "con un agente")
        .await;
    service
        .wait_for_message(LUCIA, "+34611300005", Duration::from_secs(5))
        .await;
    // ZAGUAN_HANDOFF_SLA=2s: then Marta.
    service
        .wait_for_message(MARTA, "+34611300005", Duration::from_secs(10))
        .await;
    // On one clock, this process's: Marta's notice came at least the SLA after the request
    // (Lucía's may have waited for her digest, so it is not the mark).
    let marta = service
        .graph
        .received()
        .iter()
        .find(|r| r.body["to"] == json!(MARTA) && r.body.to_string().contains("+34611300005"))
        .map(|r| r.at)
        .unwrap();
    assert!(
        marta >= asked + Duration::from_secs(2),
        "Marta told {:?} after the request, within the 2 s SLA",
        marta.saturating_duration_since(asked)
    );
    let escalated = service
        .messages_to(MARTA)
        .into_iter()
        .find(|m| m.to_string().contains("+34611300005"))
        .unwrap()
        .to_string();
    assert!(
        escalated.contains("ha pedido hablar con una persona")
            || escalated.contains("clientes esperan a una persona"),
        "{escalated}"
    );
}

async fn after_hours_the_customer_hears_when_the_office_opens(service: &mut Service) {
    service
        .rewrite_business(&business_closed_until_tomorrow())
        .await;
    let customer = "34611300006";
    service
        .customer_says(customer, "Fermín Sanz", "quiero hablar con una persona")
        .await;
    service
        .wait_for_message(
            customer,
            "mañana a partir de las 9:00",
            Duration::from_secs(5),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(service.texts_to(customer).len(), 1);
    assert_eq!(
        service.mentions(LUCIA, "+34611300006"),
        0,
        "nobody is woken up at night"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_embedded_store_staff_are_told_and_customers_hear_the_truth() {
    let mut service = start(None).await;
    a_customer_asking_for_a_person_reaches_the_staff_on_duty(&mut service).await;
    an_assistants_request_human_reaches_the_staff(&mut service).await;
    a_confirmed_callback_reaches_the_staff(&mut service).await;
    saturday_hours_come_from_the_business_file(&mut service).await;
    // The demo's Javier keeps hours of his own, so whether anyone is on duty depends on when
    // this runs: the after-hours and escalation scenarios run on MongoDB, with staff set up.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_staff_are_told_escalated_and_customers_hear_the_truth() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    // The demo data, with Lucía and Marta taking handoffs at the agency's hours.
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    let set = common::seeded_demo(&realestate).await;
    let mut staff = set.staff.clone();
    for member in &mut staff {
        member.notify_handoffs = member.id == "A-01" || member.id == "A-03";
        member.hours = None;
    }
    realestate.upsert_staff(&staff).await.unwrap();
    let mut service = start(Some(&db)).await;
    a_customer_asking_for_a_person_reaches_the_staff_on_duty(&mut service).await;
    an_assistants_request_human_reaches_the_staff(&mut service).await;
    a_confirmed_callback_reaches_the_staff(&mut service).await;
    saturday_hours_come_from_the_business_file(&mut service).await;
    nobody_taking_it_tells_the_next_one_after_the_sla(&mut service).await;
    after_hours_the_customer_hears_when_the_office_opens(&mut service).await;
    drop(service);
    db.drop().await;
}

/// Lucía's number refuses every notice (131026): the desk goes to Marta at once — long before
/// the SLA — and the queue shows why Lucía was not reached. Requests that come while Marta was
/// told moments ago are gathered into one digest, with the queue's link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_a_refused_notice_goes_to_the_next_and_a_burst_is_one_digest() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    let set = common::seeded_demo(&realestate).await;
    let mut staff = set.staff.clone();
    for member in &mut staff {
        member.notify_handoffs = member.id == "A-01" || member.id == "A-03";
        member.hours = None;
    }
    realestate.upsert_staff(&staff).await.unwrap();
    let mut service = Service::start(Options {
        rules: rule_model,
        business: Some(business_open_now()),
        env: vec![
            ("ZAGUAN_HANDOFF_SLA", "1h".to_owned()),
            ("ZAGUAN_HANDOFF_DIGEST", "4s".to_owned()),
        ],
        mongo: Some(&db),
    })
    .await;
    *service.graph.refused.lock().unwrap() = Some(LUCIA.to_owned());
    let customer = "34611300101";
    service
        .customer_says(customer, "Inés Vidal", "Quiero hablar con una persona")
        .await;
    // The customer hears the truth of that moment: a notice was on its way.
    service
        .wait_for_message(
            customer,
            "He avisado a una persona del equipo",
            Duration::from_secs(5),
        )
        .await;
    // Lucía's is refused; Marta is told within seconds, not after the hour's SLA.
    service
        .wait_for_message(MARTA, "+34611300101", Duration::from_secs(15))
        .await;
    let (_, shown) = service
        .admin("GET", &format!("/admin/conversations/{customer}"), None)
        .await;
    let failures = shown["conversation"]["handoff_requested"]["notice_failures"].to_string();
    assert!(failures.contains("131026"), "{shown}");
    assert!(failures.contains("…0001"), "Lucía, masked: {shown}");
    // Her own conversation is not in the queue: she is not waiting for anyone.
    let (_, queue) = service
        .admin("GET", "/admin/conversations?handoff=requested", None)
        .await;
    assert!(!queue.to_string().contains(LUCIA), "{queue}");

    // Four more customers at once: at most one message to Marta per ZAGUAN_HANDOFF_DIGEST, so
    // a digest names several of them, and every one of them reaches her.
    let before = service.messages_to(MARTA).len();
    for n in 2..=5 {
        service
            .customer_says(
                &format!("3461130010{n}"),
                &format!("Cliente {n}"),
                "Quiero hablar con una persona",
            )
            .await;
    }
    service
        .wait_for_message(
            MARTA,
            "clientes esperan a una persona",
            Duration::from_secs(30),
        )
        .await;
    for n in 2..=5 {
        service
            .wait_for_message(MARTA, &format!("+3461130010{n}"), Duration::from_secs(30))
            .await;
    }
    let new: Vec<String> = service.messages_to(MARTA)[before..]
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(new.len() <= 2, "not one notice each: {new:#?}");
    let digest = new
        .iter()
        .find(|m| m.contains("clientes esperan a una persona"))
        .unwrap();
    assert!(
        digest.contains("https://zaguan.example/console/queue"),
        "{digest}"
    );
    // Marta's messages never come closer together than the digest time.
    let times: Vec<std::time::Instant> = service
        .graph
        .delivered()
        .iter()
        .filter(|d| d.to == MARTA)
        .map(|d| d.at)
        .collect();
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(3800),
            "two notices to Marta {:?} apart",
            pair[1] - pair[0]
        );
    }
    drop(service);
    db.drop().await;
}

/// Two instances on one database, and every webhook delivered to both (Meta redelivers what
/// it doubts was received; a balancer may hand the copy to the other pod): ten customers ask
/// for a person at once, and Marta hears of each of them once, and each customer gets one
/// reply. The notice's outbox id comes from the request and the step, not from the moment or
/// the instance that ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_two_instances_and_redelivered_webhooks_tell_each_customer_once() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    let set = common::seeded_demo(&realestate).await;
    let mut staff = set.staff.clone();
    for member in &mut staff {
        member.notify_handoffs = member.id == "A-03";
        member.hours = None;
    }
    realestate.upsert_staff(&staff).await.unwrap();
    let options = || Options {
        rules: rule_model,
        business: Some(business_open_now()),
        env: vec![
            ("ZAGUAN_HANDOFF_SLA", "1h".to_owned()),
            ("ZAGUAN_HANDOFF_DIGEST", "2s".to_owned()),
        ],
        mongo: Some(&db),
    };
    let one = Service::start(options()).await;
    let two = Service::start(options()).await;
    let customers: Vec<String> = (0..10).map(|n| format!("346113002{n:02}")).collect();
    for (n, customer) in customers.iter().enumerate() {
        let update = json!({
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": service::PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": format!("Cliente {n}")}, "wa_id": customer}],
            "messages": [{
                "from": customer,
                "id": format!("wamid.TWO{customer}"),
                "timestamp": Utc::now().timestamp().to_string(),
                "type": "text",
                "text": {"body": "Quiero hablar con una persona"},
            }],
        });
        // Half of them reach the second instance first.
        let (first, second) = if n % 2 == 0 {
            (&one, &two)
        } else {
            (&two, &one)
        };
        tokio::join!(
            first.post_webhook(update.clone()),
            second.post_webhook(update)
        );
    }
    let told = |customer: &str| {
        one.mentions(MARTA, &format!("+{customer}")) + two.mentions(MARTA, &format!("+{customer}"))
    };
    let replies = |customer: &str| {
        one.mentions(customer, "He avisado a una persona del equipo")
            + two.mentions(customer, "He avisado a una persona del equipo")
    };
    let started = std::time::Instant::now();
    while customers.iter().any(|c| told(c) == 0 || replies(c) == 0) {
        assert!(
            started.elapsed() < Duration::from_secs(45),
            "not everyone was told: {:?}",
            customers
                .iter()
                .map(|c| (c, told(c), replies(c)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Long enough for a second copy from either instance (two digest periods, a loop pass).
    tokio::time::sleep(Duration::from_secs(5)).await;
    for customer in &customers {
        assert_eq!(
            told(customer),
            1,
            "Marta told of {customer} once: {:?} {:?}",
            one.messages_to(MARTA),
            two.messages_to(MARTA)
        );
        assert_eq!(replies(customer), 1, "{customer} answered once");
    }
    drop((one, two));
    db.drop().await;
}

// ---------------------------------------------------------------------------------------------
// Without any model.

/// `zaguan serve` with no model configured at all, on MongoDB: through signed webhooks and the
/// fake Graph API, a customer finds flats (each with its price), sees one with its photos, gets
/// its slots and books one; the appointment is in `appointments` and its event is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_model_a_customer_finds_a_flat_and_books_its_visit() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    common::seeded_demo(&realestate).await;
    let unset = |name: &'static str| (name, String::new());
    let mut service = Service::start(Options {
        rules: rule_model,
        business: None,
        env: vec![
            unset("LLM_PRIMARY"),
            unset("LLM_FALLBACK"),
            unset("OPENAI_API_KEY"),
            unset("OPENAI_BASE_URL"),
            unset("ANTHROPIC_API_KEY"),
            ("ZAGUAN_FAST_ROUTE", "true".to_owned()),
        ],
        mongo: Some(&db),
    })
    .await;
    let customer = "34611777001";
    let wait = Duration::from_secs(15);
    let interactive = |reply: Value| json!({"type": "interactive", "interactive": reply});
    // The rows or buttons of the last message to the customer that had them.
    let choices = |service: &Service, kind: &str| -> Vec<(String, String)> {
        let messages = service.messages_to(customer);
        let last = messages
            .iter()
            .rev()
            .find(|m| m["interactive"]["type"] == json!(kind))
            .unwrap_or_else(|| panic!("no {kind} message: {messages:#?}"));
        let action = &last["interactive"]["action"];
        let items: Vec<&Value> = if kind == "list" {
            action["sections"][0]["rows"]
                .as_array()
                .unwrap()
                .iter()
                .collect()
        } else {
            action["buttons"].as_array().unwrap().iter().collect()
        };
        items
            .into_iter()
            .map(|item| {
                let item = if kind == "list" { item } else { &item["reply"] };
                (
                    item["id"].as_str().unwrap().to_owned(),
                    item["title"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };

    service
        .customer_says(
            customer,
            "Carmen",
            "busco piso de 2 habitaciones en Valencia para alquilar",
        )
        .await;
    service
        .wait_for_message(customer, "ask:property_assistant:P-", wait)
        .await;
    let rows = choices(&service, "list");
    assert!(!rows.is_empty());
    for (row, title) in &rows {
        assert!(title.contains("€/mes"), "each with its price: {rows:?}");
        let id = row.rsplit(':').next().unwrap();
        let listing = realestate.property(id).await.unwrap().unwrap();
        assert_eq!(listing.city, "Valencia", "{row}");
        assert_eq!(
            listing.operation,
            zaguan::realestate::Operation::Rent,
            "{row}"
        );
        assert!(listing.bedrooms >= 2, "{row}");
    }
    let (row, title) = rows[0].clone();
    let listing_id = row.rsplit(':').next().unwrap().to_owned();

    // Picking one: its details and photos.
    service
        .customer_sends(
            customer,
            "Carmen",
            interactive(json!({"type": "list_reply", "list_reply": {"id": row, "title": title}})),
            chrono::Duration::zero(),
        )
        .await;
    service
        .wait_for_message(customer, "ask:appointment_assistant:P-", wait)
        .await;
    let listing = realestate.property(&listing_id).await.unwrap().unwrap();
    assert_eq!(
        service.photos_to(customer),
        listing.photos.len().min(3),
        "its photos, as images or a carousel's cards"
    );
    assert!(service.mentions(customer, &listing.address) > 0);

    // «quiero visitarlo», typed rather than pressed → slots of the listing just shown.
    service
        .customer_says(customer, "Carmen", "quiero visitarlo")
        .await;
    service
        .wait_for_message(customer, "ask:appointment_assistant:S-", wait)
        .await;
    let (slot, slot_title) = choices(&service, "list")[0].clone();
    let slot_id = slot.rsplit(':').next().unwrap().to_owned();

    // Picking one and confirming.
    service
        .customer_sends(
            customer,
            "Carmen",
            interactive(
                json!({"type": "list_reply", "list_reply": {"id": slot, "title": slot_title}}),
            ),
            chrono::Duration::zero(),
        )
        .await;
    service.wait_for_message(customer, "confirm:", wait).await;
    let (confirm, confirm_title) = choices(&service, "button")
        .into_iter()
        .find(|(id, _)| id.starts_with("confirm:"))
        .unwrap();
    service
        .customer_sends(
            customer,
            "Carmen",
            interactive(
                json!({"type": "button_reply", "button_reply": {"id": confirm, "title": confirm_title}}),
            ),
            chrono::Duration::zero(),
        )
        .await;
    service
        .wait_for_message(customer, "Visita reservada", wait)
        .await;
    let booked = {
        realestate
            .appointments_of(&zaguan::domain::WaId::parse(customer).unwrap())
            .await
            .unwrap()
    };
    assert_eq!(booked.len(), 1);
    assert_eq!(booked[0].slot_id, slot_id);
    assert_eq!(booked[0].property_id, listing_id);
    let events = db
        .store
        .list_events(&zaguan::store::EventQuery {
            kind: Some("appointment.booked".into()),
            limit: 10,
            ..zaguan::store::EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");

    // The visit is in the agent's own calendar feed, read back by an iCalendar parser.
    let slot = realestate.slot(&slot_id).await.unwrap().unwrap();
    let mut agent = realestate
        .staff()
        .await
        .unwrap()
        .into_iter()
        .find(|m| zaguan::realestate::calendar::is_theirs(&slot.agent, m))
        .unwrap();
    agent.calendar_token = Some("feed-token-of-the-test".to_owned());
    realestate
        .upsert_staff(std::slice::from_ref(&agent))
        .await
        .unwrap();
    let service_port = service.port;
    let feed = |path: String| async move {
        let response = reqwest::get(format!("http://127.0.0.1:{}{path}", service_port))
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let (status, ics) = feed("/calendar/feed-token-of-the-test.ics".to_owned()).await;
    assert_eq!(status, 200, "{ics}");
    let busy = zaguan::realestate::calendar::ics::busy_times(
        &ics,
        booked[0].starts_at - chrono::Duration::days(1),
        booked[0].starts_at + chrono::Duration::days(1),
        chrono_tz::Europe::Madrid,
    )
    .unwrap();
    assert_eq!(busy.busy[0].start, booked[0].starts_at, "{ics}");
    let unfolded = ics.replace("\r\n ", "");
    assert!(
        unfolded.contains(&format!("UID:{}@zaguan", booked[0].id)),
        "{ics}"
    );
    assert!(unfolded.contains("(+34611777001)"), "{ics}");
    assert!(
        unfolded.contains(&listing.address.replace(',', "\\,")),
        "{ics}"
    );
    let (status, _) = feed("/calendar/not-the-token.ics".to_owned()).await;
    assert_eq!(status, 404);

    assert_eq!(service.model_calls(), 0, "no model was asked");
    assert_eq!(
        service.mentions(customer, "modo limitado"),
        1,
        "the limited mode is said once"
    );
    drop(service);
    db.drop().await;
}
