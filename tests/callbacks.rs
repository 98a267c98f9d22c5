//! `request_callback` through the engine, on both stores: the customer's wish to be called is
//! stored in `callback_requests` and the conversation is flagged for a person, so it shows in
//! `conversations list --handoff requested`; only the assistants that list the tool offer it.

mod common;

use std::path::Path;
use std::sync::Arc;

use chrono::Utc;
use serde_json::json;
use zaguan::agents::{self, AgentRegistry};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::{Engine, EngineSettings};
use zaguan::llm::ScriptedLlm;
use zaguan::realestate::tools::{self, RequestCallback};
use zaguan::realestate::{MemoryRealEstate, MongoRealEstate, RealEstateStore};
use zaguan::store::{
    ConversationQuery, HandoffFilter, InboxEntry, InboxStatus, MemoryStore, Store,
};

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
            .says("mortgage_loan_assistant", "Hecho: el asesor te llamará mañana por la tarde."),
    );
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &agents::known_tools()).unwrap();
    let tools = tools::registry(realestate.clone())
        .with(RequestCallback::new(realestate.clone(), store.clone()));
    let engine = Engine::new(
        store.clone(),
        llm.clone(),
        Arc::new(registry),
        Arc::new(tools),
        EngineSettings::default(),
    );
    let wa_id = WaId::parse("34611222333").unwrap();
    store
        .set_dialog_state(&wa_id, &["mortgage_loan_assistant".to_owned()], Utc::now())
        .await
        .unwrap();
    let entry = InboxEntry {
        wamid: WaMessageId::parse("wamid.CALLME").unwrap(),
        wa_id: wa_id.clone(),
        phone_number_id: "109876543210".into(),
        kind: "text".into(),
        text: Some("¿Me puede llamar el asesor? Mejor mañana por la tarde".into()),
        payload: "{}".into(),
        context_id: None,
        sent_at: None,
        status: InboxStatus::Pending,
        received_at: Utc::now(),
        attempts: 0,
    };
    store.insert_inbox(&[entry]).await.unwrap();
    let open = store.open_inbox(&wa_id).await.unwrap();
    let outcome = engine.run_turn(&wa_id, &open).await.unwrap();
    assert_eq!(
        outcome.reply.as_deref(),
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

    let flagged = store
        .list_conversations(&ConversationQuery {
            handoff: Some(HandoffFilter::Requested),
            limit: 10,
            ..ConversationQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(flagged.len(), 1);
    assert_eq!(
        flagged[0]
            .handoff_requested
            .as_ref()
            .map(|r| r.reason.as_str()),
        Some(
            "Llamar al cliente: Estudio de hipoteca para un piso de 250.000 € (prefiere: mañana por la tarde)"
        )
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

/// Only the mortgage and offer assistants list the tool, so only they are offered it.
#[tokio::test]
async fn only_the_assistants_that_list_it_are_offered_the_tool() {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let registry = AgentRegistry::load(&prompts, &agents::known_tools()).unwrap();
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

#[tokio::test]
async fn memory_a_customer_asks_to_be_called_back() {
    a_customer_asks_to_be_called_back(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test]
async fn mongo_a_customer_asks_to_be_called_back() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = MongoRealEstate::new(db.store.pool().clone());
    realestate.ensure_indexes().await.unwrap();
    a_customer_asks_to_be_called_back(Arc::new(db.store.clone()), Arc::new(realestate)).await;
    db.drop().await;
}
