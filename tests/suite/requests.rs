//! What customers and owners ask a person for, through the engine on both stores:
//! `request_callback` (stored in `callback_requests`) and `request_listing_change` (confirmed,
//! stored in `listing_requests`). Each flags the conversation for a person, so it shows in
//! `conversations list --handoff requested`; only the assistants that list a tool offer it.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use chrono::Utc;
use serde_json::json;
use zaguan::agents::AgentRegistry;
use zaguan::domain::WaId;
use zaguan::domain::{MessageRole, Role};
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::tools::{self, RequestCallback, RequestListingChange};
use zaguan::realestate::{ListingChange, RealEstateStore};
use zaguan::store::{ConversationQuery, HandoffFilter, Store};

/// An engine with the domain tools and both request tools over `store` and `realestate`.
fn build_engine(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    llm: &Arc<ScriptedLlm>,
) -> Engine {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    let desk = Arc::new(zaguan::engine::handoff::HandoffDesk::new(
        store.clone(),
        Some(Arc::new(zaguan::realestate::roles::DataRoles(
            realestate.clone(),
        ))),
        zaguan::engine::handoff::HandoffSettings::default(),
    ));
    let tools = tools::registry(realestate.clone())
        .with(RequestCallback::new(realestate.clone(), desk.clone()))
        .with(RequestListingChange::new(realestate.clone(), desk.clone()));
    Engine::new(
        store.clone(),
        llm.clone(),
        Arc::new(registry),
        Arc::new(tools),
        EngineSettings::default(),
    )
    .with_handoffs(desk)
}

/// The reasons of the conversations flagged for a person.
async fn flagged(store: &Arc<dyn Store>) -> Vec<String> {
    store
        .list_conversations(&ConversationQuery {
            handoff: Some(HandoffFilter::Requested),
            limit: 10,
            ..ConversationQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.handoff_requested.map(|r| r.reason))
        .collect()
}

async fn a_customer_asks_to_be_called_back(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "mortgage_loan_assistant",
                "request_callback",
                json!({"reason": "Estudio de hipoteca para un piso de 250.000 €", "preferred_time": "mañana por la tarde"}),
            )
            .says("mortgage_loan_assistant", "¿Te parece bien? Confírmalo con el botón.")
            .says("mortgage_loan_assistant", "Hecho: el asesor te llamará mañana por la tarde."),
    );
    let engine = build_engine(&store, &realestate, &llm);
    let wa_id = WaId::parse("34611222333").unwrap();
    store
        .set_dialog_state(
            &wa_id,
            &zaguan::domain::DialogState::entered("mortgage_loan_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(
        &engine,
        &store,
        &wa_id,
        1,
        "¿Me puede llamar el asesor? Mejor mañana por la tarde",
    )
    .await;
    // Like every change, asked first: nothing stored, nobody told before the yes.
    let pending = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(
        pending.pending_action.map(|a| a.summary).as_deref(),
        Some(
            "Que una persona de la agencia te llame a este número: Estudio de hipoteca para \
             un piso de 250.000 € (mejor mañana por la tarde)"
        )
    );
    assert!(
        realestate
            .callback_requests_of(&wa_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(flagged(&store).await.is_empty());
    let reply = common::say(&engine, &store, &wa_id, 2, "sí").await;
    assert_eq!(
        reply.as_deref(),
        Some("Hecho: el asesor te llamará mañana por la tarde.")
    );
    // The mortgage assistant was offered the tool.
    let requests = llm.requests();
    assert!(
        requests[0]
            .tools
            .iter()
            .any(|t| t.name == "request_callback")
    );

    let stored = realestate.callback_requests_of(&wa_id).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].reason,
        "Estudio de hipoteca para un piso de 250.000 €"
    );
    assert_eq!(
        stored[0].preferred_time.as_deref(),
        Some("mañana por la tarde")
    );
    assert!(stored[0].id.starts_with("C-"));

    assert_eq!(
        flagged(&store).await,
        [
            "Llamar al cliente: Estudio de hipoteca para un piso de 250.000 € (prefiere: mañana por la tarde)"
        ]
    );
    // Someone else's requests are not this customer's.
    let other = WaId::parse("34611222444").unwrap();
    assert!(
        realestate
            .callback_requests_of(&other)
            .await
            .unwrap()
            .is_empty()
    );
}

/// An owner asks to lower the price of their listing: asked to confirm, stored only on the yes,
/// flagged for a person; the listing itself is unchanged. Someone else's listing is refused.
async fn an_owner_asks_for_a_new_price_and_confirms(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let owner = set
        .owners
        .iter()
        .find(|o| o.wa_id.is_some())
        .expect("a demo owner on WhatsApp");
    let own = set
        .properties
        .iter()
        .find(|p| p.owner_id == owner.id)
        .expect("a listing of that owner");
    let other = set
        .properties
        .iter()
        .find(|p| p.owner_id != owner.id)
        .expect("someone else's listing");
    let new_price = own.price - 10_000;
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "owner_info_assistant",
                "request_listing_change",
                json!({"property_id": other.id, "change": "withdraw"}),
            )
            .says(
                "owner_info_assistant",
                "Ese inmueble no figura a tu nombre.",
            )
            .calls(
                "owner_info_assistant",
                "request_listing_change",
                json!({"property_id": own.id, "change": "price", "new_price": new_price}),
            )
            .says("owner_info_assistant", "Confírmalo con el botón.")
            .says(
                "owner_info_assistant",
                "Hecho: tu agente lo revisará contigo.",
            ),
    );
    let engine = build_engine(&store, &realestate, &llm);
    let wa_id = owner.wa_id.clone().unwrap();
    store.set_user_role(&wa_id, Role::Owner).await.unwrap();
    store
        .set_dialog_state(
            &wa_id,
            &zaguan::domain::DialogState::entered("owner_info_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();

    common::say(&engine, &store, &wa_id, 1, "Quiero retirar el otro piso").await;
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert!(conversation.pending_action.is_none(), "nothing to confirm");
    assert!(
        realestate
            .listing_requests_for(&other.id)
            .await
            .unwrap()
            .is_empty()
    );

    common::say(
        &engine,
        &store,
        &wa_id,
        2,
        "Bájale 10.000 € al mío, por favor",
    )
    .await;
    let conversation = store.conversation(&wa_id).await.unwrap().unwrap();
    assert_eq!(
        conversation.pending_action.map(|a| a.tool).as_deref(),
        Some("request_listing_change")
    );
    assert!(
        realestate
            .listing_requests_for(&own.id)
            .await
            .unwrap()
            .is_empty(),
        "not before the yes"
    );
    assert!(flagged(&store).await.is_empty());

    assert_eq!(
        common::say(&engine, &store, &wa_id, 3, "sí")
            .await
            .as_deref(),
        Some("Hecho: tu agente lo revisará contigo.")
    );
    let requests = realestate.listing_requests_for(&own.id).await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].change, ListingChange::Price(new_price));
    assert_eq!(requests[0].owner_id, owner.id);
    assert_eq!(requests[0].status, "requested");
    let reasons = flagged(&store).await;
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with(&format!("Propietario: Cambiar el precio de {}", own.id)),
        "{reasons:?}"
    );
    // The listing itself waits for a person.
    let listing = realestate.property(&own.id).await.unwrap().unwrap();
    assert_eq!(listing.price, own.price);
    assert_eq!(llm.remaining(), 0);
}

/// The tool messages of `wa_id`'s history, oldest first.
async fn tool_results(store: &Arc<dyn Store>, wa_id: &WaId) -> Vec<String> {
    store
        .recent_messages(wa_id, 200)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.role == MessageRole::Tool)
        .map(|m| m.message.content)
        .collect()
}

/// The agency's staff look up a property's visits and a customer's offers; a prospect naming
/// someone else gets an error, and without a name only their own.
async fn staff_look_up_a_property_or_a_customer_and_nobody_else_can(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let property = &set.visits[0].property_id;
    let property_visits: Vec<&str> = set
        .visits
        .iter()
        .filter(|v| &v.property_id == property)
        .map(|v| v.id.as_str())
        .collect();
    let offer = &set.offers[0];
    let customer = set
        .visits
        .iter()
        .map(|v| &v.wa_id)
        .find(|wa_id| *wa_id != &offer.wa_id)
        .unwrap();

    // Staff.
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "visit_tracker_assistant",
                "list_my_visits",
                json!({"property_id": property}),
            )
            .says("visit_tracker_assistant", "Estas son sus visitas.")
            .calls(
                "prospect_offer_assistant",
                "list_my_offers",
                json!({"customer": format!("+{}", offer.wa_id)}),
            )
            .says("prospect_offer_assistant", "Estas son sus ofertas."),
    );
    let engine = build_engine(&store, &realestate, &llm);
    let staff = set.staff[0].wa_id.clone().unwrap();
    store.set_user_role(&staff, Role::Agent).await.unwrap();
    store
        .set_dialog_state(
            &staff,
            &zaguan::domain::DialogState::entered("visit_tracker_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(
        &engine,
        &store,
        &staff,
        1,
        "¿Qué visitas ha tenido esa propiedad?",
    )
    .await;
    store
        .set_dialog_state(
            &staff,
            &zaguan::domain::DialogState::entered("prospect_offer_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(
        &engine,
        &store,
        &staff,
        2,
        "¿Y qué ofertas ha hecho ese cliente?",
    )
    .await;
    let results = tool_results(&store, &staff).await;
    assert_eq!(results.len(), 2, "{results:?}");
    for visit in &property_visits {
        assert!(results[0].contains(visit), "{visit} in {}", results[0]);
    }
    assert!(results[1].contains(&offer.id), "{}", results[1]);

    // A prospect: someone else's records are refused; their own come without a name.
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "visit_tracker_assistant",
                "list_my_visits",
                json!({"customer": offer.wa_id.as_str()}),
            )
            .says("visit_tracker_assistant", "Solo puedo ver las tuyas.")
            .calls("visit_tracker_assistant", "list_my_visits", json!({}))
            .says("visit_tracker_assistant", "Estas son tus visitas."),
    );
    let engine = build_engine(&store, &realestate, &llm);
    store.set_user_role(customer, Role::Prospect).await.unwrap();
    store
        .set_dialog_state(
            customer,
            &zaguan::domain::DialogState::entered("visit_tracker_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(
        &engine,
        &store,
        customer,
        1,
        "¿Qué visitas ha hecho mi vecino?",
    )
    .await;
    common::say(&engine, &store, customer, 2, "¿Y las mías?").await;
    let results = tool_results(&store, customer).await;
    assert!(
        results[0].contains("only the agency's staff"),
        "{}",
        results[0]
    );
    for visit in &set.visits {
        assert_eq!(
            results[1].contains(&visit.id),
            &visit.wa_id == customer,
            "{} in {}",
            visit.id,
            results[1]
        );
    }
}

/// Two customers asking in the same millisecond get a request each (ids come from the
/// confirmed call, not the clock); the same call run again (a step replayed after a crash)
/// stores nothing new.
async fn two_callbacks_in_the_same_millisecond_are_both_kept(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    use zaguan::engine::{Tool, ToolContext};
    let desk = Arc::new(zaguan::engine::handoff::HandoffDesk::new(
        store.clone(),
        None,
        zaguan::engine::handoff::HandoffSettings::default(),
    ));
    let tool = RequestCallback::new(realestate.clone(), desk);
    let now = Utc::now();
    let context = |wa_id: &str, call: &str| {
        let mut context = ToolContext::new(WaId::parse(wa_id).unwrap(), Role::Prospect, now);
        context.call_id = format!("call_confirmed_{call}");
        context
    };
    let (ana, luis) = (
        context("34611222501", "a1b2"),
        context("34611222502", "c3d4"),
    );
    let args = json!({"reason": "Quiere que le llamen por la hipoteca"});
    let (first, second) = tokio::join!(tool.run(args.clone(), &ana), tool.run(args.clone(), &luis));
    let (first, second) = (first.unwrap(), second.unwrap());
    tool.run(args, &ana).await.unwrap();
    let ana_requests = realestate.callback_requests_of(&ana.wa_id).await.unwrap();
    let luis_requests = realestate.callback_requests_of(&luis.wa_id).await.unwrap();
    assert_eq!((ana_requests.len(), luis_requests.len()), (1, 1));
    assert_ne!(ana_requests[0].id, luis_requests[0].id);
    assert_eq!(ana_requests[0].created_at, luis_requests[0].created_at);
    assert_eq!(first.events.len(), 1);
    assert_ne!(first.events, second.events);
}

/// Only the mortgage and offer assistants list the tool, so only they are offered it.
#[tokio::test]
async fn only_the_assistants_that_list_it_are_offered_the_tool() {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &zaguan::startup::known_tools()).unwrap();
    for (agent, offered) in [
        ("mortgage_loan_assistant", true),
        ("prospect_offer_assistant", true),
        ("property_assistant", false),
        ("searcher_assistant", false),
    ] {
        let agent = registry.get(agent).unwrap();
        assert_eq!(
            agent.tools.iter().any(|t| t == "request_callback"),
            offered,
            "{}",
            agent.name
        );
    }
}

crate::both_stores!(|s| (s.store.clone(), s.realestate.clone()) =>
    a_customer_asks_to_be_called_back,
    two_callbacks_in_the_same_millisecond_are_both_kept,
    an_owner_asks_for_a_new_price_and_confirms,
    staff_look_up_a_property_or_a_customer_and_nobody_else_can,
);
