//! The real-estate store suite: the same behaviour from `MemoryRealEstate` and from
//! `MongoRealEstate` over the wire (FerretDB in CI, any MongoDB at `MONGODB_URI`). The claims —
//! a slot to one appointment, a reminder sent once — are raced from several threads.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use zaguan::domain::GeoPoint;

use chrono::{DateTime, TimeZone, Utc};
use zaguan::domain::WaId;
use zaguan::realestate::*;
use zaguan::store::StoreError;

/// BSON dates hold milliseconds; test times are whole seconds so both stores compare equal.
fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_795_000_000 + secs, 0).unwrap()
}

const HOUR: i64 = 3600;

fn wa(id: &str) -> WaId {
    WaId::parse(id).unwrap()
}

fn property(id: &str, city: &str, operation: Operation, status: ListingStatus) -> Property {
    Property {
        id: id.into(),
        title: format!("Ático luminoso con terraza ({id})"),
        description: "Reformado en 2023, vistas despejadas, a dos calles del metro.".into(),
        operation,
        kind: PropertyType::Penthouse,
        city: city.into(),
        neighbourhood: "El Limonar".into(),
        address: "Calle de la Victoria 12, 5º".into(),
        location: GeoPoint {
            lat: 36.721_4,
            lon: -4.421_6,
        },
        price: 385_000,
        currency: "EUR".into(),
        bedrooms: 3,
        bathrooms: 2,
        area_m2: 118,
        amenities: vec!["terraza".into(), "ascensor".into(), "garaje".into()],
        status,
        owner_id: "O-07".into(),
        listed_at: at(-30 * 24 * HOUR),
        photos: vec![format!("https://media.example.es/{id}/1-salon.jpg")],
        price_dropped_at: None,
        agent_id: None,
        feed_id: None,
        descriptions: Default::default(),
    }
}

fn owned_by(owner_id: &str, mut property: Property) -> Property {
    property.owner_id = owner_id.into();
    property
}

fn owner(id: &str, wa_id: Option<&str>) -> Owner {
    Owner {
        id: id.into(),
        name: "Carmen Núñez".into(),
        wa_id: wa_id.map(wa),
        agent_id: wa_id.map(|_| "A-01".to_owned()),
    }
}

fn slot(id: &str, property_id: &str, starts: i64) -> Slot {
    Slot {
        id: id.into(),
        property_id: property_id.into(),
        starts_at: at(starts),
        minutes: 30,
        agent: "Javier".into(),
    }
}

fn appointment(id: &str, wa_id: &str, starts: i64, status: AppointmentStatus) -> Appointment {
    Appointment {
        id: id.into(),
        property_id: "P-1001".into(),
        slot_id: format!("S-{id}"),
        wa_id: wa(wa_id),
        starts_at: at(starts),
        status,
        created_at: at(-HOUR),
        reminder_sent_at: None,
        moved_from: None,
        follow_up: Default::default(),
    }
}

fn visit(id: &str, property_id: &str, wa_id: &str, visited: i64) -> Visit {
    Visit {
        id: id.into(),
        property_id: property_id.into(),
        wa_id: wa(wa_id),
        visited_at: at(visited),
        outcome: Some(VisitOutcome::WantsSecondVisit),
        feedback: Some("Muy luminoso, pero la cocina es pequeña".into()),
        rating: Some(4),
    }
}

fn offer(id: &str, property_id: &str, wa_id: &str, created: i64) -> Offer {
    Offer {
        id: id.into(),
        property_id: property_id.into(),
        wa_id: wa(wa_id),
        amount: 360_000,
        currency: "EUR".into(),
        conditions: Some("Sujeto a hipoteca".into()),
        status: OfferStatus::Submitted,
        created_at: at(created),
        answer: Default::default(),
    }
}

fn ids<'a>(records: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    records.into_iter().collect()
}

async fn every_record_round_trips(store: Arc<dyn RealEstateStore>) {
    let with_phone = owner("O-07", Some("34600111222"));
    let without_phone = owner("O-08", None);
    store
        .upsert_owners(&[with_phone.clone(), without_phone.clone()])
        .await
        .unwrap();
    assert_eq!(store.owner("O-07").await.unwrap(), Some(with_phone));
    assert_eq!(store.owner("O-08").await.unwrap(), Some(without_phone));
    assert_eq!(store.owner("O-99").await.unwrap(), None);

    let listing = property(
        "P-1001",
        "Málaga",
        Operation::Sale,
        ListingStatus::Available,
    );
    store
        .upsert_properties(std::slice::from_ref(&listing))
        .await
        .unwrap();
    assert_eq!(store.property("P-1001").await.unwrap(), Some(listing));
    assert_eq!(store.property("P-9999").await.unwrap(), None);

    let visit_slot = slot("S-P1001-202611271000", "P-1001", 0);
    store
        .upsert_slots(std::slice::from_ref(&visit_slot))
        .await
        .unwrap();
    assert_eq!(
        store.slot("S-P1001-202611271000").await.unwrap(),
        Some(visit_slot)
    );
    assert_eq!(store.slot("S-NOPE").await.unwrap(), None);

    let mut booked = appointment("A-1", "34611222333", 0, AppointmentStatus::Booked);
    booked.reminder_sent_at = Some(at(-10 * 60));
    store.save_appointment(&booked).await.unwrap();
    assert_eq!(store.appointment("A-1").await.unwrap(), Some(booked));
    assert_eq!(store.appointment("A-2").await.unwrap(), None);

    let full = visit("V-1", "P-1001", "34611222333", -HOUR);
    let bare = Visit {
        outcome: None,
        feedback: None,
        rating: None,
        ..visit("V-2", "P-1001", "34611222333", -2 * HOUR)
    };
    store
        .upsert_visits(&[full.clone(), bare.clone()])
        .await
        .unwrap();
    assert_eq!(store.visits_to("P-1001").await.unwrap(), [full, bare]);

    let conditional = offer("F-1", "P-1001", "34611222333", -HOUR);
    let plain = Offer {
        conditions: None,
        status: OfferStatus::Countered,
        amount: u64::from(u32::MAX) * 4,
        ..offer("F-2", "P-1001", "34611222333", -2 * HOUR)
    };
    store
        .upsert_offers(&[conditional.clone(), plain.clone()])
        .await
        .unwrap();
    assert_eq!(
        store.offers_for("P-1001").await.unwrap(),
        [conditional, plain]
    );
}

async fn an_upsert_replaces_by_id(store: Arc<dyn RealEstateStore>) {
    let first = property(
        "P-1001",
        "Madrid",
        Operation::Rent,
        ListingStatus::Available,
    );
    let second = Property {
        title: "Ático reformado".into(),
        price: 1_450,
        status: ListingStatus::Reserved,
        ..first.clone()
    };
    store
        .upsert_properties(std::slice::from_ref(&first))
        .await
        .unwrap();
    store
        .upsert_properties(std::slice::from_ref(&second))
        .await
        .unwrap();
    assert_eq!(
        store.properties(&PropertyFilter::default()).await.unwrap(),
        std::slice::from_ref(&second)
    );
    // Loading the same data again changes nothing.
    store
        .upsert_properties(std::slice::from_ref(&second))
        .await
        .unwrap();
    assert_eq!(
        store.properties(&PropertyFilter::default()).await.unwrap(),
        [second]
    );

    // Within one batch, the later record of an id wins.
    let renamed = Owner {
        name: "Carmen Núñez Ruiz".into(),
        ..owner("O-07", Some("34600111222"))
    };
    store
        .upsert_owners(&[owner("O-07", None), renamed.clone()])
        .await
        .unwrap();
    assert_eq!(store.owner("O-07").await.unwrap(), Some(renamed));

    let moved = slot("S-1", "P-1001", HOUR);
    store
        .upsert_slots(&[slot("S-1", "P-1001", 0)])
        .await
        .unwrap();
    store
        .upsert_slots(std::slice::from_ref(&moved))
        .await
        .unwrap();
    assert_eq!(
        store
            .slots("P-1001", at(-HOUR), at(2 * HOUR))
            .await
            .unwrap(),
        [moved]
    );

    let cancelled = appointment("A-1", "34611222333", 0, AppointmentStatus::Cancelled);
    store
        .save_appointment(&appointment(
            "A-1",
            "34611222333",
            0,
            AppointmentStatus::Booked,
        ))
        .await
        .unwrap();
    store.save_appointment(&cancelled).await.unwrap();
    assert_eq!(
        store.appointments_of(&wa("34611222333")).await.unwrap(),
        [cancelled]
    );

    let rated = Visit {
        rating: Some(2),
        ..visit("V-1", "P-1001", "34611222333", 0)
    };
    store
        .upsert_visits(&[visit("V-1", "P-1001", "34611222333", 0)])
        .await
        .unwrap();
    store
        .upsert_visits(std::slice::from_ref(&rated))
        .await
        .unwrap();
    assert_eq!(store.visits_to("P-1001").await.unwrap(), [rated]);

    let accepted = Offer {
        status: OfferStatus::Accepted,
        ..offer("F-1", "P-1001", "34611222333", 0)
    };
    store
        .upsert_offers(&[offer("F-1", "P-1001", "34611222333", 0)])
        .await
        .unwrap();
    store
        .upsert_offers(std::slice::from_ref(&accepted))
        .await
        .unwrap();
    assert_eq!(store.offers_for("P-1001").await.unwrap(), [accepted]);
}

async fn properties_are_filtered_and_come_by_id(store: Arc<dyn RealEstateStore>) {
    use ListingStatus::*;
    use Operation::*;
    store
        .upsert_properties(&[
            owned_by("O-1", property("P-1003", "Málaga", Sale, Available)),
            owned_by("O-2", property("P-1001", "malaga", Rent, Reserved)),
            owned_by("O-1", property("P-1002", "Madrid", Sale, Available)),
            owned_by("O-2", property("P-1004", "MÁLAGA", Sale, Sold)),
            owned_by("O-3", property("P-1005", "A Coruña", Rent, Available)),
        ])
        .await
        .unwrap();
    let found = async |filter: PropertyFilter| -> Vec<String> {
        let properties = store.properties(&filter).await.unwrap();
        properties.into_iter().map(|p| p.id).collect()
    };
    let in_city = |city: &str| PropertyFilter {
        city: Some(city.into()),
        ..PropertyFilter::default()
    };

    assert_eq!(
        found(PropertyFilter::default()).await,
        ids(["P-1001", "P-1002", "P-1003", "P-1004", "P-1005"])
    );
    for spelling in ["Málaga", "malaga", "MALAGA", "málaga", " Malaga "] {
        assert_eq!(
            found(in_city(spelling)).await,
            ids(["P-1001", "P-1003", "P-1004"]),
            "{spelling:?}"
        );
    }
    assert_eq!(found(in_city("a coruna")).await, ids(["P-1005"]));
    assert_eq!(found(in_city("Madrid")).await, ids(["P-1002"]));
    assert!(found(in_city("Sevilla")).await.is_empty());
    assert!(
        found(in_city("Mála")).await.is_empty(),
        "a city matches whole"
    );
    assert_eq!(
        found(PropertyFilter {
            operation: Some(Sale),
            ..PropertyFilter::default()
        })
        .await,
        ids(["P-1002", "P-1003", "P-1004"])
    );
    assert_eq!(
        found(PropertyFilter {
            available_only: true,
            ..PropertyFilter::default()
        })
        .await,
        ids(["P-1002", "P-1003", "P-1005"])
    );
    assert_eq!(
        found(PropertyFilter {
            owner_id: Some("O-2".into()),
            ..PropertyFilter::default()
        })
        .await,
        ids(["P-1001", "P-1004"])
    );
    assert_eq!(
        found(PropertyFilter {
            city: Some("malaga".into()),
            operation: Some(Sale),
            available_only: true,
            owner_id: Some("O-1".into()),
        })
        .await,
        ids(["P-1003"])
    );
}

async fn an_owner_is_recognised_by_their_whatsapp(store: Arc<dyn RealEstateStore>) {
    store
        .upsert_owners(&[
            owner("O-07", Some("34600111222")),
            owner("O-08", None),
            owner("O-09", Some("34600999888")),
        ])
        .await
        .unwrap();
    let found = store.owner_by_wa_id(&wa("34600999888")).await.unwrap();
    assert_eq!(found.map(|o| o.id).as_deref(), Some("O-09"));
    let found = store.owner_by_wa_id(&wa("34600111222")).await.unwrap();
    assert_eq!(found.map(|o| o.id).as_deref(), Some("O-07"));
    assert_eq!(
        store.owner_by_wa_id(&wa("34699000000")).await.unwrap(),
        None
    );
    // Those with a number, for the roles: O-08 has none.
    let on_whatsapp: Vec<String> = store
        .owners_on_whatsapp()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(on_whatsapp, ["O-07", "O-09"]);
}

async fn the_staff_come_by_id_with_their_numbers(store: Arc<dyn RealEstateStore>) {
    assert!(store.staff().await.unwrap().is_empty());
    let member = |id: &str, name: &str, wa_id: Option<&str>| zaguan::realestate::StaffMember {
        id: id.into(),
        name: name.into(),
        wa_id: wa_id.map(wa),
        notify_handoffs: wa_id.is_some(),
        hours: wa_id.map(|_| [("monday".to_owned(), vec!["9:00-14:00".to_owned()])].into()),
        works_holidays: wa_id.is_some(),
        visit_minutes: wa_id.map(|_| 45),
        zones: wa_id.map_or_else(Vec::new, |_| {
            vec!["Valencia".to_owned(), "Ruzafa".to_owned()]
        }),
        calendar_url: wa_id.map(|_| "https://calendar.example.es/lucia.ics".to_owned()),
        calendar_token: wa_id.map(|_| "t0ken".to_owned()),
        disabled_at: wa_id.map(|_| at(-HOUR)),
    };
    store
        .upsert_staff(&[
            member("A-02", "Javier", None),
            member("A-01", "Lucía", Some("34699000001")),
        ])
        .await
        .unwrap();
    store
        .upsert_staff(&[member("A-02", "Javier", Some("34699000002"))])
        .await
        .unwrap();
    assert_eq!(
        store.staff().await.unwrap(),
        [
            member("A-01", "Lucía", Some("34699000001")),
            member("A-02", "Javier", Some("34699000002"))
        ]
    );
}

async fn slots_come_by_start_within_their_window(store: Arc<dyn RealEstateStore>) {
    store
        .upsert_slots(&[
            slot("S-c", "P-1001", 2 * HOUR),
            slot("S-a", "P-1001", 0),
            slot("S-early", "P-1001", -1),
            slot("S-b", "P-1001", HOUR),
            slot("S-other", "P-1002", HOUR),
        ])
        .await
        .unwrap();
    let window = async |from: i64, to: i64| -> Vec<String> {
        let slots = store.slots("P-1001", at(from), at(to)).await.unwrap();
        slots.into_iter().map(|s| s.id).collect()
    };
    // From inclusive, to exclusive.
    assert_eq!(window(0, 2 * HOUR).await, ids(["S-a", "S-b"]));
    assert_eq!(
        window(-HOUR, 3 * HOUR).await,
        ids(["S-early", "S-a", "S-b", "S-c"])
    );
    assert_eq!(window(2 * HOUR, 2 * HOUR + 1).await, ids(["S-c"]));
    assert!(window(3 * HOUR, 4 * HOUR).await.is_empty());
    assert!(
        store
            .slots("P-9999", at(-HOUR), at(3 * HOUR))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn one_of_sixteen_racing_customers_gets_the_slot(store: Arc<dyn RealEstateStore>) {
    store
        .upsert_slots(&[slot("S-1", "P-1001", 0), slot("S-2", "P-1001", HOUR)])
        .await
        .unwrap();
    let claims: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let appointment_id = format!("A-{i}");
                let won = store.claim_slot("S-1", &appointment_id).await.unwrap();
                won.then_some(appointment_id)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for claim in claims {
        winners.extend(claim.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let winner = &winners[0];

    let both = ["S-1".to_owned(), "S-2".to_owned()];
    let claimed = store.claimed_slots(&both).await.unwrap();
    assert_eq!(claimed, HashSet::from(["S-1".to_owned()]));
    assert!(store.claimed_slots(&[]).await.unwrap().is_empty());
    assert!(
        !store.claim_slot("S-1", "A-late").await.unwrap(),
        "a taken slot stays taken"
    );
    assert!(
        store.claim_slot("S-1", winner).await.unwrap(),
        "claiming again for the appointment that holds it is a retry, not a conflict"
    );

    store.release_slot("S-1", "A-late").await.unwrap();
    assert_eq!(
        store.claimed_slots(&both).await.unwrap().len(),
        1,
        "only the holder frees a slot"
    );
    store.release_slot("S-1", winner).await.unwrap();
    assert!(store.claimed_slots(&both).await.unwrap().is_empty());
    store.release_slot("S-1", winner).await.unwrap();

    assert!(store.claim_slot("S-1", "A-next").await.unwrap());
    assert!(!store.claim_slot("S-1", winner).await.unwrap());
    assert_eq!(
        store.claimed_slots(&both).await.unwrap(),
        HashSet::from(["S-1".to_owned()])
    );
}

async fn appointments_come_by_start_and_reminders_see_only_booked_ones(
    store: Arc<dyn RealEstateStore>,
) {
    use AppointmentStatus::*;
    for a in [
        appointment("A-3", "34611222333", 3 * HOUR, Booked),
        appointment("A-1", "34611222333", HOUR, Booked),
        appointment("A-2", "34611222333", 2 * HOUR, Cancelled),
        appointment("A-4", "34622333444", 2 * HOUR, Booked),
        appointment("A-5", "34622333444", 0, Done),
        appointment("A-6", "34622333444", 4 * HOUR, Booked),
    ] {
        store.save_appointment(&a).await.unwrap();
    }
    let of = async |wa_id: &str| -> Vec<String> {
        let appointments = store.appointments_of(&wa(wa_id)).await.unwrap();
        appointments.into_iter().map(|a| a.id).collect()
    };
    assert_eq!(of("34611222333").await, ids(["A-1", "A-2", "A-3"]));
    assert_eq!(of("34622333444").await, ids(["A-5", "A-4", "A-6"]));
    assert!(of("34699000000").await.is_empty());

    let booked = async |from: i64, to: i64| -> Vec<String> {
        let appointments = store.booked_between(at(from), at(to)).await.unwrap();
        appointments.into_iter().map(|a| a.id).collect()
    };
    assert_eq!(booked(0, 5 * HOUR).await, ids(["A-1", "A-4", "A-3", "A-6"]));
    // From inclusive, to exclusive.
    assert_eq!(booked(HOUR, 3 * HOUR).await, ids(["A-1", "A-4"]));
    assert!(booked(-HOUR, HOUR).await.is_empty());
}

async fn a_reminder_is_claimed_once(store: Arc<dyn RealEstateStore>) {
    store
        .save_appointment(&appointment(
            "A-1",
            "34611222333",
            HOUR,
            AppointmentStatus::Booked,
        ))
        .await
        .unwrap();
    assert!(store.claim_reminder("A-1", at(0)).await.unwrap());
    assert!(!store.claim_reminder("A-1", at(60)).await.unwrap());
    let reminded = store.appointment("A-1").await.unwrap().unwrap();
    assert_eq!(reminded.reminder_sent_at, Some(at(0)));

    store
        .save_appointment(&appointment(
            "A-2",
            "34611222333",
            2 * HOUR,
            AppointmentStatus::Booked,
        ))
        .await
        .unwrap();
    let claims: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.claim_reminder("A-2", at(i)).await.unwrap() })
        })
        .collect();
    let mut winners = 0;
    for claim in claims {
        winners += usize::from(claim.await.unwrap());
    }
    assert_eq!(winners, 1);
    let reminded = store.appointment("A-2").await.unwrap().unwrap();
    assert!(reminded.reminder_sent_at.is_some());

    // A reminder is claimed once even for an appointment the store does not hold.
    assert!(store.claim_reminder("A-ghost", at(0)).await.unwrap());
    assert!(!store.claim_reminder("A-ghost", at(0)).await.unwrap());
    assert_eq!(store.appointment("A-ghost").await.unwrap(), None);
}

async fn visits_and_offers_come_newest_first(store: Arc<dyn RealEstateStore>) {
    store
        .upsert_visits(&[
            visit("V-1", "P-1001", "34611222333", -3 * HOUR),
            visit("V-2", "P-1002", "34611222333", -HOUR),
            visit("V-3", "P-1001", "34622333444", -2 * HOUR),
            visit("V-4", "P-1001", "34611222333", -4 * HOUR),
        ])
        .await
        .unwrap();
    let visit_ids =
        |visits: Vec<Visit>| -> Vec<String> { visits.into_iter().map(|v| v.id).collect() };
    assert_eq!(
        visit_ids(store.visits_of(&wa("34611222333")).await.unwrap()),
        ids(["V-2", "V-1", "V-4"])
    );
    assert_eq!(
        visit_ids(store.visits_to("P-1001").await.unwrap()),
        ids(["V-3", "V-1", "V-4"])
    );
    assert!(
        store
            .visits_of(&wa("34699000000"))
            .await
            .unwrap()
            .is_empty()
    );

    store
        .upsert_offers(&[
            offer("F-1", "P-1001", "34611222333", -3 * HOUR),
            offer("F-2", "P-1001", "34622333444", -HOUR),
            offer("F-3", "P-1002", "34611222333", -2 * HOUR),
            offer("F-4", "P-1001", "34611222333", 0),
        ])
        .await
        .unwrap();
    let offer_ids =
        |offers: Vec<Offer>| -> Vec<String> { offers.into_iter().map(|o| o.id).collect() };
    assert_eq!(
        offer_ids(store.offers_of(&wa("34611222333")).await.unwrap()),
        ids(["F-4", "F-3", "F-1"])
    );
    assert_eq!(
        offer_ids(store.offers_for("P-1001").await.unwrap()),
        ids(["F-4", "F-2", "F-1"])
    );
    assert!(store.offers_for("P-9999").await.unwrap().is_empty());
}

/// An outcome and an answer are recorded once, by whoever comes first; the others read it.
async fn outcomes_and_answers_are_recorded_once(store: Arc<dyn RealEstateStore>) {
    let mut booked = appointment("A-1", "34611222333", -2 * HOUR, AppointmentStatus::Booked);
    booked.follow_up.agent = Some("Marta".into());
    booked.follow_up.notice = Some("booked:1".into());
    store.save_appointment(&booked).await.unwrap();
    assert_eq!(
        ids(store
            .notices_due(10)
            .await
            .unwrap()
            .iter()
            .map(|a| a.id.as_str())),
        ["A-1"]
    );
    // A newer notice is not cleared by the older one's.
    store.clear_notice("A-1", "booked:0").await.unwrap();
    assert_eq!(store.notices_due(10).await.unwrap().len(), 1);
    store.clear_notice("A-1", "booked:1").await.unwrap();
    assert!(store.notices_due(10).await.unwrap().is_empty());

    assert_eq!(store.outcomes_unasked(at(0), 10).await.unwrap().len(), 1);
    assert!(
        store
            .outcomes_unasked(at(-3 * HOUR), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.claim_outcome_question("A-1", at(0)).await.unwrap());
    assert!(!store.claim_outcome_question("A-1", at(1)).await.unwrap());
    assert!(store.outcomes_unasked(at(0), 10).await.unwrap().is_empty());

    let first = store
        .settle_appointment("A-1", AppointmentStatus::Done, "agent:Marta", at(10))
        .await
        .unwrap()
        .unwrap();
    assert!(first.is_now());
    let second = store
        .settle_appointment("A-1", AppointmentStatus::NoShow, "cli", at(20))
        .await
        .unwrap()
        .unwrap();
    assert!(!second.is_now());
    let recorded = second.into_record();
    assert_eq!(recorded.status, AppointmentStatus::Done);
    assert_eq!(
        recorded.follow_up.outcome_by.as_deref(),
        Some("agent:Marta")
    );
    assert_eq!(recorded.follow_up.outcome_at, Some(at(10)));
    assert_eq!(recorded.follow_up.agent.as_deref(), Some("Marta"));
    assert!(
        store
            .settle_appointment("A-9", AppointmentStatus::Done, "cli", at(0))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store
            .appointments_between(at(-3 * HOUR), at(0))
            .await
            .unwrap()
            .len(),
        1
    );

    store
        .upsert_offers(&[offer("F-1", "P-1001", "34611222333", -HOUR)])
        .await
        .unwrap();
    let owner = wa("34699888777");
    store.await_counter("F-1", Some(&owner)).await.unwrap();
    assert_eq!(
        store
            .counter_awaited_from(&owner)
            .await
            .unwrap()
            .map(|o| o.id),
        Some("F-1".into())
    );
    let countered = OfferAnswer {
        answered_at: Some(at(0)),
        answered_by: Some("owner:Ana".into()),
        counter_amount: Some(250_000),
        notice: Some("answered:countered".into()),
        awaiting_counter_from: None,
    };
    let answered = store
        .answer_offer(
            "F-1",
            OfferStatus::Submitted,
            OfferStatus::Countered,
            &countered,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(answered.is_now());
    assert!(store.counter_awaited_from(&owner).await.unwrap().is_none());
    // A second answer to the submitted offer finds it countered.
    let late = store
        .answer_offer(
            "F-1",
            OfferStatus::Submitted,
            OfferStatus::Rejected,
            &OfferAnswer::default(),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(!late.is_now());
    let stored = store.offer("F-1").await.unwrap().unwrap();
    assert_eq!(stored.status, OfferStatus::Countered);
    assert_eq!(stored.answer, countered);
    assert_eq!(store.offer_notices_due(10).await.unwrap().len(), 1);
    store
        .offer_notice("F-1", "answered:countered", false)
        .await
        .unwrap();
    assert!(store.offer_notices_due(10).await.unwrap().is_empty());
}

crate::both_stores!(multi_thread |s| (s.realestate.clone()) =>
    every_record_round_trips,
    an_upsert_replaces_by_id,
    properties_are_filtered_and_come_by_id,
    an_owner_is_recognised_by_their_whatsapp,
    the_staff_come_by_id_with_their_numbers,
    slots_come_by_start_within_their_window,
    one_of_sixteen_racing_customers_gets_the_slot,
    appointments_come_by_start_and_reminders_see_only_booked_ones,
    a_reminder_is_claimed_once,
    visits_and_offers_come_newest_first,
    outcomes_and_answers_are_recorded_once,
);

/// The real-estate store on the test's database, its indexes created (twice: it is idempotent).
async fn mongo_store(db: &common::TestMongo) -> MongoRealEstate {
    let store = MongoRealEstate::new(db.store.pool().clone());
    store.ensure_indexes().await.unwrap();
    store.ensure_indexes().await.unwrap();
    store
}

#[tokio::test]
async fn documents_read_well_in_mongosh() {
    use bson::{Bson, doc};
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = mongo_store(&db).await;
    store
        .upsert_properties(&[property(
            "P-1001",
            "Málaga",
            Operation::Sale,
            ListingStatus::Available,
        )])
        .await
        .unwrap();
    store
        .save_appointment(&appointment(
            "A-1",
            "34611222333",
            0,
            AppointmentStatus::Booked,
        ))
        .await
        .unwrap();
    assert!(store.claim_slot("S-A-1", "A-1").await.unwrap());
    assert!(store.claim_reminder("A-1", at(-60)).await.unwrap());

    let raw = async |collection: &str, id: &str| {
        db.store
            .database()
            .collection::<bson::Document>(collection)
            .find_one(doc! {"_id": id})
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{collection} {id}"))
    };
    let listing = raw("properties", "P-1001").await;
    assert_eq!(listing.get_str("operation"), Ok("sale"));
    assert_eq!(listing.get_str("kind"), Ok("penthouse"));
    assert_eq!(listing.get_str("status"), Ok("available"));
    assert_eq!(
        listing.get_datetime("listed_at").unwrap().to_chrono(),
        at(-30 * 24 * HOUR)
    );
    assert_eq!(
        listing.get_document("location").unwrap(),
        &doc! {"type": "Point", "coordinates": [-4.421_6, 36.721_4]}
    );
    assert!(matches!(listing.get("price"), Some(Bson::Int64(385_000))));

    let booked = raw("appointments", "A-1").await;
    assert_eq!(booked.get_str("wa_id"), Ok("34611222333"));
    assert_eq!(booked.get_str("status"), Ok("booked"));
    assert!(matches!(booked.get("starts_at"), Some(Bson::DateTime(_))));
    assert_eq!(
        booked.get_datetime("reminder_sent_at").unwrap().to_chrono(),
        at(-60)
    );
    assert_eq!(
        raw("slot_claims", "S-A-1").await.get_str("appointment_id"),
        Ok("A-1")
    );
    assert!(matches!(
        raw("reminders", "A-1").await.get("at"),
        Some(Bson::DateTime(_))
    ));
    db.drop().await;
}

#[tokio::test]
async fn a_listing_edited_into_nonsense_is_skipped_not_fatal() {
    use bson::doc;
    let Some(db) = common::TestMongo::new().await else {
        return;
    };
    let store = mongo_store(&db).await;
    store
        .upsert_properties(&[property(
            "P-1001",
            "Málaga",
            Operation::Sale,
            ListingStatus::Available,
        )])
        .await
        .unwrap();
    db.store
        .database()
        .collection::<bson::Document>("properties")
        .insert_one(doc! {"_id": "P-1002", "city": "Málaga", "status": "en venta"})
        .await
        .unwrap();
    let listed = store.properties(&PropertyFilter::default()).await.unwrap();
    assert_eq!(
        listed.into_iter().map(|p| p.id).collect::<Vec<_>>(),
        ["P-1001"]
    );
    assert!(matches!(
        store.property("P-1002").await,
        Err(StoreError::Unexpected(_))
    ));
    db.drop().await;
}

#[tokio::test]
async fn an_unreachable_mongodb_is_reported_as_unavailable() {
    let unreachable = common::unreachable_mongo().await;
    let store = MongoRealEstate::new(unreachable.pool().clone());
    assert!(matches!(
        store.property("P-1001").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.claim_slot("S-1", "A-1").await,
        Err(StoreError::Unavailable(_))
    ));
}
