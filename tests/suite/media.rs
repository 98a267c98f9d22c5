//! What the tools show besides words, end to end on both stores: search results go out as an
//! interactive list after the assistant's text; a tapped row is a question for the property
//! assistant, whatever assistant held the conversation; the property assistant's photos go out
//! as image messages, in order, after its words — all through the outbox and the sender to a
//! local server speaking the Graph API.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common::graph::FakeGraph;
use secrecy::SecretString;
use serde_json::{Value, json};
use zaguan::domain::{WaId, WaMessageId};
use zaguan::engine::Engine;
use zaguan::llm::ScriptedLlm;
use zaguan::outbound::{GraphClient, Limiters, Outbound, OutboundSettings, SendLimits};
use zaguan::realestate::{
    ListingStatus, MemoryRealEstate, MongoRealEstate, Operation, RealEstateStore,
};
use zaguan::store::{InboxEntry, InboxStatus, Media, MemoryStore, Store};

fn engine(
    store: &Arc<dyn Store>,
    realestate: &Arc<dyn RealEstateStore>,
    llm: &Arc<ScriptedLlm>,
) -> Engine {
    common::realestate_engine(store, realestate, llm)
}

async fn outbound(store: &Arc<dyn Store>) -> (Outbound, Arc<FakeGraph>) {
    let graph = Arc::new(FakeGraph::default());
    let base = common::graph::serve(graph.clone()).await;
    let client = GraphClient::new(
        format!("{base}/v21.0").parse().unwrap(),
        Some(SecretString::from("EAAG-test".to_owned())),
        Duration::from_secs(5),
    )
    .unwrap();
    let outbound = Outbound::new(
        store.clone(),
        client,
        Limiters::new(&SendLimits::default()),
        OutboundSettings::default(),
    );
    (outbound, graph)
}

/// The messages the fake Graph API received, marks-as-read left out.
fn messages(graph: &FakeGraph) -> Vec<Value> {
    graph
        .received()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| b.get("status").is_none())
        .collect()
}

/// A tap on the list row `id` titled `title`, as WhatsApp delivers it.
fn tap(wa_id: &WaId, id: &str, title: &str, description: &str) -> InboxEntry {
    let payload = json!({
        "from": wa_id.as_str(), "id": "wamid.TAP1", "timestamp": common::now_timestamp(), "type": "interactive",
        "interactive": {"type": "list_reply", "list_reply": {"id": id, "title": title, "description": description}}
    });
    InboxEntry {
        kind: "interactive".into(),
        text: Some(format!("{title} — {description}")),
        payload: payload.to_string(),
        content: zaguan::webhook::payload::message_content(&payload),
        ..common::inbox_entry("wamid.TAP1", wa_id, "", InboxStatus::Pending)
    }
}

async fn search_results_are_a_list_and_a_tap_brings_the_photos(
    store: Arc<dyn Store>,
    realestate: Arc<dyn RealEstateStore>,
) {
    let set = common::seeded_demo(realestate.as_ref()).await;
    let in_valencia = set
        .properties
        .iter()
        .filter(|p| {
            p.city == "Valencia"
                && p.operation == Operation::Sale
                && p.status == ListingStatus::Available
        })
        .count();
    assert!(in_valencia > 1, "the demo has a choice in Valencia");
    let customer = WaId::parse("34611000921").unwrap();
    store
        .set_dialog_state(
            &customer,
            &zaguan::domain::DialogState::entered("searcher_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "searcher_assistant",
                "search_properties",
                json!({"city": "Valencia", "operation": "sale", "page_size": 10}),
            )
            .says(
                "searcher_assistant",
                "Tengo varias en Valencia, te las dejo en la lista.",
            ),
    );
    let (outbound, graph) = outbound(&store).await;
    let said = common::say(
        &engine(&store, &realestate, &llm),
        &store,
        &customer,
        1,
        "busco piso en valencia para comprar",
    )
    .await;
    assert_eq!(
        said.as_deref(),
        Some("Tengo varias en Valencia, te las dejo en la lista."),
        "the customer's reply is the words"
    );
    // The words and the list are one message: the words open the list's body.
    let queued = store.unsent_outbox(&customer).await.unwrap();
    assert_eq!(queued.len(), 1, "{queued:?}");
    let Some(Media::List { rows, button, .. }) = &queued[0].media else {
        panic!("{:?}", queued[0]);
    };
    assert_eq!(rows.len(), in_valencia.min(10));
    assert_eq!(button, "Ver opciones");
    assert!(
        queued[0].body.contains(&rows[0].title),
        "the plain-text form lists the rows"
    );
    outbound.flush(&customer).await.unwrap();
    let sent = messages(&graph);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["type"], "interactive");
    let list = &sent[0]["interactive"];
    assert_eq!(list["type"], "list");
    assert_eq!(list["action"]["button"], "Ver opciones");
    let sent_rows = list["action"]["sections"][0]["rows"].as_array().unwrap();
    assert_eq!(sent_rows.len(), rows.len());
    for row in sent_rows {
        assert!(
            row["title"].as_str().unwrap().chars().count() <= 24,
            "{row}"
        );
        assert!(
            row["description"].as_str().unwrap().chars().count() <= 72,
            "{row}"
        );
        assert!(
            row["id"]
                .as_str()
                .unwrap()
                .starts_with("ask:property_assistant:P-")
        );
    }
    let body = list["body"]["text"].as_str().unwrap();
    assert!(body.starts_with("Tengo varias en Valencia"), "{body}");
    assert!(body.to_lowercase().contains("toca una"), "{body}");

    // The customer taps the first row: the searcher holding the conversation hands back and
    // the property assistant answers, no model asked to route it.
    let row = &rows[0];
    let id = row.id.rsplit(':').next().unwrap().to_owned();
    let property = realestate.property(&id).await.unwrap().unwrap();
    assert!(property.photos.len() >= 3, "demo listings have photos");
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "property_assistant",
                "send_property_photos",
                json!({"property_id": id}),
            )
            .says("property_assistant", "Te mando las fotos."),
    );
    let engine = engine(&store, &realestate, &llm);
    let entry = tap(&customer, &row.id, &row.title, &row.description);
    store
        .insert_inbox(std::slice::from_ref(&entry))
        .await
        .unwrap();
    let outcome = engine.run_turn(&customer, &[entry]).await.unwrap();
    // The words, and the question under the photos of a listing that can be visited.
    assert_eq!(
        outcome.reply.as_deref(),
        Some("Te mando las fotos.\n\n¿Quieres visitarlo?")
    );
    assert_eq!(outcome.dialog_state.to_list(), ["property_assistant"]);
    let asked: Vec<String> = llm.requests().iter().map(|r| r.agent.to_string()).collect();
    assert_eq!(asked, ["property_assistant", "property_assistant"]);
    let first = &llm.requests()[0];
    assert!(
        common::last_human(first).contains(&id),
        "the property assistant reads the row: {}",
        common::last_human(first)
    );

    outbound.flush(&customer).await.unwrap();
    let sent = messages(&graph);
    // One carousel: the words above three cards, each a photo with a tap to book.
    assert_eq!(sent.len(), 2, "{sent:#?}");
    let carousel = &sent[1]["interactive"];
    assert_eq!(carousel["type"], "carousel", "{:#}", sent[1]);
    assert_eq!(carousel["body"]["text"], "Te mando las fotos.");
    let cards = carousel["action"]["cards"].as_array().unwrap();
    assert_eq!(cards.len(), 3);
    for (i, card) in cards.iter().enumerate() {
        assert_eq!(card["header"]["image"]["link"], property.photos[i].as_str());
        assert_eq!(
            card["action"]["buttons"][0]["quick_reply"]["id"],
            format!("ask:appointment_assistant:{id}")
        );
        let caption = card["body"]["text"].as_str().unwrap();
        assert!(caption.starts_with(&format!("{id} · ")), "{caption}");
        assert!(
            caption.ends_with(&format!("({}/{})", i + 1, property.photos.len())),
            "{caption}"
        );
    }
    let recorded = store
        .outbox_in_reply_to(&WaMessageId::parse("wamid.TAP1").unwrap())
        .await
        .unwrap();
    assert_eq!(recorded.len(), 1);
    assert!(
        recorded.iter().all(|e| e.wamid.is_some()),
        "each part recorded sent"
    );
    assert_eq!(llm.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_search_results_are_a_list_and_a_tap_brings_the_photos() {
    search_results_are_a_list_and_a_tap_brings_the_photos(
        Arc::new(MemoryStore::new()),
        Arc::new(MemoryRealEstate::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongo_search_results_are_a_list_and_a_tap_brings_the_photos() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let realestate = Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    search_results_are_a_list_and_a_tap_brings_the_photos(Arc::new(db.store.clone()), realestate)
        .await;
    db.drop().await;
}

/// A listing without photos: the tool says so and nothing but words goes out.
#[tokio::test]
async fn a_listing_without_photos_sends_none() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let realestate: Arc<dyn RealEstateStore> = Arc::new(MemoryRealEstate::new());
    let set = common::seeded_demo(realestate.as_ref()).await;
    let mut bare = set.properties[0].clone();
    bare.photos.clear();
    realestate
        .upsert_properties(std::slice::from_ref(&bare))
        .await
        .unwrap();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                "property_assistant",
                "send_property_photos",
                json!({"property_id": bare.id}),
            )
            .says(
                "property_assistant",
                "Esa ficha no tiene fotos; ¿quieres que un agente te las mande?",
            ),
    );
    let customer = WaId::parse("34611000922").unwrap();
    store
        .set_dialog_state(
            &customer,
            &zaguan::domain::DialogState::entered("property_assistant"),
            Utc::now(),
        )
        .await
        .unwrap();
    common::say(
        &engine(&store, &realestate, &llm),
        &store,
        &customer,
        1,
        "mándame fotos",
    )
    .await;
    let queued = store.unsent_outbox(&customer).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert!(queued[0].media.is_none());
    let tool = &llm.requests()[1];
    let said = format!("{:?}", tool.messages.last().unwrap());
    assert!(said.contains("has no photos"), "{said}");
}
