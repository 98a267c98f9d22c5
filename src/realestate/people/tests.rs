use chrono::{TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::realestate::MemoryRealEstate;

fn writing() -> Writing {
    Writing {
        region: PhoneRegion::default(),
        now: Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0).unwrap(),
    }
}

fn items(value: Value) -> Vec<Map<String, Value>> {
    parse(&value.to_string(), FileFormat::Json).unwrap()
}

#[tokio::test]
async fn staff_are_added_normalised_and_a_taken_number_is_refused() {
    let store = MemoryRealEstate::new();
    let added = add_staff(
        &store,
        items(json!([
            {"name": "Lucía Ferrer", "wa_id": "600 12 34 56", "notify_handoffs": true,
             "zones": "Valencia; Ruzafa", "visit_minutes": 45,
             "hours": {"monday": ["9:00-14:00", "16:00-19:00"]},
             "calendar_url": "webcal://calendar.example.es/lucia.ics"},
            {"id": "A-09", "name": "Javier"}
        ])),
        writing(),
    )
    .await
    .unwrap();
    assert_eq!(added[0].id, "A-01");
    assert_eq!(added[0].wa_id.as_ref().unwrap().as_str(), "34600123456");
    assert_eq!(added[0].zones, ["Valencia", "Ruzafa"]);
    assert_eq!(
        added[0].calendar_url.as_deref(),
        Some("https://calendar.example.es/lucia.ics")
    );
    assert_eq!(added[0].calendar_token.as_ref().unwrap().len(), 40);
    assert_ne!(added[0].calendar_token, added[1].calendar_token);
    assert_eq!(store.staff().await.unwrap().len(), 2);

    // The same number typed differently is the same number.
    let taken = add_staff(
        &store,
        items(json!({"name": "Otra", "wa_id": "+34 600-123-456"})),
        writing(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(taken, PeopleError::Conflict(ref why) if why.contains("A-01")),
        "{taken}"
    );
    // The next id follows the highest.
    let next = add_staff(&store, items(json!({"name": "Marta"})), writing())
        .await
        .unwrap();
    assert_eq!(next[0].id, "A-10");
}

#[tokio::test]
async fn every_bad_field_is_named_and_a_bad_batch_writes_nothing() {
    let store = MemoryRealEstate::new();
    for (item, field) in [
        (json!({"name": "A", "wa_id": "12"}), "wa_id"),
        (json!({"name": "A", "visit_minutes": 3}), "visit_minutes"),
        (
            json!({"name": "A", "visit_minutes": "media hora"}),
            "visit_minutes",
        ),
        (
            json!({"name": "A", "hours": {"lunes": ["9:00-14:00"]}}),
            "hours",
        ),
        (json!({"name": "A", "hours": {"monday": ["9-25"]}}), "hours"),
        (
            json!({"name": "A", "calendar_url": "ftp://x/y.ics"}),
            "calendar_url",
        ),
        (
            json!({"name": "A", "notify_handoffs": true}),
            "notify_handoffs",
        ),
        (
            json!({"name": "A", "notify_handoffs": "quizá"}),
            "notify_handoffs",
        ),
        (json!({"name": ""}), "name"),
        (json!({"wa_id": "600123456"}), "name"),
        (json!({"name": "A", "telefono": "600123456"}), "telefono"),
        (
            json!({"name": "A", "calendar_token": "mine"}),
            "calendar_token",
        ),
        (json!({"id": "A 1", "name": "A"}), "id"),
    ] {
        let error = add_staff(
            &store,
            items(json!([{"name": "Fine", "wa_id": "600000001"}, item])),
            writing(),
        )
        .await
        .unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("item 2") && message.contains(&format!("{field}:"))
                || message.contains(&format!("`{field}`")),
            "{item}: {message}"
        );
    }
    assert!(store.staff().await.unwrap().is_empty(), "nothing written");
}

#[tokio::test]
async fn an_update_merges_a_disabled_member_leaves_and_a_token_rotates() {
    let store = MemoryRealEstate::new();
    let added = add_staff(
        &store,
        items(json!({"name": "Lucía", "wa_id": "600123456", "notify_handoffs": true})),
        writing(),
    )
    .await
    .unwrap();
    let token = added[0].calendar_token.clone();
    let updated = update_staff(
        &store,
        "A-01",
        items(json!({"visit_minutes": 30})).remove(0),
        true,
        writing(),
    )
    .await
    .unwrap();
    assert_eq!(updated.visit_minutes, Some(30));
    assert!(updated.notify_handoffs, "untouched fields stay");
    assert_ne!(updated.calendar_token, token);
    let disabled = disable_staff(&store, "A-01", writing().now).await.unwrap();
    assert_eq!(disabled.disabled_at, Some(writing().now));
    // The number is free again for a new member; the old record stays.
    add_staff(
        &store,
        items(json!({"name": "Lucía (nueva)", "wa_id": "600123456"})),
        writing(),
    )
    .await
    .unwrap();
    assert_eq!(store.staff().await.unwrap().len(), 2);
    // Enabling the old one again would give one number two members.
    let twice = update_staff(
        &store,
        "A-01",
        items(json!({"disabled": false})).remove(0),
        false,
        writing(),
    )
    .await
    .unwrap_err();
    assert!(matches!(twice, PeopleError::Conflict(_)), "{twice}");
    assert!(matches!(
        update_staff(&store, "A-99", Map::new(), false, writing()).await,
        Err(PeopleError::NotFound(_))
    ));
}

#[tokio::test]
async fn owners_take_their_listings_and_an_agent_who_exists() {
    let store = MemoryRealEstate::new();
    let set =
        crate::realestate::demo::demo_set(writing().now.date_naive(), chrono_tz::Europe::Madrid);
    crate::realestate::demo::seed(&store, &set).await.unwrap();
    let agent = store.staff().await.unwrap()[0].id.clone();
    let added = add_owners(
        &store,
        items(json!({"name": "Rosa Marín", "wa_id": "+34 611 22 33 44",
                      "agent_id": agent, "listings": ["P-1001", "P-1002"]})),
        writing(),
    )
    .await
    .unwrap();
    let id = added[0].owner.id.clone();
    for listing in ["P-1001", "P-1002"] {
        assert_eq!(store.property(listing).await.unwrap().unwrap().owner_id, id);
    }
    let listed = owners(&store).await.unwrap();
    let rosa = listed.iter().find(|o| o.owner.id == id).unwrap();
    assert_eq!(rosa.listings, ["P-1001", "P-1002"]);
    assert_eq!(rosa.owner.agent_id.as_deref(), Some(agent.as_str()));

    for (item, field) in [
        (json!({"name": "X", "agent_id": "A-77"}), "agent_id"),
        (json!({"name": "X", "listings": ["P-9999"]}), "listings"),
        (json!({"name": "X", "wa_id": "611223344"}), "wa_id"),
    ] {
        let error = add_owners(&store, items(item.clone()), writing())
            .await
            .unwrap_err();
        assert!(error.to_string().contains(field), "{item}: {error}");
    }
}

#[test]
fn a_csv_file_reads_as_items_with_the_same_checks() {
    let text = "\u{feff}name,wa_id,notify_handoffs,zones,hours,visit_minutes\n\
                Lucía,600 12 34 56,sí,Valencia;Ruzafa,monday 9:00-14:00 16:00-19:00; friday 9:00-14:00,45\n\
                Javier,,,,,\n";
    let rows = parse(text, FileFormat::guess("staff.csv", text)).unwrap();
    assert_eq!(rows.len(), 2);
    let mut member = StaffMember::default();
    fields::apply_staff(&mut member, rows[0].clone(), true, writing()).unwrap();
    assert!(member.notify_handoffs);
    assert_eq!(member.visit_minutes, Some(45));
    assert_eq!(member.hours.unwrap()["monday"].len(), 2);
    assert!(parse("name,wa_id\nA,1,extra\n", FileFormat::Csv).is_err());
    assert!(parse("[]", FileFormat::Json).is_err());
}
