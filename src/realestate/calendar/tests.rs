use chrono::TimeZone as _;

use super::*;
use crate::realestate::{MemoryRealEstate, Slot};

fn at(day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, day, hour, 0, 0).unwrap()
}

fn wa(id: &str) -> WaId {
    WaId::parse(id).unwrap()
}

#[tokio::test]
async fn an_agents_feed_lists_their_visits_and_cancelled_ones_as_cancelled() {
    let store = MemoryRealEstate::new();
    let set = crate::realestate::demo::demo_set(at(1, 0).date_naive(), chrono_tz::Europe::Madrid);
    store.upsert_properties(&set.properties[..2]).await.unwrap();
    let lucia = StaffMember {
        id: "A-01".into(),
        name: "Lucía Ferrer".into(),
        calendar_token: Some("secret-token".into()),
        ..StaffMember::default()
    };
    store
        .upsert_staff(std::slice::from_ref(&lucia))
        .await
        .unwrap();
    let slot = |id: &str, property: &str, start, agent: &str| Slot {
        id: id.into(),
        property_id: property.into(),
        starts_at: start,
        minutes: 45,
        agent: agent.into(),
    };
    let first = &set.properties[0].id;
    let second = &set.properties[1].id;
    store
        .upsert_slots(&[
            slot("S-1", first, at(3, 9), "A-01"),
            slot("S-2", second, at(3, 11), "Lucía Ferrer"),
            slot("S-3", first, at(3, 12), "A-02"),
        ])
        .await
        .unwrap();
    let appointment = |id: &str, slot: &str, property: &str, start, status| Appointment {
        id: id.into(),
        property_id: property.into(),
        slot_id: slot.into(),
        wa_id: wa("34611500001"),
        starts_at: start,
        status,
        created_at: at(1, 8),
        reminder_sent_at: None,
        moved_from: None,
        follow_up: Default::default(),
    };
    for a in [
        appointment("A-1", "S-1", first, at(3, 9), AppointmentStatus::Booked),
        appointment(
            "A-2",
            "S-2",
            second,
            at(3, 11),
            AppointmentStatus::Cancelled,
        ),
        appointment("A-3", "S-3", first, at(3, 12), AppointmentStatus::Booked),
    ] {
        store.save_appointment(&a).await.unwrap();
    }
    assert!(
        member_by_token(&store, "secret-token")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        member_by_token(&store, "secret-tokem")
            .await
            .unwrap()
            .is_none()
    );

    struct Names;
    #[async_trait::async_trait]
    impl Customers for Names {
        async fn name_of(&self, _: &WaId) -> Option<String> {
            Some("Ana Torres".to_owned())
        }
    }
    let names = Names;
    let feed = agent_feed(
        &store,
        &lucia,
        &names,
        Some("https://zaguan.example"),
        at(2, 0),
    )
    .await
    .unwrap();
    // Read back by the parser that reads agents' own calendars: the booked one is busy.
    let busy = ics::busy_times(&feed, at(1, 0), at(5, 0), chrono_tz::Europe::Madrid).unwrap();
    assert_eq!(
        busy.busy,
        [ics::Busy {
            start: at(3, 9),
            end: at(3, 9) + Duration::minutes(45)
        }]
    );
    let unfolded = feed.replace("\r\n ", "");
    assert!(unfolded.contains("UID:A-1@zaguan"), "{feed}");
    assert!(unfolded.contains("UID:A-2@zaguan"));
    assert!(unfolded.contains("STATUS:CANCELLED"));
    assert!(!unfolded.contains("A-3@zaguan"), "another agent's visit");
    assert!(unfolded.contains("Ana Torres (+34611500001)"));
    assert!(unfolded.contains("https://zaguan.example/console/conversations/34611500001"));
}
