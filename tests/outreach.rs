//! Outreach within WhatsApp's rules, through the real binary: `zaguan serve` with the shipped
//! templates, signed webhooks, a fake OpenAI-format model and the fake Graph API, on the
//! embedded store and on MongoDB (FerretDB in CI).
//!
//! - «BAJA» stops a saved-search alert without a model call; «ALTA» lets it go out.
//! - A message written 25 hours before it arrives gets no free text: the re-engagement
//!   template, the conversation flagged; an operator's reply then is refused with 409 and the
//!   follow-up template goes instead.
//! - A photo whose `failed` status (131053) arrives after the send goes again as text, once.
//! - A 👍 on an old message while a booking waits for its yes books nothing and says nothing; a
//!   👍 on its Confirm / Cancel message books nothing and says once how to confirm.
//! - «Por favor, no me mandéis más mensajes» opts out without a model; «quiero dar de baja mi
//!   anuncio», a newcomer's «Start» and «baja» answering «¿planta alta o baja?» do not.
//! - 131056 and 130429 back off the recipient and the number; nothing is lost.
//! - Twenty turns refused for content (a 200 with `finish_reason: "content_filter"`) go to the
//!   fallback and leave the primary's breaker closed for everyone else.
//! - On MongoDB, the loop back: a booking reaches its agent within 5 s; after the visit the
//!   agent presses «done» on the template, the customer «Me interesa», and the owner's «¿cómo va
//!   mi piso?» counts the visit and its opinion; an offer reaches the owner, who counters by
//!   message, the customer accepts with the button, the agent is told; a no-show is offered
//!   another time once.
//! - Meta's signals: a marketing stop made inside WhatsApp holds the listing alerts (marketing)
//!   and a resume lets them go; a restricted account and a flagged number hold them until both
//!   clear; a message from an ad is answered once, its click id on the contact and in the leads
//!   export, its headline in what the model reads.
//! - On MongoDB, where the test can place a visit and a customer's language before the
//!   service starts: an English customer's reminder is the English template, its date in
//!   English, though they stopped marketing (a reminder is utility).

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use chrono::Utc;
use serde_json::{Value, json};

use common::TestMongo;
use common::graph::graph_error;
use common::service::{self, Options, PHONE_NUMBER_ID, Service, metric, say};
use zaguan::domain::phrases;
use zaguan::realestate::demo::DemoSet;
use zaguan::realestate::{ListingStatus, Property};

const TZ: chrono_tz::Tz = chrono_tz::Europe::Madrid;

// ---------------------------------------------------------------------------------------------
// The model: a saved search, a visit, photos, and a customer whose words a filter refuses.

/// The last user message of the request.
fn last_user(messages: &[Value]) -> &str {
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
}

/// The first `P-…` reference in `text`.
fn reference(text: &str) -> String {
    let start = text.find("P-").expect("a P- reference");
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

fn rules(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    let last = messages.last().unwrap();
    let role = last["role"].as_str().unwrap_or_default();
    let content = last["content"].as_str().unwrap_or_default();
    let primary = body["model"] == "rules";
    let call = |name: &str, args: Value| service::call(messages.len(), name, args);
    let delegated = role == "tool" && content.starts_with("The conversation is now handled");
    let waiting = content.starts_with("Waiting for the user's confirmation");
    if system.contains("especialista en búsqueda") {
        if delegated {
            let city = last_user(messages)
                .split_once("pisos en ")
                .map(|(_, city)| city.trim())
                .unwrap_or_default();
            call("create_search_alert", json!({"city": city}))
        } else if waiting {
            say("¿Guardo el aviso? Confírmalo con el botón.")
        } else {
            say("Aviso guardado.")
        }
    } else if system.contains("especialista en citas") {
        if delegated {
            let property = reference(last_user(messages));
            call("list_available_slots", json!({"property_id": property}))
        } else if role == "tool" && content.starts_with("Huecos libres") {
            let slot = content
                .split_whitespace()
                .find(|w| w.starts_with("S-"))
                .unwrap();
            call("book_appointment", json!({"slot_id": slot}))
        } else if waiting {
            say("¿Confirmas la visita? Pulsa el botón.")
        } else {
            say("Visita reservada.")
        }
    } else if system.contains("especialista en ofertas") {
        if delegated {
            // «Ofrezco 288000 por el P-1017»: the amount, then the listing.
            let said = last_user(messages);
            let amount: u64 = said
                .split_whitespace()
                .find_map(|w| w.parse().ok())
                .expect("an amount");
            call(
                "submit_offer",
                json!({"property_id": reference(said), "amount": amount}),
            )
        } else if waiting {
            say("¿Confirmas la oferta? Pulsa el botón.")
        } else {
            say("Oferta enviada al propietario.")
        }
    } else if system.contains("especialista en propietarios") {
        if delegated {
            call("owner_listing_stats", json!({}))
        } else if role == "tool" {
            // What the tool said, as it said it: the test reads the figures.
            say(content)
        } else {
            say("Propietario: ¿algo más?")
        }
    } else if system.contains("especialista en propiedades") {
        if delegated {
            let property = reference(last_user(messages));
            call(
                "send_property_photos",
                json!({"property_id": property, "count": 1}),
            )
        } else {
            say("Aquí tienes la foto.")
        }
    } else if messages
        .iter()
        .any(|m| m["role"] == "user" && m["content"].to_string().contains("VETADO"))
    {
        if primary {
            // What OpenAI answers when its filter stops the completion: a 200.
            json!({"id": "chatcmpl-filtered", "object": "chat.completion", "created": 1,
                "model": "rules",
                "choices": [{"index": 0, "finish_reason": "content_filter", "logprobs": null,
                             "message": {"role": "assistant", "content": null, "refusal": null}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 0, "total_tokens": 100}})
        } else {
            say("Reserva: de eso no puedo hablar, ¿te ayudo con una vivienda?")
        }
    } else if role == "user" && content.contains("Avísame") {
        call("ToSearcherAssistant", json!({"query": content}))
    } else if role == "user" && content.contains("cómo va mi piso") {
        call("ToOwnerInfoAssistant", json!({"query": content}))
    } else if role == "user" && content.contains("Ofrezco") {
        call("ToProspectOfferAssistant", json!({"query": content}))
    } else if role == "user" && content.contains("visita") {
        call("ToAppointmentAssistant", json!({"query": content}))
    } else if role == "user" && content.contains("un bajo o un alto") {
        say("¿Lo prefieres en planta alta o baja?")
    } else if role == "user" && content.contains("fotos") {
        call("ToPropertyAssistant", json!({"query": content}))
    } else if primary {
        say("Primaria: ¿en qué te ayudo?")
    } else {
        say("Reserva: ¿en qué te ayudo?")
    }
}

// ---------------------------------------------------------------------------------------------
// The service.

/// Today's demo data, as the embedded store seeds it.
fn demo() -> DemoSet {
    let today = Utc::now().with_timezone(&TZ).date_naive();
    zaguan::realestate::demo::demo_set(today, TZ)
}

fn available(set: &DemoSet) -> impl Iterator<Item = &Property> {
    set.properties
        .iter()
        .filter(|p| p.status == ListingStatus::Available)
}

async fn start(mongo: Option<&TestMongo>) -> Service {
    Service::start(Options {
        rules,
        business: None,
        env: vec![
            ("WHATSAPP_PHONE_NUMBER_ID", PHONE_NUMBER_ID.to_owned()),
            ("LLM_FALLBACK", "openai:backup".to_owned()),
            ("ZAGUAN_OUTREACH_EVERY", "300ms".to_owned()),
            // Reminders from midnight: whenever this runs, tomorrow's visits are due.
            ("ZAGUAN_REMINDER_TIME", "00:00".to_owned()),
            ("ZAGUAN_TIMEZONE", TZ.name().to_owned()),
            // Follow-ups at once, the outcome question a second after a visit's end.
            ("ZAGUAN_FOLLOW_UP_EVERY", "200ms".to_owned()),
            ("ZAGUAN_VISIT_OUTCOME_DELAY", "1s".to_owned()),
            ("ZAGUAN_AGENDA_TIME", "off".to_owned()),
        ],
        mongo,
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

async fn baja_holds_the_alert_and_alta_lets_it_go(service: &mut Service, set: &DemoSet) {
    let customer = "34611400001";
    let listing = available(set).next().unwrap();
    let city = listing.city.clone();
    service
        .customer_says(customer, "Ana", &format!("Avísame de pisos en {city}"))
        .await;
    service
        .wait_for_message(customer, "Confírmalo", Duration::from_secs(5))
        .await;
    service.customer_says(customer, "Ana", "sí").await;
    service
        .wait_for_message(customer, "Aviso guardado", Duration::from_secs(5))
        .await;

    let calls = service.model_calls();
    service.customer_says(customer, "Ana", "BAJA").await;
    service
        .wait_for_message(
            customer,
            phrases::opted_out(Some("es")),
            Duration::from_secs(5),
        )
        .await;
    let (_, shown) = service
        .admin("GET", &format!("/admin/conversations/{customer}"), None)
        .await;
    assert!(shown["opted_out_at"].is_string(), "{shown}");
    assert_eq!(shown["opt_out_source"], json!("keyword:BAJA"));

    // A listing in the saved search's city comes in while the customer is opted out.
    let mut fresh = serde_json::to_value(listing).unwrap();
    fresh["id"] = json!("P-9901");
    let fresh = fresh.as_object_mut().unwrap();
    fresh.remove("listed_at");
    fresh.remove("price_dropped_at");
    let (status, added) = service
        .admin("POST", "/admin/listings", Some(json!([fresh])))
        .await;
    assert_eq!(status, 201, "{added}");
    // Several rounds of the alert loop (every 300 ms): nothing for this customer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(service.mentions(customer, "P-9901"), 0);

    service.customer_says(customer, "Ana", "ALTA").await;
    service
        .wait_for_message(
            customer,
            phrases::opted_in(Some("es")),
            Duration::from_secs(5),
        )
        .await;
    service
        .wait_for_message(customer, "P-9901", Duration::from_secs(5))
        .await;
    assert_eq!(
        service.model_calls(),
        calls,
        "no model call for BAJA nor ALTA"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(service.mentions(customer, "P-9901"), 1, "one notice");
    let acknowledgements = service
        .texts_to(customer)
        .iter()
        .filter(|t| *t == phrases::opted_out(Some("es")))
        .count();
    assert_eq!(acknowledgements, 1);
}

/// A message written 25 hours ago: the re-engagement template, flagged for staff; then an
/// operator's reply is refused and the follow-up template offered.
async fn a_day_late_message_gets_only_a_template(service: &mut Service, mongo: Option<&TestMongo>) {
    let customer = "34611400002";
    let calls = service.model_calls();
    let wamid = service
        .customer_sends(
            customer,
            "Bruno",
            json!({"type": "text", "text": {"body": "¿Sigue disponible el piso de la calle Mayor?"}}),
            chrono::Duration::hours(25),
        )
        .await;
    service
        .wait_for_message(customer, "seguimos_aqui", Duration::from_secs(5))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let messages = service.messages_to(customer);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["type"], json!("template"));
    assert_eq!(service.model_calls(), calls, "no model call");
    let (_, shown) = service
        .admin("GET", &format!("/admin/conversations/{customer}"), None)
        .await;
    let reason = shown["conversation"]["handoff_requested"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(!reason.is_empty(), "flagged for staff: {shown}");
    assert!(
        shown["messages"]
            .to_string()
            .contains("¿Sigue disponible el piso de la calle Mayor?"),
        "the message is kept: {shown}"
    );
    let metrics = service.metrics().await;
    assert_eq!(
        metric(&metrics, "zaguan_turns_total", &[r#"outcome="late""#]),
        1.0
    );
    if let Some(db) = mongo {
        use zaguan::store::InboxStore as _;
        let entry = db
            .store
            .inbox_entry(&zaguan::domain::WaMessageId::parse(&wamid).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(entry.status, zaguan::store::InboxStatus::Done);
    }

    // An operator takes it, and may not write free text past the window.
    let path = format!("/admin/conversations/{customer}");
    let (status, _) = service
        .admin(
            "POST",
            &format!("{path}/handoff"),
            Some(json!({"operator": "Lucía"})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, refused) = service
        .admin(
            "POST",
            &format!("{path}/messages"),
            Some(json!({"operator": "Lucía", "text": "Sí, sigue disponible."})),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused.to_string().contains("24"), "{refused}");
    let (status, queued) = service
        .admin(
            "POST",
            &format!("{path}/follow-up"),
            Some(json!({"operator": "Lucía"})),
        )
        .await;
    assert_eq!(status, 202, "{queued}");
    service
        .wait_for_message(customer, "operator_follow_up", Duration::from_secs(5))
        .await;
    assert!(
        !service
            .texts_to(customer)
            .iter()
            .any(|t| t.contains("Sí, sigue disponible")),
        "the refused reply never went"
    );
}

/// Media refused minutes after it was accepted: the caption and link as text, once.
async fn a_late_media_failure_falls_back_once(service: &mut Service, set: &DemoSet) {
    let customer = "34611400003";
    let property = available(set).find(|p| !p.photos.is_empty()).unwrap();
    service
        .customer_says(
            customer,
            "Carla",
            &format!("Mándame fotos del {}", property.id),
        )
        .await;
    service
        .wait_for_message(customer, "\"image\"", Duration::from_secs(5))
        .await;
    let image = service
        .messages_to(customer)
        .into_iter()
        .find(|m| m["type"] == "image")
        .unwrap();
    let link = image["image"]["link"].as_str().unwrap().to_owned();
    let callback_data = image["biz_opaque_callback_data"].clone();
    let wamid = service
        .graph
        .delivered()
        .into_iter()
        .find(|d| d.to == customer && d.kind == "image")
        .unwrap()
        .wamid;
    let failed = json!({
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "34910000000", "phone_number_id": PHONE_NUMBER_ID},
        "statuses": [{"id": wamid, "status": "failed", "timestamp": Utc::now().timestamp().to_string(),
            "recipient_id": customer, "biz_opaque_callback_data": callback_data,
            "errors": [{"code": 131053, "title": "Media upload error",
                        "message": "Media upload error",
                        "error_data": {"details": "Downloading media from weblink failed"}}]}],
    });
    // Meta may post the same status twice.
    service.post_webhook(failed.clone()).await;
    service.post_webhook(failed).await;
    let texts = |service: &Service| {
        service
            .messages_to(customer)
            .into_iter()
            .filter(|m| m["type"] == "text" && m.to_string().contains(&link))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while texts(service) == 0 {
        if std::time::Instant::now() >= deadline {
            let (_, shown) = service
                .admin("GET", &format!("/admin/conversations/{customer}"), None)
                .await;
            panic!(
                "no text fallback: {:?}\n{wamid}\n{}\n{}",
                service.messages_to(customer),
                shown["outbox"],
                service
                    .metrics()
                    .await
                    .lines()
                    .filter(|l| l.contains("statuses_total"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(texts(service), 1, "{:?}", service.messages_to(customer));
}

/// A 👍 (and its removal) while a booking waits for the customer's yes: nothing booked, no
/// reply, no model call.
async fn a_reaction_neither_answers_nor_confirms(service: &mut Service, set: &DemoSet) {
    let customer = "34611400004";
    let property = available(set)
        .find(|p| set.slots.iter().any(|s| s.property_id == p.id))
        .unwrap();
    let first = service.customer_says(customer, "Diego", "Hola").await;
    service
        .wait_for_message(customer, "¿en qué te ayudo?", Duration::from_secs(5))
        .await;
    service
        .customer_says(
            customer,
            "Diego",
            &format!("Quiero una visita al {}", property.id),
        )
        .await;
    service
        .wait_for_message(customer, "¿Confirmas la visita?", Duration::from_secs(5))
        .await;
    // The question, then the summary with its buttons.
    service
        .wait_for_message(customer, "confirm:", Duration::from_secs(5))
        .await;
    let sent = service.messages_to(customer).len();
    let calls = service.model_calls();
    for emoji in ["👍", ""] {
        service
            .customer_sends(
                customer,
                "Diego",
                json!({"type": "reaction", "reaction": {"message_id": first, "emoji": emoji}}),
                chrono::Duration::zero(),
            )
            .await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        service.messages_to(customer).len(),
        sent,
        "no reply: {:?}",
        service.messages_to(customer)
    );
    assert_eq!(service.model_calls(), calls, "no model call");
    let (_, shown) = service
        .admin("GET", &format!("/admin/conversations/{customer}"), None)
        .await;
    assert_eq!(
        shown["pending_action"]["tool"],
        json!("book_appointment"),
        "still waiting for a yes: {shown}"
    );
    assert!(
        shown["messages"].to_string().contains("👍"),
        "the reaction is in the history: {shown}"
    );
    let (_, appointments) = service
        .admin("GET", "/admin/export/appointments", None)
        .await;
    assert!(
        !appointments.to_string().contains(customer),
        "nothing booked: {appointments}"
    );

    // A 👍 on the message with the Confirm / Cancel buttons: one reply, saying what is still
    // pending and how to confirm it; no model call, nothing booked.
    let with_buttons = service
        .graph
        .delivered()
        .into_iter()
        .rfind(|d| d.to == customer && d.kind == "interactive")
        .expect("the summary with its buttons");
    service
        .customer_sends(
            customer,
            "Diego",
            json!({"type": "reaction", "reaction": {"message_id": with_buttons.wamid, "emoji": "👍"}}),
            chrono::Duration::zero(),
        )
        .await;
    service
        .wait_for_message(customer, "Todavía no está hecho: ", Duration::from_secs(5))
        .await;
    let told = service
        .texts_to(customer)
        .into_iter()
        .find(|t| t.starts_with("Todavía no está hecho: "))
        .unwrap();
    assert!(
        told.ends_with(". Para confirmarlo, pulsa «Confirmar» o responde «sí»."),
        "{told}"
    );
    assert!(told.contains(&property.id), "what is pending: {told}");
    assert_eq!(service.model_calls(), calls, "no model call");
    let (_, appointments) = service
        .admin("GET", "/admin/export/appointments", None)
        .await;
    assert!(
        !appointments.to_string().contains(customer),
        "a reaction books nothing: {appointments}"
    );
}

/// Consent is read as what a message asks, not its words: a sentence asking to stop is an
/// opt-out without a model; «quiero dar de baja mi anuncio», a newcomer's «Start» and a «baja»
/// that answers the bot's own question are not.
async fn consent_is_read_as_intent_not_words(service: &mut Service) {
    let opted_out = |shown: &Value| shown["opted_out_at"].is_string();
    let shown_of = async |service: &Service, customer: &str| {
        service
            .admin("GET", &format!("/admin/conversations/{customer}"), None)
            .await
            .1
    };

    let customer = "34611400021";
    let calls = service.model_calls();
    service
        .customer_says(customer, "Rosa", "Por favor, no me mandéis más mensajes")
        .await;
    service
        .wait_for_message(customer, "Hecho: no volverás", Duration::from_secs(5))
        .await;
    assert_eq!(
        service.texts_to(customer),
        [
            "Hecho: no volverás a recibir recordatorios, avisos ni novedades nuestras por aquí. Si \
          nos escribes, te seguiremos respondiendo. Para volver a recibirlos, escribe ALTA."
        ]
    );
    assert_eq!(service.model_calls(), calls, "no model call");
    let shown = shown_of(service, customer).await;
    assert!(opted_out(&shown), "{shown}");

    // Not consent: each goes to the assistants, and nobody's consent changes.
    for (customer, text) in [
        ("34611400022", "quiero dar de baja mi anuncio"),
        ("34611400023", "Start"),
        ("34611400024", "dejad de enviarme el contrato, ya lo tengo"),
    ] {
        let calls = service.model_calls();
        service.customer_says(customer, "Luis", text).await;
        service
            .wait_for_message(customer, "¿en qué te ayudo?", Duration::from_secs(5))
            .await;
        assert!(service.model_calls() > calls, "{text}: the model answers");
        assert!(
            !service
                .texts_to(customer)
                .iter()
                .any(|t| t.starts_with("Hecho:")),
            "{text}: no consent acknowledgement"
        );
        assert!(!opted_out(&shown_of(service, customer).await), "{text}");
    }

    // «baja» answering «¿planta alta o baja?»: an answer for the assistant, not an opt-out.
    let customer = "34611400025";
    service
        .customer_says(customer, "Marta", "busco un bajo o un alto en Ruzafa")
        .await;
    service
        .wait_for_message(
            customer,
            "¿Lo prefieres en planta alta o baja?",
            Duration::from_secs(5),
        )
        .await;
    let calls = service.model_calls();
    service.customer_says(customer, "Marta", "Baja").await;
    service
        .wait_for_message(customer, "¿en qué te ayudo?", Duration::from_secs(5))
        .await;
    assert!(service.model_calls() > calls, "the model reads the answer");
    assert!(!opted_out(&shown_of(service, customer).await));
}

/// Meta's slow-downs: the part waits and goes, once.
async fn rate_limits_back_off_and_lose_nothing(service: &mut Service) {
    let customer = "34611400005";
    let before = service.metrics().await;
    for (code, status, retry_after, text) in [
        (131056, StatusCode::BAD_REQUEST, None, "Hola"),
        (
            130429,
            StatusCode::TOO_MANY_REQUESTS,
            Some(1),
            "Hola de nuevo",
        ),
    ] {
        service.graph.answers_to.lock().unwrap().push((
            customer.to_owned(),
            (status, graph_error(code, "rate limit"), retry_after),
        ));
        let answered = service.texts_to(customer).len();
        service.customer_says(customer, "Elena", text).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while service.texts_to(customer).len() == answered {
            assert!(
                std::time::Instant::now() < deadline,
                "the reply after {code} never went"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(service.texts_to(customer).len(), 2, "one reply each");
    let after = service.metrics().await;
    for scope in ["recipient", "number"] {
        let label = format!("scope=\"{scope}\"");
        let grew = metric(&after, "zaguan_outbound_backoffs_total", &[&label])
            - metric(&before, "zaguan_outbound_backoffs_total", &[&label]);
        assert_eq!(grew, 1.0, "{scope}");
    }
}

/// One customer's words refused by the primary's filter, twenty turns in a row: each goes to
/// the fallback, and the next customer still gets the primary.
async fn content_refusals_stay_with_their_conversation(service: &mut Service) {
    let refused = "34611400006";
    for turn in 1..=20 {
        service
            .customer_says(refused, "Fermín", &format!("VETADO {turn}"))
            .await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while service.texts_to(refused).len() < turn {
            assert!(
                std::time::Instant::now() < deadline,
                "turn {turn} unanswered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(
        service
            .texts_to(refused)
            .iter()
            .all(|t| t.starts_with("Reserva:")),
        "{:?}",
        service.texts_to(refused)
    );
    let other = "34611400007";
    service.customer_says(other, "Gloria", "Buenas").await;
    service
        .wait_for_message(other, "Primaria:", Duration::from_secs(5))
        .await;
    let metrics = service.metrics().await;
    assert!(
        metric(
            &metrics,
            "zaguan_llm_refusals_total",
            &[r#"kind="content_filter""#]
        ) >= 20.0,
        "refusals counted by kind"
    );
    assert_eq!(
        metric(&metrics, "zaguan_llm_breaker_open", &[r#"model="rules""#]),
        0.0
    );
}

// ---------------------------------------------------------------------------------------------
// The loop back from agents and owners (MongoDB).

/// The listing the loop-back scenario books and makes offers on. Its owner is given a WhatsApp number and
/// its agent is a demo agent on WhatsApp, both before the service starts.
struct LoopListing {
    property: Property,
    agent: String,
    /// Another agent, with the id their slot names: one agent is never booked twice in an
    /// hour, so the second visit is theirs.
    second: (String, String),
    owner: String,
}

async fn loop_listing(
    realestate: &zaguan::realestate::MongoRealEstate,
    set: &DemoSet,
) -> LoopListing {
    use zaguan::realestate::{OwnerStore as _, PropertyStore as _};
    // Its demo slots start tomorrow: the test's, today, are listed first.
    let mut property = available(set)
        .nth(3)
        .expect("an available demo listing")
        .clone();
    let mut agents = set
        .staff
        .iter()
        .filter(|m| m.wa_id.is_some() && m.is_active());
    let agent = agents.next().expect("a demo agent on WhatsApp");
    let second = agents.next().expect("two demo agents on WhatsApp");
    property.agent_id = Some(agent.id.clone());
    realestate
        .upsert_properties(std::slice::from_ref(&property))
        .await
        .unwrap();
    let mut owner = set
        .owners
        .iter()
        .find(|o| o.id == property.owner_id)
        .unwrap()
        .clone();
    owner.wa_id = Some(zaguan::domain::WaId::parse("34611400039").unwrap());
    realestate
        .upsert_owners(std::slice::from_ref(&owner))
        .await
        .unwrap();
    LoopListing {
        agent: agent.wa_id.as_ref().unwrap().as_str().to_owned(),
        second: (
            second.wa_id.as_ref().unwrap().as_str().to_owned(),
            second.id.clone(),
        ),
        owner: "34611400039".to_owned(),
        property,
    }
}

/// The ids of the buttons (or a template's quick replies) sent to `to` that start with
/// `prefix` and end with `suffix`, in order.
fn buttons_sent(service: &Service, to: &str, prefix: &str, suffix: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for message in service.messages_to(to) {
        let text = message.to_string();
        for (at, _) in text.match_indices(prefix) {
            let id: String = text[at..].chars().take_while(|c| *c != '"').collect();
            if id.ends_with(suffix) && !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

/// The first of [`buttons_sent`].
fn button_sent(service: &Service, to: &str, prefix: &str, suffix: &str) -> String {
    buttons_sent(service, to, prefix, suffix)
        .into_iter()
        .next()
        .unwrap_or_else(|| {
            panic!(
                "no button {prefix}…{suffix} sent to {to}: {:?}",
                service.messages_to(to)
            )
        })
}

/// A press of a template's quick reply (`button`) or of a text's reply button
/// (`interactive`), as WhatsApp delivers it.
async fn press(service: &mut Service, from: &str, name: &str, id: &str, template: bool) {
    let message = if template {
        json!({"type": "button", "button": {"payload": id, "text": "…"}})
    } else {
        json!({"type": "interactive", "interactive": {"type": "button_reply",
            "button_reply": {"id": id, "title": "…"}}})
    };
    service
        .customer_sends(from, name, message, chrono::Duration::zero())
        .await;
}

/// A customer books; the agent is told within 5 s; after the visit the agent presses «done»
/// on the template; the customer is asked and presses «Me interesa»; the owner's «¿cómo va mi
/// piso?» counts the visit and its feedback. The customer offers; the owner is told, counters
/// by message; the customer accepts with the button; the agent is told and the offer is
/// `accepted`. A second visit's no-show offers the customer another time once.
async fn the_loop_comes_back(
    service: &mut Service,
    realestate: &zaguan::realestate::MongoRealEstate,
    listing: &LoopListing,
) {
    use zaguan::realestate::SlotStore as _;
    let customer = "34611400030";
    let other = "34611400031";
    let (agent, owner, property) = (&listing.agent, &listing.owner, &listing.property);
    // Two visits a little ahead, of no length: over as soon as they start.
    let soon = Utc::now() + chrono::Duration::seconds(25);
    let slot = |n: i64, agent: &str| zaguan::realestate::Slot {
        id: format!("S-LOOP-{n}"),
        property_id: property.id.clone(),
        starts_at: soon + chrono::Duration::seconds(n),
        minutes: 0,
        agent: agent.to_owned(),
    };
    realestate
        .upsert_slots(&[slot(0, property.agent_id.as_deref().unwrap())])
        .await
        .unwrap();

    service
        .customer_says(
            customer,
            "Lucía",
            &format!("Quiero una visita al {}", property.id),
        )
        .await;
    service
        .wait_for_message(customer, "confirm:", Duration::from_secs(10))
        .await;
    service.customer_says(customer, "Lucía", "sí").await;
    service
        .wait_for_message(customer, "Visita reservada", Duration::from_secs(10))
        .await;
    let took = service
        .wait_for_message(agent, "Nueva visita", Duration::from_secs(5))
        .await;
    assert!(took < Duration::from_secs(5));
    eprintln!("the agent heard of the booking {took:?} after the customer read it was booked");
    assert!(
        service.mentions(agent, customer) >= 1,
        "the customer's number"
    );

    // The second visit, by another customer, booked before the first is over.
    let (second, second_id) = &listing.second;
    realestate
        .upsert_slots(&[slot(3, second_id)])
        .await
        .unwrap();
    service
        .customer_says(
            other,
            "Pedro",
            &format!("Quiero una visita al {}", property.id),
        )
        .await;
    service
        .wait_for_message(other, "confirm:", Duration::from_secs(10))
        .await;
    service.customer_says(other, "Pedro", "sí").await;
    service
        .wait_for_message(other, "Visita reservada", Duration::from_secs(10))
        .await;

    // The visit's time passes: the agent, who never wrote, gets the template with buttons.
    service
        .wait_for_message(agent, ":done", Duration::from_secs(60))
        .await;
    let done = button_sent(service, agent, "visit:A-", ":done");
    let first_question = service
        .messages_to(agent)
        .into_iter()
        .find(|m| m.to_string().contains(&done))
        .unwrap();
    assert_eq!(
        first_question["type"],
        json!("template"),
        "{first_question}"
    );
    press(service, agent, "Marta", &done, true).await;
    service
        .wait_for_message(agent, "Anotado", Duration::from_secs(10))
        .await;
    // The customer, inside their window, is asked with reply buttons.
    service
        .wait_for_message(customer, "visit_feedback:V-", Duration::from_secs(10))
        .await;
    let interested = button_sent(service, customer, "visit_feedback:V-", ":interested");
    press(service, customer, "Lucía", &interested, false).await;
    service
        .wait_for_message(customer, "te interesa", Duration::from_secs(10))
        .await;

    // The owner asks: one visit, and its feedback.
    service
        .customer_says(owner, "Propietaria", "Hola, ¿cómo va mi piso?")
        .await;
    service
        .wait_for_message(owner, "1 visitas", Duration::from_secs(10))
        .await;
    assert!(
        service.mentions(owner, "tras la visita, interesados: 1") == 1,
        "{:?}",
        service.texts_to(owner)
    );

    // The no-show of the second visit: its own question, pressed on a reply button now that
    // the agent is inside the window.
    service
        .wait_for_message(second, ":no_show", Duration::from_secs(30))
        .await;
    let no_show = button_sent(service, second, "visit:A-", ":no_show");
    assert!(no_show.contains("LOOP-3"), "{no_show}");
    press(service, second, "Javier", &no_show, true).await;
    service
        .wait_for_message(other, "otro día", Duration::from_secs(10))
        .await;

    // The offer.
    let offered = property.price / 10_000 * 9_000;
    let counter = property.price / 10_000 * 10_000;
    // «646.000», as the owner writes it and the customer reads it.
    let thousands = zaguan::realestate::tools::text::thousands;
    // A third customer, whose conversation is with no assistant yet.
    let customer = "34611400032";
    service
        .customer_says(
            customer,
            "Nuria",
            &format!("Ofrezco {offered} por el {}", property.id),
        )
        .await;
    service
        .wait_for_message(customer, "confirm:", Duration::from_secs(10))
        .await;
    service.customer_says(customer, "Nuria", "sí").await;
    service
        .wait_for_message(owner, "offer:F-", Duration::from_secs(10))
        .await;
    let counter_id = button_sent(service, owner, "offer:F-", ":counter");
    // The owner wrote a moment ago: inside the window, reply buttons.
    press(service, owner, "Propietaria", &counter_id, false).await;
    service
        .wait_for_message(owner, "importe", Duration::from_secs(10))
        .await;
    service
        .customer_says(owner, "Propietaria", &format!("{} €", thousands(counter)))
        .await;
    service
        .wait_for_message(customer, "counter:F-", Duration::from_secs(10))
        .await;
    assert!(service.mentions(customer, &thousands(counter)) >= 1);
    let accept = button_sent(service, customer, "counter:F-", ":accept");
    press(service, customer, "Nuria", &accept, false).await;
    service
        .wait_for_message(customer, "Aceptas la contraoferta", Duration::from_secs(10))
        .await;
    service
        .wait_for_message(agent, "Oferta aceptada", Duration::from_secs(10))
        .await;
    let (status, answered) = service
        .admin("GET", "/admin/offers?view=answered", None)
        .await;
    assert_eq!(status, 200, "{answered}");
    let offer = answered
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["wa_id"] == json!(customer))
        .expect("the customer's offer");
    assert_eq!(offer["status"], json!("accepted"), "{offer}");
    assert_eq!(offer["counter_amount"], json!(counter), "{offer}");

    // Each said once: the no-show's offer of another time, the agent's notice of the booking.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        service.mentions(other, "otro día"),
        1,
        "{:?}",
        service.texts_to(other)
    );
    assert_eq!(
        service.mentions(agent, "Oferta aceptada"),
        1,
        "{:?}",
        service.messages_to(agent)
    );
}

/// A listing in `city` added as `id`, news for every saved search there.
async fn new_listing(service: &Service, like: &Property, id: &str) {
    let mut fresh = serde_json::to_value(like).unwrap();
    fresh["id"] = json!(id);
    let fresh = fresh.as_object_mut().unwrap();
    fresh.remove("listed_at");
    fresh.remove("price_dropped_at");
    let (status, added) = service
        .admin("POST", "/admin/listings", Some(json!([fresh])))
        .await;
    assert_eq!(status, 201, "{added}");
}

/// Waits up to 10 s for `family{labels}` to pass `above`.
async fn wait_metric(service: &Service, family: &str, labels: &[&str], above: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if metric(&service.metrics().await, family, labels) > above {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{family}{labels:?} stayed at {above}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A listing alert queued, then put off by Meta (a 503 asking to come back in 12 s, past what
/// the sender waits in place); meanwhile the customer writes BAJA. When the retry comes the
/// governor asks again: the alert is not sent, and the BAJA's answer goes after it.
async fn an_opt_out_while_an_alert_waits_stops_it(service: &mut Service, set: &DemoSet) {
    let customer = "34611400062";
    let like = available(set).next().unwrap();
    service
        .customer_says(
            customer,
            "Lola",
            &format!("Avísame de pisos en {}", like.city),
        )
        .await;
    service
        .wait_for_message(customer, "Confírmalo", Duration::from_secs(5))
        .await;
    service.customer_says(customer, "Lola", "sí").await;
    service
        .wait_for_message(customer, "Aviso guardado", Duration::from_secs(5))
        .await;
    let stopped = &["purpose=\"listing_alert\"", "reason=\"opted_out\""];
    let before = metric(
        &service.metrics().await,
        "zaguan_outreach_stopped_at_send_total",
        stopped,
    );
    service.graph.answers_to.lock().unwrap().push((
        customer.to_owned(),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            graph_error(2, "Service temporarily unavailable"),
            Some(12),
        ),
    ));
    new_listing(service, like, "P-9921").await;
    service
        .wait_for_message(customer, "P-9921", Duration::from_secs(10))
        .await;
    let said = service.texts_to(customer).len();
    service.customer_says(customer, "Lola", "BAJA").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while metric(
        &service.metrics().await,
        "zaguan_outreach_stopped_at_send_total",
        stopped,
    ) <= before
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the alert's retry was never stopped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The BAJA is answered once the alert's turn has passed; the alert itself never again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while service.texts_to(customer).len() == said {
        assert!(std::time::Instant::now() < deadline, "BAJA unanswered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        service.mentions(customer, "P-9921"),
        1,
        "only the attempt Meta put off"
    );
}

/// Meta's signals through the webhook: a customer who stops marketing inside WhatsApp gets no
/// listing alert (a marketing template) and nothing in answer; resumed, the next one goes. A
/// restricted account and a flagged number hold the alerts, which go once both clear. A
/// message from a click-to-WhatsApp ad is answered once, its click id kept on the contact and
/// its headline in what the model reads.
async fn metas_signals_hold_marketing_and_keep_the_ad(service: &mut Service, set: &DemoSet) {
    let customer = "34611400060";
    let like = available(set).next().unwrap();
    let city = like.city.clone();
    service
        .customer_says(customer, "Lola", &format!("Avísame de pisos en {city}"))
        .await;
    service
        .wait_for_message(customer, "Confírmalo", Duration::from_secs(5))
        .await;
    service.customer_says(customer, "Lola", "sí").await;
    service
        .wait_for_message(customer, "Aviso guardado", Duration::from_secs(5))
        .await;
    let said = service.texts_to(customer).len();
    let preference = |value: &str, at: chrono::DateTime<Utc>| {
        json!({
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "34910000000", "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"wa_id": customer}],
            "user_preferences": [{"wa_id": customer, "detail": format!("User requested to {value} marketing messages"),
                "category": "marketing_messages", "value": value, "timestamp": at.timestamp()}],
        })
    };
    service
        .post_change("user_preferences", preference("stop", Utc::now()))
        .await;
    let (_, shown) = service
        .admin("GET", &format!("/admin/conversations/{customer}"), None)
        .await;
    assert!(shown["marketing_opted_out_at"].is_string(), "{shown}");
    assert!(shown["opted_out_at"].is_null(), "not BAJA: {shown}");

    let skipped = &["purpose=\"listing_alert\"", "form=\"marketing_opted_out\""];
    let before = metric(&service.metrics().await, "zaguan_outreach_total", skipped);
    new_listing(service, like, "P-9911").await;
    wait_metric(service, "zaguan_outreach_total", skipped, before).await;
    assert_eq!(service.mentions(customer, "P-9911"), 0);
    assert_eq!(
        service.texts_to(customer).len(),
        said,
        "nothing said in answer to a choice made in the app"
    );

    service
        .post_change(
            "user_preferences",
            preference("resume", Utc::now() + chrono::Duration::seconds(1)),
        )
        .await;
    new_listing(service, like, "P-9912").await;
    service
        .wait_for_message(customer, "P-9912", Duration::from_secs(10))
        .await;

    // Meta restricts the account and flags the number.
    service
        .post_change(
            "account_update",
            json!({"event": "ACCOUNT_RESTRICTION", "restriction_info": [{"restriction_type": "RESTRICTED_BIZ_INITIATED_MESSAGING",
                "expiration": (Utc::now() + chrono::Duration::days(1)).timestamp()}]}),
        )
        .await;
    service
        .post_change(
            "phone_number_quality_update",
            json!({"display_phone_number": "34910000000", "event": "FLAGGED", "current_limit": "TIER_1K"}),
        )
        .await;
    let text = service.metrics().await;
    assert_eq!(
        metric(
            &text,
            "zaguan_whatsapp_marketing_held",
            &["key=\"34910000000\""]
        ),
        1.0
    );
    let held = &["purpose=\"listing_alert\""];
    new_listing(service, like, "P-9913").await;
    // Two held rounds after the listing came in: the second began after it.
    let before = metric(&service.metrics().await, "zaguan_outreach_held_total", held);
    wait_metric(service, "zaguan_outreach_held_total", held, before + 1.0).await;
    assert_eq!(service.mentions(customer, "P-9913"), 0);
    service
        .post_change(
            "account_update",
            json!({"event": "ACCOUNT_RESTRICTION", "restriction_info": []}),
        )
        .await;
    service
        .post_change(
            "phone_number_quality_update",
            json!({"display_phone_number": "34910000000", "event": "UNFLAGGED", "current_limit": "TIER_1K"}),
        )
        .await;
    service
        .wait_for_message(customer, "P-9913", Duration::from_secs(10))
        .await;

    // A message from an ad.
    let clicked = "34611400061";
    let calls = service.model_calls();
    service
        .customer_sends(
            clicked,
            "Iker",
            json!({"type": "text", "text": {"body": "Hola, me interesa"},
                "referral": {"source_url": "https://fb.me/3Xh8", "source_id": "120210000042", "source_type": "ad",
                    "headline": "Ático con terraza en Chamberí", "body": "3 dormitorios, 2 baños",
                    "media_type": "image", "ctwa_clid": "ARAkLkA8rmlYjiiB"}}),
            chrono::Duration::zero(),
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while service.texts_to(clicked).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no answer to the ad's customer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(service.model_calls() > calls);
    let read = service
        .model
        .requests
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert!(
        read.to_string().contains("Ático con terraza en Chamberí"),
        "the ad's headline in what the model reads"
    );
    let (_, shown) = service
        .admin("GET", &format!("/admin/conversations/{clicked}"), None)
        .await;
    assert_eq!(
        shown["referral"]["ctwa_clid"],
        json!("ARAkLkA8rmlYjiiB"),
        "{shown}"
    );
    let (_, leads) = service
        .admin("GET", "/admin/export/leads?since=1d&format=jsonl", None)
        .await;
    assert!(
        leads.to_string().contains("ARAkLkA8rmlYjiiB"),
        "the click id in the leads export: {leads}"
    );
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_embedded_store_outreach_keeps_the_rules() {
    let set = demo();
    let mut service = start(None).await;
    baja_holds_the_alert_and_alta_lets_it_go(&mut service, &set).await;
    a_day_late_message_gets_only_a_template(&mut service, None).await;
    a_late_media_failure_falls_back_once(&mut service, &set).await;
    a_reaction_neither_answers_nor_confirms(&mut service, &set).await;
    consent_is_read_as_intent_not_words(&mut service).await;
    rate_limits_back_off_and_lose_nothing(&mut service).await;
    content_refusals_stay_with_their_conversation(&mut service).await;
    metas_signals_hold_marketing_and_keep_the_ad(&mut service, &set).await;
    an_opt_out_while_an_alert_waits_stops_it(&mut service, &set).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mongodb_outreach_keeps_the_rules() {
    let Some(db) = TestMongo::new().await else {
        return;
    };
    use zaguan::realestate::AppointmentStore as _;
    use zaguan::store::{ContactSeen, ConversationStore as _, UserStore as _};
    let realestate = zaguan::realestate::MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    let set = common::seeded_demo(&realestate).await;

    // An English customer who last wrote two days ago, with a visit tomorrow at 10:00.
    let english = zaguan::domain::WaId::parse("34611400008").unwrap();
    let tomorrow = Utc::now().with_timezone(&TZ).date_naive() + chrono::Days::new(1);
    let starts_at = {
        use chrono::TimeZone as _;
        TZ.from_local_datetime(&tomorrow.and_hms_opt(10, 0, 0).unwrap())
            .unwrap()
            .to_utc()
    };
    let property = available(&set).next().unwrap();
    realestate
        .save_appointment(&zaguan::realestate::Appointment {
            id: "A-EN-BIN".into(),
            property_id: property.id.clone(),
            slot_id: "S-EN-BIN".into(),
            wa_id: english.clone(),
            starts_at,
            status: zaguan::realestate::AppointmentStatus::Booked,
            created_at: Utc::now() - chrono::Duration::days(2),
            reminder_sent_at: None,
            moved_from: None,
            follow_up: Default::default(),
        })
        .await
        .unwrap();
    db.store
        .record_contact(&ContactSeen {
            wa_id: english.clone(),
            phone: Some(english.as_str().to_owned()),
            user_id: None,
            name: Some("Harry".into()),
            username: None,
            seen_at: Utc::now() - chrono::Duration::hours(48),
        })
        .await
        .unwrap();
    db.store
        .set_conversation_lang(&english, "en")
        .await
        .unwrap();
    // They stopped marketing inside WhatsApp: the reminder is utility, so it still goes.
    db.store
        .set_marketing_preference(&english, true, Utc::now() - chrono::Duration::hours(1))
        .await
        .unwrap();

    let listing = loop_listing(&realestate, &set).await;
    let mut service = start(Some(&db)).await;
    service
        .wait_for_message(english.as_str(), "visit_reminder", Duration::from_secs(10))
        .await;
    let reminder = service.messages_to(english.as_str()).remove(0);
    assert_eq!(reminder["type"], json!("template"), "{reminder}");
    assert_eq!(reminder["template"]["language"]["code"], json!("en"));
    // Its date written in English, the template's language («Thursday 3 December at 10:00»).
    let when = phrases::moment(Some("en"), starts_at.with_timezone(&TZ).naive_local());
    let texts: Vec<&str> = reminder["template"]["components"][0]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(texts.contains(&when.as_str()), "{when} in {reminder}");
    assert!(!texts.iter().any(|t| t.contains(" a las ")), "{reminder}");

    the_loop_comes_back(&mut service, &realestate, &listing).await;
    baja_holds_the_alert_and_alta_lets_it_go(&mut service, &set).await;
    a_day_late_message_gets_only_a_template(&mut service, Some(&db)).await;
    a_late_media_failure_falls_back_once(&mut service, &set).await;
    a_reaction_neither_answers_nor_confirms(&mut service, &set).await;
    consent_is_read_as_intent_not_words(&mut service).await;
    rate_limits_back_off_and_lose_nothing(&mut service).await;
    content_refusals_stay_with_their_conversation(&mut service).await;
    metas_signals_hold_marketing_and_keep_the_ad(&mut service, &set).await;
    an_opt_out_while_an_alert_waits_stops_it(&mut service, &set).await;
    drop(service);
    db.drop().await;
}

// ---------------------------------------------------------------------------------------------
// The first minute, billed: the README's journey in as few messages as say it.

/// The README's first minute as a model plays it: the primary assistant delegates the search,
/// the property assistant shows the tapped listing and its photos, the appointment assistant
/// gives slots and books the one tapped.
fn first_minute(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    let last = messages.last().unwrap();
    let role = last["role"].as_str().unwrap_or_default();
    let content = last["content"].as_str().unwrap_or_default();
    let call = |name: &str, args: Value| service::call(messages.len(), name, args);
    // The customer's words, or a tap handed to this assistant.
    let asked = role == "user" || content.starts_with("The conversation is now handled");
    // The listing the conversation is about: the last one any message named.
    let listing = || {
        messages
            .iter()
            .rev()
            .filter_map(|m| m["content"].as_str())
            .find(|text| text.contains("P-"))
            .map(reference)
            .expect("a listing named")
    };
    if system.contains("especialista en búsqueda") {
        if asked {
            call(
                "search_properties",
                json!({"city": "Valencia", "operation": "rent", "min_bedrooms": 2}),
            )
        } else {
            say("He encontrado estos pisos en Valencia.")
        }
    } else if system.contains("especialista en propiedades") {
        if asked {
            call("get_property_details", json!({"property_id": listing()}))
        } else if !content.starts_with("Se envían al usuario") {
            call("send_property_photos", json!({"property_id": listing()}))
        } else {
            say("Aquí tienes su ficha; te mando las fotos.")
        }
    } else if system.contains("especialista en citas") {
        let slots = messages
            .iter()
            .rev()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str())
            .find(|text| text.starts_with("Huecos libres"));
        if asked && slots.is_none() {
            call("list_available_slots", json!({"property_id": listing()}))
        } else if asked {
            let slot = slots
                .unwrap()
                .split_whitespace()
                .find(|w| w.starts_with("S-"))
                .unwrap()
                .trim_matches(|c: char| !c.is_ascii_alphanumeric());
            call("book_appointment", json!({"slot_id": slot}))
        } else if content.starts_with("Huecos libres") {
            say("Estos son los huecos libres para visitarlo.")
        } else if content.starts_with("Waiting for the user's confirmation") {
            say("¿Confirmas la visita? Pulsa el botón.")
        } else {
            say("Visita reservada.")
        }
    } else if role == "user" {
        call("ToSearcherAssistant", json!({"query": content}))
    } else {
        say("¿En qué te ayudo?")
    }
}

/// The same first minute through the model path: five customer messages, five WhatsApp
/// messages, each of a shape Meta documents, the photos one carousel with a tap to book.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_model_the_first_minute_is_five_messages_for_five() {
    let mut service = Service::start(Options {
        rules: first_minute,
        business: None,
        env: vec![("WHATSAPP_PHONE_NUMBER_ID", PHONE_NUMBER_ID.to_owned())],
        mongo: None,
    })
    .await;
    let customer = "34611400080";
    let sent = walk_the_first_minute(&mut service, customer).await;
    let book = &sent[1]["interactive"]["action"]["cards"][0]["action"]["buttons"][0]["quick_reply"];
    assert!(
        book["id"]
            .as_str()
            .unwrap()
            .starts_with("ask:appointment_assistant:P-"),
        "{book}"
    );
}

/// The README's first minute from `customer`: the search, a tap on the first listing, a tap
/// to book under its photos, a tap on the first slot, Confirm. Each answer is one message of
/// the shape it should be (a list, a carousel, a list, buttons), the booking makes five, and
/// each is a body Meta documents; the messages sent, in order.
async fn walk_the_first_minute(service: &mut Service, customer: &str) -> Vec<Value> {
    service
        .customer_says(
            customer,
            "Nuria",
            "busco piso de 2 habitaciones en Valencia para alquilar",
        )
        .await;
    let kind = |message: &Value| message["interactive"]["type"].clone();
    let sent = wait_messages(service, customer, 1).await;
    assert_eq!(kind(&sent[0]), json!("list"), "{:#}", sent[0]);
    let row = sent[0]["interactive"]["action"]["sections"][0]["rows"][0].clone();
    tap(service, customer, "list_reply", &row).await;
    let sent = wait_messages(service, customer, 2).await;
    assert_eq!(kind(&sent[1]), json!("carousel"), "{:#}", sent[1]);
    let book =
        sent[1]["interactive"]["action"]["cards"][0]["action"]["buttons"][0]["quick_reply"].clone();
    tap(service, customer, "button_reply", &book).await;
    let sent = wait_messages(service, customer, 3).await;
    assert_eq!(kind(&sent[2]), json!("list"), "the slots: {:#}", sent[2]);
    let slot = sent[2]["interactive"]["action"]["sections"][0]["rows"][0].clone();
    tap(service, customer, "list_reply", &slot).await;
    let sent = wait_messages(service, customer, 4).await;
    assert_eq!(kind(&sent[3]), json!("button"), "{:#}", sent[3]);
    let confirm = sent[3]["interactive"]["action"]["buttons"][0]["reply"].clone();
    tap(service, customer, "button_reply", &confirm).await;
    service
        .wait_for_message(customer, "Visita reservada", Duration::from_secs(10))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = service.messages_to(customer);
    assert_eq!(sent.len(), 5, "five messages for five: {sent:#?}");
    for body in &sent {
        let problems = zaguan::conversation_tests::payload::problems(body);
        assert!(problems.is_empty(), "{problems:?} in {body:#}");
    }
    sent
}

/// Waits up to 10 s for the `n`-th message to `to`; the messages so far.
async fn wait_messages(service: &Service, to: &str, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let messages = service.messages_to(to);
        if messages.len() >= n {
            return messages;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} messages to {to}: {messages:#?}",
            messages.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Taps `choice` (a row's or a button's `{id, title}`), as WhatsApp reports it.
async fn tap(service: &mut Service, from: &str, kind: &str, choice: &Value) {
    service
        .customer_sends(
            from,
            "Nuria",
            json!({"type": "interactive", "interactive": {"type": kind, kind: {"id": choice["id"], "title": choice["title"]}}}),
            chrono::Duration::zero(),
        )
        .await;
}

/// The README's first minute through the binary, without a model: five customer messages get
/// five WhatsApp messages, each of a shape Meta documents (a list with its intro, a carousel
/// of the listing's photos with a tap to book, the slots, the confirmation, the booking). A
/// carousel Meta refuses goes again as the text, the photos and the question, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_minute_is_five_messages_for_five() {
    let unset = |name: &'static str| (name, String::new());
    let mut service = Service::start(Options {
        rules,
        business: None,
        env: vec![
            unset("LLM_PRIMARY"),
            unset("LLM_FALLBACK"),
            unset("OPENAI_API_KEY"),
            unset("OPENAI_BASE_URL"),
            ("WHATSAPP_PHONE_NUMBER_ID", PHONE_NUMBER_ID.to_owned()),
        ],
        mongo: None,
    })
    .await;
    let customer = "34611400070";
    let sent = walk_the_first_minute(&mut service, customer).await;
    let body = |i: usize| {
        sent[i]["interactive"]["body"]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        body(0).contains("He encontrado"),
        "the intro is the list's body: {:#}",
        sent[0]
    );
    assert!(body(1).contains("P-1031"), "{:#}", sent[1]);
    assert!(body(2).contains("huecos"), "the slots: {:#}", sent[2]);
    assert!(
        body(3).starts_with("Antes de hacerlo"),
        "the intro is the confirmation's body"
    );

    // Meta refuses the carousel: its pieces go instead, once.
    *service.graph.refused_interactive.lock().unwrap() = Some("carousel".into());
    let other = "34611400071";
    service
        .customer_says(
            other,
            "Nuria",
            "busco piso de 2 habitaciones en Valencia para alquilar",
        )
        .await;
    let sent = wait_messages(&service, other, 1).await;
    let row = sent[0]["interactive"]["action"]["sections"][0]["rows"][0].clone();
    tap(&mut service, other, "list_reply", &row).await;
    let sent = wait_messages(&service, other, 7).await;
    let kinds: Vec<&str> = sent[1..]
        .iter()
        .map(|m| {
            m["interactive"]["type"]
                .as_str()
                .or(m["type"].as_str())
                .unwrap()
        })
        .collect();
    assert_eq!(
        kinds,
        ["carousel", "text", "image", "image", "image", "button"],
        "{sent:#?}"
    );
    let delivered: Vec<String> = service
        .graph
        .delivered()
        .into_iter()
        .filter(|d| d.to == other)
        .map(|d| d.kind)
        .collect();
    assert_eq!(
        delivered,
        [
            "interactive",
            "text",
            "image",
            "image",
            "image",
            "interactive"
        ],
        "the list, then the pieces"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        service.messages_to(other).len(),
        7,
        "the carousel is tried once"
    );
}
