//! Visits from an agent's real day, on MongoDB (FerretDB in CI): a listing with no slots of
//! its own offers its agent's free times, and two customers racing for one agent's hour at
//! two different listings — the same instant, two tool calls — leave one booking.

use std::time::Duration;

use chrono::TimeZone as _;
use serde_json::json;

use zaguan::domain::{Role, ToolCall, WaId};
use zaguan::realestate::{
    AppointmentStore as _, MongoRealEstate, PropertyStore as _, StaffMember, StaffStore as _,
};

use crate::common;

#[tokio::test]
async fn on_mongodb_one_agent_is_booked_once_at_an_hour_across_listings() {
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = std::sync::Arc::new(MongoRealEstate::new(db.store.pool().clone()));
    store.ensure_indexes().await.unwrap();
    // Monday 4 January 2027, 7:00 in Madrid.
    let now = chrono_tz::Europe::Madrid
        .with_ymd_and_hms(2027, 1, 4, 7, 0, 0)
        .unwrap()
        .to_utc();
    let set = zaguan::realestate::demo::demo_set(now.date_naive(), chrono_tz::Europe::Madrid);
    let mut listings: Vec<_> = set
        .properties
        .iter()
        .filter(|p| p.status == zaguan::realestate::ListingStatus::Available)
        .take(2)
        .cloned()
        .collect();
    for listing in &mut listings {
        listing.agent_id = Some("A-01".into());
    }
    store.upsert_properties(&listings).await.unwrap();
    store
        .upsert_staff(&[StaffMember {
            id: "A-01".into(),
            name: "Lucía Ferrer".into(),
            visit_minutes: Some(45),
            ..StaffMember::default()
        }])
        .await
        .unwrap();
    let registry = zaguan::realestate::tools::registry(store.clone());
    let run = |wa_id: &str, call_id: &str, name: &str, args: serde_json::Value| {
        let context =
            zaguan::engine::ToolContext::new(WaId::parse(wa_id).unwrap(), Role::Prospect, now);
        let call = ToolCall {
            id: call_id.into(),
            name: name.into(),
            args: args.into(),
        };
        let registry = &registry;
        async move {
            let context = zaguan::engine::ToolContext {
                call_id: call.id.clone(),
                ..context
            };
            registry
                .run(&call, &context, Duration::from_secs(10))
                .await
                .text
        }
    };
    let first_slot = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("- ").and_then(|l| l.split(" · ").next()))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no slot in {text}"))
    };
    let args = |id: &str| json!({"property_id": id, "from_date": "2027-01-04", "days": 1});
    let one = run(
        "34611600001",
        "c1",
        "list_available_slots",
        args(&listings[0].id),
    )
    .await;
    let two = run(
        "34611600002",
        "c2",
        "list_available_slots",
        args(&listings[1].id),
    )
    .await;
    assert!(one.contains("con Lucía Ferrer"), "{one}");
    let (slot_one, slot_two) = (first_slot(&one), first_slot(&two));
    assert_ne!(slot_one, slot_two, "two listings, two slots");
    assert_eq!(
        slot_one[slot_one.len() - 17..],
        slot_two[slot_two.len() - 17..],
        "the same hour"
    );

    let (a, b) = tokio::join!(
        run(
            "34611600001",
            "c3",
            "book_appointment",
            json!({"slot_id": slot_one})
        ),
        run(
            "34611600002",
            "c4",
            "book_appointment",
            json!({"slot_id": slot_two})
        ),
    );
    let booked = [&a, &b]
        .iter()
        .filter(|t| t.contains("Visita reservada"))
        .count();
    assert_eq!(booked, 1, "{a}\n{b}");
    let mut all = store
        .appointments_of(&WaId::parse("34611600001").unwrap())
        .await
        .unwrap();
    all.extend(
        store
            .appointments_of(&WaId::parse("34611600002").unwrap())
            .await
            .unwrap(),
    );
    assert_eq!(all.len(), 1);
    // That hour is gone from both listings now.
    for (i, listing) in listings.iter().enumerate() {
        let again = run(
            "34611600003",
            &format!("c{}", 5 + i),
            "list_available_slots",
            args(&listing.id),
        )
        .await;
        assert_ne!(
            first_slot(&again)[first_slot(&again).len() - 17..],
            slot_one[slot_one.len() - 17..],
            "{again}"
        );
    }
    db.drop().await;
}
