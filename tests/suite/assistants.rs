//! The real-estate assistants end to end with a scripted LLM, the real tools and the demo data:
//! searching, booking with a confirmation (and two customers racing for one slot), the mortgage
//! simulation, owners' statistics, and roles enforced whatever the model calls.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::Utc;
use serde_json::{Value, json};
use zaguan::agents::AgentRegistry;
use zaguan::domain::{MessageRole, Role};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::roles::RoleDirectory;
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::context::RealEstateContext;
use zaguan::realestate::roles::DataRoles;
use zaguan::realestate::{AppointmentStatus, MemoryRealEstate, RealEstateStore, demo, tools};
use zaguan::store::{InboxEntry, InboxStatus, MemoryStore, Store};

/// One customer talking to an engine over shared stores.
struct Customer {
    engine: Engine,
    store: Arc<dyn Store>,
    llm: Arc<ScriptedLlm>,
    wa_id: WaId,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

struct World {
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
}

impl World {
    async fn new() -> Self {
        let realestate = Arc::new(MemoryRealEstate::new());
        demo::seed(realestate.as_ref(), &demo_set_today())
            .await
            .unwrap();
        Self {
            store: Arc::new(MemoryStore::new()),
            realestate,
        }
    }

    async fn customer(&self, wa_id: &str, role: Role, llm: ScriptedLlm) -> Customer {
        let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
        let llm = Arc::new(llm);
        let engine = Engine::new(
            self.store.clone(),
            llm.clone(),
            Arc::new(registry),
            Arc::new(tools::registry(self.realestate.clone())),
            EngineSettings::default(),
        );
        let wa_id = WaId::parse(wa_id).unwrap();
        self.store.set_user_role(&wa_id, role).await.unwrap();
        Customer {
            engine,
            store: self.store.clone(),
            llm,
            wa_id,
        }
    }
}

impl World {
    /// Someone writing in with no role set: the engine gives them the business data's, reading
    /// the owners' and staff's numbers again every `refresh`.
    async fn newcomer(&self, wa_id: &str, llm: ScriptedLlm, refresh: Duration) -> Customer {
        let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
        let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
        let llm = Arc::new(llm);
        let roles =
            RoleDirectory::refreshed_every(Arc::new(DataRoles(self.realestate.clone())), refresh);
        let engine = Engine::new(
            self.store.clone(),
            llm.clone(),
            Arc::new(registry),
            Arc::new(tools::registry(self.realestate.clone())),
            EngineSettings::default(),
        )
        .with_roles(Arc::new(roles))
        .with_context(Arc::new(RealEstateContext::new(
            self.realestate.clone(),
            chrono_tz::Europe::Madrid,
        )));
        Customer {
            engine,
            store: self.store.clone(),
            llm,
            wa_id: WaId::parse(wa_id).unwrap(),
        }
    }
}

impl Customer {
    async fn send(&self, kind: &str, text: Option<&str>, payload: Value) -> Vec<String> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let entry = InboxEntry {
            wamid: WaMessageId::parse(&format!("wamid.A{n}")).unwrap(),
            wa_id: self.wa_id.clone(),
            phone_number_id: "109876543210".into(),
            kind: kind.into(),
            text: text.map(str::to_owned),
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
        let ids: Vec<WaMessageId> = open.iter().map(|e| e.wamid.clone()).collect();
        let outcome = self.engine.run_turn(&self.wa_id, &open).await.unwrap();
        self.store
            .set_inbox_status(&ids, InboxStatus::Done)
            .await
            .unwrap();
        outcome.parts
    }

    async fn say(&self, text: &str) -> Vec<String> {
        self.send(
            "text",
            Some(text),
            json!({"type": "text", "text": {"body": text}}),
        )
        .await
    }

    /// Presses the button titled `title` of the last message that had buttons.
    async fn press(&self, title: &str) -> Vec<String> {
        let id = self.button(title).await;
        self.press_id(&id, title).await
    }

    /// The id of the button titled `title` of the last message that had buttons.
    async fn button(&self, title: &str) -> String {
        let outbox = self.store.unsent_outbox(&self.wa_id).await.unwrap();
        let with_buttons = outbox.iter().rev().find(|e| !e.buttons.is_empty());
        let buttons = &with_buttons.expect("a message with buttons").buttons;
        let button = buttons.iter().find(|b| b.title == title).unwrap();
        button.id.clone()
    }

    /// Presses a reply button with this id.
    async fn press_id(&self, id: &str, title: &str) -> Vec<String> {
        self.send(
            "interactive",
            Some(title),
            json!({"type": "interactive", "interactive": {"type": "button_reply",
                   "button_reply": {"id": id, "title": title}}}),
        )
        .await
    }

    /// The tool messages of the conversation, oldest first.
    async fn tool_results(&self) -> Vec<String> {
        self.store
            .recent_messages(&self.wa_id, 500)
            .await
            .unwrap()
            .into_iter()
            .filter(|m| m.message.role == MessageRole::Tool)
            .map(|m| m.message.content)
            .collect()
    }

    async fn last_tool_result(&self) -> String {
        self.tool_results().await.pop().unwrap_or_default()
    }
}

#[tokio::test]
async fn a_search_with_filters_returns_the_matching_demo_properties() {
    let world = World::new().await;
    let all = world
        .realestate
        .properties(&zaguan::realestate::PropertyFilter {
            city: Some("Valencia".into()),
            available_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut expected: Vec<_> = all
        .iter()
        .filter(|p| {
            p.operation == zaguan::realestate::Operation::Sale
                && p.bedrooms >= 2
                && p.price <= 400_000
        })
        .collect();
    expected.sort_by_key(|p| (p.price, p.id.clone()));
    assert!(!expected.is_empty(), "the demo set has such flats");

    let customer = world
        .customer(
            "34611000101",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "searcher_assistant",
                    "search_properties",
                    json!({"city": "valencia", "operation": "sale", "min_bedrooms": 2,
                           "max_price": 400000, "page_size": 10}),
                )
                .says(
                    "searcher_assistant",
                    "Estas son las opciones que tengo en Valencia.",
                ),
        )
        .await;
    // "busco" sends it straight to the searcher.
    customer
        .say("Busco piso en Valencia de 2 habitaciones, hasta 400.000")
        .await;
    let result = customer.last_tool_result().await;
    assert!(
        result.starts_with(&format!("{} propiedades disponibles", expected.len())),
        "{result}"
    );
    let listed: Vec<&str> = result
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with(|c: char| c.is_ascii_digit()))
        .map(|line| {
            line.split(" · ")
                .next()
                .unwrap()
                .split(". ")
                .nth(1)
                .unwrap()
        })
        .collect();
    let wanted: Vec<&str> = expected.iter().take(10).map(|p| p.id.as_str()).collect();
    assert_eq!(listed, wanted, "cheapest first, only the matching ones");
}

/// The first property with at least one free slot, and that slot.
async fn a_free_slot(world: &World) -> (String, String) {
    let properties = world
        .realestate
        .properties(&zaguan::realestate::PropertyFilter {
            available_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    for property in properties {
        let slots = world
            .realestate
            .slots(
                &property.id,
                Utc::now() + chrono::Duration::hours(1),
                Utc::now() + chrono::Duration::days(14),
            )
            .await
            .unwrap();
        if let Some(slot) = slots.first() {
            return (property.id, slot.id.clone());
        }
    }
    panic!("the demo set has free slots");
}

#[tokio::test]
async fn booking_asks_for_confirmation_and_two_customers_cannot_take_one_slot() {
    let world = World::new().await;
    let (property, slot) = a_free_slot(&world).await;
    let booking = |who: &str| {
        ScriptedLlm::new()
            .calls(
                "appointment_assistant",
                "list_available_slots",
                json!({"property_id": property}),
            )
            .says(
                "appointment_assistant",
                &format!("{who}, ¿te va bien el primer hueco?"),
            )
            .calls(
                "appointment_assistant",
                "book_appointment",
                json!({"slot_id": slot}),
            )
            .says(
                "appointment_assistant",
                "Te reservo la visita en cuanto lo confirmes.",
            )
            .says("appointment_assistant", "Resultado recibido.")
    };
    let ana = world
        .customer("34611000201", Role::Prospect, booking("Ana"))
        .await;
    let luis = world
        .customer("34611000202", Role::Prospect, booking("Luis"))
        .await;

    // Both see the slot and ask to book it: nothing is booked yet, each is asked to confirm.
    for customer in [&ana, &luis] {
        customer
            .say(&format!("Quiero agendar una visita al {property}"))
            .await;
        assert!(customer.last_tool_result().await.contains(&slot));
        let parts = customer.say("Sí, el primero").await;
        assert!(
            customer
                .last_tool_result()
                .await
                .starts_with("Waiting for the user's confirmation"),
            "{:?}",
            customer.tool_results().await
        );
        let conversation = customer
            .store
            .conversation(&customer.wa_id)
            .await
            .unwrap()
            .unwrap();
        let pending = conversation.pending_action.expect("a pending action");
        assert_eq!(pending.tool, "book_appointment");
        // The summary goes out last, with the buttons.
        let outbox = customer.store.unsent_outbox(&customer.wa_id).await.unwrap();
        let last = outbox.last().unwrap();
        let titles: Vec<&str> = last.buttons.iter().map(|b| b.title.as_str()).collect();
        assert_eq!(titles, ["Confirmar", "Cancelar"]);
        let ids: Vec<String> = last.buttons.iter().map(|b| b.id.clone()).collect();
        assert_eq!(
            ids,
            [
                format!("confirm:{}", pending.id),
                format!("cancel:{}", pending.id)
            ]
        );
        assert!(last.body.contains(&property), "{}", last.body);
        // Bundled: the words before it became the button message's opening lines.
        assert!(
            last.body.ends_with(parts.last().unwrap().as_str()),
            "{}",
            last.body
        );
    }
    assert!(
        world
            .realestate
            .appointments_of(&ana.wa_id)
            .await
            .unwrap()
            .is_empty(),
        "nothing booked before the confirmation"
    );

    // Ana confirms first and gets it; Luis confirms second and is told it is gone.
    ana.press("Confirmar").await;
    assert!(
        ana.last_tool_result().await.starts_with("Visita reservada"),
        "{}",
        ana.last_tool_result().await
    );
    let booked = world.realestate.appointments_of(&ana.wa_id).await.unwrap();
    assert_eq!(booked.len(), 1);
    assert_eq!(
        (booked[0].slot_id.as_str(), booked[0].status),
        (slot.as_str(), AppointmentStatus::Booked)
    );
    luis.press("Confirmar").await;
    let refusal = luis.last_tool_result().await;
    assert!(refusal.contains("no longer available"), "{refusal}");
    assert!(
        world
            .realestate
            .appointments_of(&luis.wa_id)
            .await
            .unwrap()
            .is_empty()
    );
    // The slot is gone for the next customer.
    let marta = world
        .customer(
            "34611000203",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "appointment_assistant",
                    "list_available_slots",
                    json!({"property_id": property, "days": 21}),
                )
                .says("appointment_assistant", "Estos son los huecos."),
        )
        .await;
    marta.say("Quiero agendar una visita").await;
    assert!(!marta.last_tool_result().await.contains(&slot));
    assert_eq!(ana.llm.remaining(), 0);
}

#[tokio::test]
async fn a_declined_or_forgotten_action_is_dropped() {
    let world = World::new().await;
    let (_, slot) = a_free_slot(&world).await;
    let customer = world
        .customer(
            "34611000301",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "appointment_assistant",
                    "book_appointment",
                    json!({"slot_id": slot}),
                )
                .says("appointment_assistant", "Confírmamelo con el botón.")
                .says("appointment_assistant", "De acuerdo, no reservo nada.")
                .calls(
                    "appointment_assistant",
                    "book_appointment",
                    json!({"slot_id": slot}),
                )
                .says("appointment_assistant", "Confírmamelo con el botón.")
                .says("appointment_assistant", "Claro, te cuento."),
        )
        .await;
    customer.say("Quiero agendar una visita").await;
    customer.press("Cancelar").await;
    assert!(
        customer
            .last_tool_result()
            .await
            .starts_with("The user declined")
    );
    customer.say("Mejor agendar otra cita").await;
    // A new topic drops the pending action: nothing is booked.
    customer
        .say("¿Y cuánto cuesta la comunidad de ese piso?")
        .await;
    let conversation = customer
        .store
        .conversation(&customer.wa_id)
        .await
        .unwrap()
        .unwrap();
    assert!(conversation.pending_action.is_none());
    // The assistant is told what was pending and that nothing was done.
    let told = customer.last_tool_result().await;
    assert!(told.starts_with("Not executed"), "{told}");
    assert!(
        world
            .realestate
            .appointments_of(&customer.wa_id)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Two free slots of one property.
async fn two_free_slots(world: &World) -> (String, String, String) {
    let properties = world
        .realestate
        .properties(&zaguan::realestate::PropertyFilter {
            available_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    for property in properties {
        let slots = world
            .realestate
            .slots(
                &property.id,
                Utc::now() + chrono::Duration::hours(1),
                Utc::now() + chrono::Duration::days(14),
            )
            .await
            .unwrap();
        if let [first, second, ..] = slots.as_slice() {
            return (property.id, first.id.clone(), second.id.clone());
        }
    }
    panic!("the demo set has properties with two free slots");
}

/// «Sí, pero el otro» is not a yes: the assistant is told, books the other slot, and that is
/// confirmed anew. The first question's Confirm button, pressed late, confirms nothing: the user
/// is told it is no longer valid and shown what is pending, with its own buttons. A plain
/// typed yes then confirms it.
#[tokio::test]
async fn a_yes_with_a_change_or_an_old_button_never_confirms_as_is() {
    let world = World::new().await;
    let (_, first, second) = two_free_slots(&world).await;
    let customer = world
        .customer(
            "34611000311",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "appointment_assistant",
                    "book_appointment",
                    json!({"slot_id": first}),
                )
                .says("appointment_assistant", "Confírmamelo con el botón.")
                .calls(
                    "appointment_assistant",
                    "book_appointment",
                    json!({"slot_id": second}),
                )
                .says("appointment_assistant", "Entonces el otro: confírmamelo.")
                .says("appointment_assistant", "¡Hecho! Te espero allí."),
        )
        .await;
    let pending_id = || async {
        let conversation = customer.store.conversation(&customer.wa_id).await.unwrap();
        conversation.unwrap().pending_action.map(|a| a.id)
    };
    customer.say("Quiero agendar una visita").await;
    let first_id = pending_id().await.expect("the first slot awaits a yes");
    let old_confirm = customer.button("Confirmar").await;
    assert_eq!(old_confirm, format!("confirm:{first_id}"));

    customer.say("Sí, pero mejor el otro hueco").await;
    let tools = customer.tool_results().await;
    let told = &tools[tools.len() - 2];
    assert!(told.starts_with("Not executed"), "{tools:?}");
    let second_id = pending_id().await.expect("the second slot awaits a yes");
    assert_ne!(second_id, first_id);
    let booked = || async {
        world
            .realestate
            .appointments_of(&customer.wa_id)
            .await
            .unwrap()
    };
    assert!(
        booked().await.is_empty(),
        "a yes with a change booked something"
    );

    // The first question's button, pressed now: nothing runs, no model is asked.
    let before = customer.llm.remaining();
    let parts = customer.press_id(&old_confirm, "Confirmar").await;
    assert!(
        parts[0].starts_with("Esa confirmación ya no es válida"),
        "{parts:?}"
    );
    let conversation = customer.store.conversation(&customer.wa_id).await.unwrap();
    let summary = conversation.unwrap().pending_action.unwrap().summary;
    assert_eq!(parts.last(), Some(&summary), "{parts:?}");
    assert_eq!(customer.llm.remaining(), before);
    assert!(booked().await.is_empty(), "an old button booked something");
    assert_eq!(pending_id().await, Some(second_id.clone()));
    assert_eq!(
        customer.button("Confirmar").await,
        format!("confirm:{second_id}"),
        "shown again with its own buttons"
    );

    customer.say("Vale 👍").await;
    let booked = booked().await;
    assert_eq!(booked.len(), 1);
    assert_eq!(booked[0].slot_id, second);
    assert_eq!(pending_id().await, None);
    assert_eq!(customer.llm.remaining(), 0);

    // Any confirmation button now: nothing is pending.
    let parts = customer.press_id(&old_confirm, "Confirmar").await;
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert!(parts[0].contains("no hay nada pendiente"), "{parts:?}");
    assert_eq!(
        world
            .realestate
            .appointments_of(&customer.wa_id)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn the_mortgage_simulation_is_quoted_to_the_cent() {
    let world = World::new().await;
    let customer = world
        .customer(
            "34611000401",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "mortgage_loan_assistant",
                    "simulate_mortgage",
                    json!({"price": 250000, "down_payment": 50000, "years": 25,
                           "annual_rate_percent": 3.0}),
                )
                .says(
                    "mortgage_loan_assistant",
                    "Te saldría por unos 948 € al mes.",
                ),
        )
        .await;
    customer
        .say("¿Cuánto me saldría la cuota de la hipoteca?")
        .await;
    // 200,000 € at 3 % over 25 years: 948.42 €/month (French amortisation, by hand).
    let result = customer.last_tool_result().await;
    assert!(result.contains("948,42 €"), "{result}");
}

#[tokio::test]
async fn an_owner_sees_only_their_listings_and_a_prospect_gets_an_error() {
    let world = World::new().await;
    let set = demo::demo_set(
        Utc::now()
            .with_timezone(&chrono_tz::Europe::Madrid)
            .date_naive(),
        chrono_tz::Europe::Madrid,
    );
    let owner = set
        .owners
        .iter()
        .find(|o| o.wa_id.is_some())
        .expect("a demo owner on WhatsApp");
    let own: Vec<&str> = set
        .properties
        .iter()
        .filter(|p| p.owner_id == owner.id)
        .map(|p| p.id.as_str())
        .collect();
    let customer = world
        .customer(
            owner.wa_id.as_ref().unwrap().as_str(),
            Role::Owner,
            ScriptedLlm::new()
                .calls("owner_info_assistant", "owner_listing_stats", json!({}))
                .says("owner_info_assistant", "Así van tus inmuebles."),
        )
        .await;
    customer.say("¿Cómo va la venta de mi piso?").await;
    let result = customer.last_tool_result().await;
    let listed: Vec<&str> = result
        .lines()
        .skip(1)
        .map(|line| line.trim_start_matches("- ").split(" · ").next().unwrap())
        .collect();
    assert_eq!(listed, own, "{result}");

    // A prospect: the model calls the owner tool anyway (it is not even offered) → an error.
    let prospect = world
        .customer(
            "34611000501",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "visit_tracker_assistant",
                    "owner_listing_stats",
                    json!({"owner_id": owner.id}),
                )
                .says("visit_tracker_assistant", "No puedo darte esos datos."),
        )
        .await;
    prospect.say("¿Cuántas visitas ha tenido el anuncio?").await;
    let request = &prospect.llm.requests()[0];
    assert!(
        !request
            .tools
            .iter()
            .any(|t| t.name == "owner_listing_stats"),
        "not offered to a prospect"
    );
    let refusal = prospect.last_tool_result().await;
    assert!(refusal.starts_with("Error:"), "{refusal}");
    assert!(!refusal.contains(&owner.name), "no data leaked: {refusal}");
}

#[tokio::test]
async fn media_without_a_caption_gets_a_polite_answer_without_the_llm() {
    let world = World::new().await;
    let customer = world
        .customer("34611000601", Role::Prospect, ScriptedLlm::new())
        .await;
    let parts = customer
        .send(
            "image",
            None,
            json!({"type": "image", "image": {"id": "123"}}),
        )
        .await;
    assert_eq!(parts.len(), 1);
    assert!(parts[0].contains("imágenes"), "{parts:?}");
    assert!(customer.llm.requests().is_empty());
}

#[tokio::test]
async fn a_shared_location_feeds_a_near_me_search() {
    let world = World::new().await;
    let customer = world
        .customer(
            "34611000701",
            Role::Prospect,
            ScriptedLlm::new()
                .says("primary_assistant", "¡Gracias por la ubicación!")
                .calls(
                    "searcher_assistant",
                    "search_properties",
                    json!({"near_me": true, "max_distance_km": 2}),
                )
                .says("searcher_assistant", "Esto es lo que hay cerca."),
        )
        .await;
    // Puerta del Sol, Madrid.
    customer
        .send(
            "location",
            Some("40.4169, -3.7035"),
            json!({"type": "location", "location": {"latitude": 40.4169, "longitude": -3.7035}}),
        )
        .await;
    customer.say("Busco algo cerca de mí").await;
    let result = customer.last_tool_result().await;
    assert!(result.contains(", Madrid)"), "{result}");
    assert!(
        !result.contains("Valencia") && !result.contains("Sevilla"),
        "{result}"
    );
}

#[tokio::test]
async fn the_property_assistant_answers_from_the_listing() {
    let world = World::new().await;
    let customer = world
        .customer(
            "34611000901",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "property_assistant",
                    "get_property_details",
                    json!({"property_id": "P-1001"}),
                )
                .says("property_assistant", "Sí, tiene terraza."),
        )
        .await;
    customer
        .say("¿Cuántos metros tiene el piso de referencia P-1001?")
        .await;
    let card = customer.last_tool_result().await;
    let listing = world.realestate.property("P-1001").await.unwrap().unwrap();
    assert!(
        card.starts_with(&format!("P-1001 — {}", listing.title)),
        "{card}"
    );
    assert!(card.contains(&format!("{} m²", listing.area_m2)), "{card}");
    assert!(card.contains(&listing.address), "{card}");
}

/// The demo set as of today (what `World::new` seeds).
fn demo_set_today() -> demo::DemoSet {
    let today = Utc::now()
        .with_timezone(&chrono_tz::Europe::Madrid)
        .date_naive();
    demo::demo_set(today, chrono_tz::Europe::Madrid)
}

/// A demo property on sale that takes offers.
fn for_sale(set: &demo::DemoSet) -> &zaguan::realestate::Property {
    set.properties
        .iter()
        .find(|p| {
            p.status == zaguan::realestate::ListingStatus::Available
                && p.operation == zaguan::realestate::Operation::Sale
        })
        .expect("a demo property for sale")
}

#[tokio::test]
async fn visit_feedback_and_offers_are_recorded_only_once_confirmed() {
    let world = World::new().await;
    let set = demo_set_today();
    let visit = set
        .visits
        .iter()
        .find(|v| v.feedback.is_none())
        .expect("a demo visit without feedback");
    let property = for_sale(&set);
    let offer = property.price * 95 / 100;
    let customer = world
        .customer(
            visit.wa_id.as_str(),
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "visit_tracker_assistant",
                    "record_visit_feedback",
                    json!({"visit_id": visit.id, "outcome": "interested", "rating": 4,
                           "feedback": "Muy luminoso, la cocina algo pequeña"}),
                )
                .says("visit_tracker_assistant", "¿Lo guardo?")
                .says("visit_tracker_assistant", "¡Gracias por tu opinión!")
                // No LLM call to leave the visit tracker for the offers: the fast path's
                // router hands the conversation over in the same turn.
                .calls(
                    "prospect_offer_assistant",
                    "submit_offer",
                    json!({"property_id": property.id, "amount": offer, "conditions": "sujeta a hipoteca"}),
                )
                .says("prospect_offer_assistant", "Confírmala con el botón.")
                .says("prospect_offer_assistant", "Oferta enviada."),
        )
        .await;
    customer.say("Te doy mi opinión sobre el piso que vi").await;
    let before = world.realestate.visits_of(&customer.wa_id).await.unwrap();
    assert!(
        before
            .iter()
            .any(|v| v.id == visit.id && v.feedback.is_none()),
        "not before the yes"
    );
    customer.say("sí").await;
    let after = world.realestate.visits_of(&customer.wa_id).await.unwrap();
    let saved = after.iter().find(|v| v.id == visit.id).unwrap();
    assert_eq!(saved.rating, Some(4));
    assert_eq!(
        saved.feedback.as_deref(),
        Some("Muy luminoso, la cocina algo pequeña")
    );

    let offers_before = world
        .realestate
        .offers_of(&customer.wa_id)
        .await
        .unwrap()
        .len();
    customer
        .say("Quiero hacer una oferta por otra vivienda")
        .await;
    assert_eq!(
        world
            .realestate
            .offers_of(&customer.wa_id)
            .await
            .unwrap()
            .len(),
        offers_before
    );
    customer.press("Confirmar").await;
    let offers = world.realestate.offers_for(&property.id).await.unwrap();
    let made = offers
        .iter()
        .find(|o| o.wa_id == customer.wa_id && o.amount == offer)
        .expect("the offer is recorded");
    assert_eq!(made.conditions.as_deref(), Some("sujeta a hipoteca"));
    assert_eq!(customer.llm.remaining(), 0);
}

/// The role is checked again when a confirmed action runs: a number that stopped being a
/// prospect between the question and the yes (an operator made it an owner) cannot make the
/// offer it asked for.
#[tokio::test]
async fn a_confirmed_action_is_checked_against_the_role_when_it_runs() {
    let world = World::new().await;
    let set = demo_set_today();
    let property = for_sale(&set);
    let customer = world
        .customer(
            "34611000301",
            Role::Prospect,
            ScriptedLlm::new()
                .calls(
                    "prospect_offer_assistant",
                    "submit_offer",
                    json!({"property_id": property.id, "amount": property.price * 9 / 10}),
                )
                .says("prospect_offer_assistant", "Confírmala con el botón.")
                .says("prospect_offer_assistant", "No he podido enviarla."),
        )
        .await;
    // The keywords route this message to the offer assistant without the primary's LLM.
    customer.say("Quiero hacer una oferta").await;
    let conversation = customer.store.conversation(&customer.wa_id).await.unwrap();
    assert_eq!(
        conversation.unwrap().pending_action.unwrap().tool,
        "submit_offer"
    );
    world
        .store
        .set_user_role(&customer.wa_id, Role::Owner)
        .await
        .unwrap();
    customer.press("Confirmar").await;
    assert_eq!(
        customer.last_tool_result().await,
        "Error: the tool submit_offer is not available for this user."
    );
    assert!(
        world
            .realestate
            .offers_for(&property.id)
            .await
            .unwrap()
            .iter()
            .all(|o| o.wa_id != customer.wa_id),
        "no offer recorded"
    );
    assert_eq!(customer.llm.remaining(), 0);
}

#[tokio::test]
async fn wrong_arguments_get_messages_the_model_can_act_on() {
    let world = World::new().await;
    let registry = tools::registry(world.realestate.clone());
    let context = zaguan::engine::ToolContext::new(
        WaId::parse("34611000999").unwrap(),
        Role::Prospect,
        Utc::now(),
    );
    let run = |name: &str, args: Value| {
        let call = zaguan::domain::ToolCall {
            id: "call_1".into(),
            name: name.into(),
            args: args.into(),
        };
        let (registry, context) = (&registry, &context);
        async move {
            registry
                .run(&call, context, std::time::Duration::from_secs(5))
                .await
                .text
        }
    };
    let cases = [
        (
            "list_available_slots",
            json!({"property_id": "P-1001", "from_date": "27/11/2026"}),
            "YYYY-MM-DD",
        ),
        (
            "list_available_slots",
            json!({"property_id": "P-1001", "from_date": "2020-01-01"}),
            "in the past",
        ),
        (
            "get_property_details",
            json!({"property_id": "P-9999"}),
            "use an id from search_properties",
        ),
        (
            "get_property_details",
            json!({}),
            "missing field `property_id`",
        ),
        (
            "search_properties",
            json!({"min_price": 500000, "max_price": 100000}),
            "above max_price",
        ),
        (
            "search_properties",
            json!({"near_me": true}),
            "has not shared a location",
        ),
        (
            "simulate_mortgage",
            json!({"price": 300000, "years": 60}),
            "years",
        ),
        (
            "book_appointment",
            json!({"slot_id": "S-nope"}),
            "use an id from list_available_slots",
        ),
        (
            "record_visit_feedback",
            json!({"visit_id": "V-nope", "rating": 4}),
            "list_my_visits",
        ),
        (
            "cancel_appointment",
            json!({"appointment_id": "A-nope"}),
            "list_my_appointments",
        ),
        (
            "submit_offer",
            json!({"property_id": "P-1001", "amount": 10}),
            "below 50 %",
        ),
    ];
    for (tool, args, expected) in cases {
        let text = run(tool, args.clone()).await;
        assert!(
            text.starts_with("Error:") && text.contains(expected),
            "{tool} {args}: {text}"
        );
    }
}

/// An owner's number is an owner from the first message, a staff member's an agent; when the
/// data moves the number, so does the role; a role an operator set stays until handed back.
#[tokio::test]
async fn roles_come_from_the_business_data_unless_an_operator_set_one() {
    let world = World::new().await;
    let set = demo_set_today();
    let owner = set.owners_on_whatsapp().next().unwrap().clone();
    let owner_wa = owner.wa_id.clone().unwrap();
    let agent_wa = set.staff[0].wa_id.clone().unwrap();
    let refresh = Duration::from_millis(100);
    let user = |wa_id: WaId| {
        let store = world.store.clone();
        async move { store.user(&wa_id).await.unwrap().unwrap() }
    };

    let carmen = world
        .newcomer(
            owner_wa.as_str(),
            ScriptedLlm::new()
                .says("only_owner_assistant", "Hola, ¿qué tal van tus visitas?")
                .says("primary_assistant", "Hola, ¿en qué te ayudo?")
                .says("primary_assistant", "Hola de nuevo.")
                .says("only_owner_assistant", "Hola otra vez."),
            refresh,
        )
        .await;
    assert_eq!(
        carmen.say("Hola").await,
        ["Hola, ¿qué tal van tus visitas?"]
    );
    let first = carmen.llm.requests()[0].clone();
    assert_eq!(first.agent, "only_owner_assistant");
    assert!(
        first.system.text().contains("Rol: owner"),
        "{}",
        first.system
    );
    let recorded = user(owner_wa.clone()).await;
    assert_eq!(recorded.role, Role::Owner);
    assert_eq!(recorded.role_set_by.as_deref(), Some("data"));

    // A staff member's number talks to the primary assistant as a colleague.
    let lucia = world
        .newcomer(
            agent_wa.as_str(),
            ScriptedLlm::new().says("primary_assistant", "Hola, compañera."),
            refresh,
        )
        .await;
    lucia.say("Hola, soy Lucía").await;
    assert_eq!(user(agent_wa.clone()).await.role, Role::Agent);
    assert!(lucia.llm.requests()[0].system.text().contains("Rol: agent"));

    // The owner's record loses the number: a prospect from the next refresh on.
    world
        .realestate
        .upsert_owners(&[zaguan::realestate::Owner {
            wa_id: None,
            ..owner.clone()
        }])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    carmen.say("Hola").await;
    assert_eq!(carmen.llm.requests()[1].agent, "primary_assistant");
    assert_eq!(user(owner_wa.clone()).await.role, Role::Prospect);

    // An operator makes her a prospect by hand: the number coming back changes nothing...
    world
        .realestate
        .upsert_owners(std::slice::from_ref(&owner))
        .await
        .unwrap();
    zaguan::admin::operations::set_role(
        world.store.as_ref(),
        owner_wa.as_str(),
        "prospect",
        Some("Ana"),
    )
    .await
    .ok()
    .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    carmen.say("Hola").await;
    assert_eq!(carmen.llm.requests()[2].agent, "primary_assistant");
    let pinned = user(owner_wa.clone()).await;
    assert_eq!(
        (pinned.role, pinned.role_set_by.as_deref()),
        (Role::Prospect, Some("Ana"))
    );
    // ...until she hands it back to the data.
    zaguan::admin::operations::set_role(
        world.store.as_ref(),
        owner_wa.as_str(),
        "auto",
        Some("Ana"),
    )
    .await
    .ok()
    .unwrap();
    carmen.say("Hola").await;
    assert_eq!(carmen.llm.requests()[3].agent, "only_owner_assistant");
    assert_eq!(user(owner_wa).await.role, Role::Owner);
    assert_eq!(carmen.llm.remaining(), 0);
}

/// The seed's context: the prompts carry the user's data — an owner's listings, a customer's
/// open offers and, once a visit is confirmed, that appointment at the very next turn.
#[tokio::test]
async fn the_prompts_carry_the_users_listings_appointments_and_offers() {
    let world = World::new().await;
    let set = demo_set_today();
    let owner = set.owners_on_whatsapp().next().unwrap();
    let listing = set.properties_of(&owner.id).next().unwrap();
    let carmen = world
        .newcomer(
            owner.wa_id.as_ref().unwrap().as_str(),
            ScriptedLlm::new().says("only_owner_assistant", "Hola."),
            Duration::from_secs(60),
        )
        .await;
    carmen.say("Hola").await;
    let system = carmen.llm.requests()[0].system.text().into_owned();
    assert!(
        system.contains(&format!("Propietario {}", owner.id)),
        "{system}"
    );
    assert!(system.contains(&listing.id), "{system}");

    // A demo customer with an open offer; they book a visit and confirm it.
    let offer = set
        .offers
        .iter()
        .find(|o| matches!(o.status, zaguan::realestate::OfferStatus::Submitted))
        .unwrap();
    let (_, slot) = a_free_slot(&world).await;
    let customer = world
        .newcomer(
            offer.wa_id.as_str(),
            ScriptedLlm::new()
                .calls(
                    "appointment_assistant",
                    "book_appointment",
                    json!({"slot_id": slot}),
                )
                .says("appointment_assistant", "Confírmamelo con el botón.")
                .says("appointment_assistant", "¡Reservada!")
                .says("primary_assistant", "De nada."),
            Duration::from_secs(60),
        )
        .await;
    customer.say("Quiero agendar una visita").await;
    let system = customer.llm.requests()[0].system.text().into_owned();
    assert!(system.contains("Ofertas abiertas:"), "{system}");
    assert!(system.contains(&offer.id), "{system}");
    assert!(!system.contains("Próximas citas:"), "{system}");
    customer.press("Confirmar").await;
    customer.say("Gracias, eso es todo").await;
    let requests = customer.llm.requests();
    let last = requests.last().unwrap().system.text().into_owned();
    let booked = world
        .realestate
        .appointments_of(&customer.wa_id)
        .await
        .unwrap();
    assert!(last.contains("Próximas citas:"), "{last}");
    assert!(last.contains(&booked[0].id), "{last}");
}
