use crate::realestate::store::{OwnerStore, PropertyStore, SlotStore, VisitStore};
use std::collections::{HashMap, HashSet};

use chrono::Timelike;

use super::neighbourhoods::{NEIGHBOURHOODS, Neighbourhood};
use super::*;
use crate::realestate::MemoryRealEstate;
use crate::realestate::PropertyType;
use crate::realestate::PropertyType::Penthouse;
use crate::realestate::store::PropertyFilter;
use crate::realestate::{ListingStatus, OfferStatus, Operation, VisitOutcome};
use chrono::{Datelike, Days, Weekday};

const MADRID: Tz = chrono_tz::Europe::Madrid;

/// Each city's "kilometre zero".
const CITY_CENTRES: [(&str, GeoPoint); 4] = [
    (
        "Madrid",
        GeoPoint {
            lat: 40.4168,
            lon: -3.7038,
        },
    ),
    (
        "Valencia",
        GeoPoint {
            lat: 39.4699,
            lon: -0.3763,
        },
    ),
    (
        "Sevilla",
        GeoPoint {
            lat: 37.3858,
            lon: -5.9931,
        },
    ),
    (
        "Málaga",
        GeoPoint {
            lat: 36.7213,
            lon: -4.4214,
        },
    ),
];

fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 26).unwrap()
}

fn set() -> DemoSet {
    demo_set(today(), MADRID)
}

fn hood(name: &str) -> &'static Neighbourhood {
    NEIGHBOURHOODS.iter().find(|n| n.name == name).unwrap()
}

fn unique<'a>(ids: impl Iterator<Item = &'a str>) -> bool {
    let ids: Vec<&str> = ids.collect();
    ids.iter().collect::<HashSet<_>>().len() == ids.len()
}

#[test]
fn the_portfolio_is_large_and_spread_over_cities() {
    let set = set();
    assert!(set.properties.len() >= 64, "{}", set.properties.len());
    assert_eq!(set.cities().len(), 4);
    assert_eq!(set.owners.len(), 12);
    assert!(set.visits.len() >= 15);
    assert!(set.offers.len() >= 8);
    assert!(set.slots.len() >= 500, "{}", set.slots.len());
    for hood in &NEIGHBOURHOODS {
        assert!(set.properties.iter().any(|p| p.neighbourhood == hood.name));
    }
}

#[test]
fn ids_are_unique_per_kind_and_follow_the_formats() {
    let set = set();
    assert!(unique(set.owners.iter().map(|o| o.id.as_str())));
    assert!(unique(set.properties.iter().map(|p| p.id.as_str())));
    assert!(unique(set.slots.iter().map(|s| s.id.as_str())));
    assert!(unique(set.visits.iter().map(|v| v.id.as_str())));
    assert!(unique(set.offers.iter().map(|o| o.id.as_str())));
    assert_eq!(set.properties[0].id, "P-1001");
    assert_eq!(set.owners[0].id, "O-01");
    assert_eq!(set.owners[11].id, "O-12");
    assert_eq!(set.visits[0].id, "V-0001");
    assert_eq!(set.offers[0].id, "F-0001");
}

#[test]
fn every_property_has_an_owner_and_three_owners_can_chat() {
    let set = set();
    let owners: HashSet<&str> = set.owners.iter().map(|o| o.id.as_str()).collect();
    for property in &set.properties {
        assert!(
            owners.contains(property.owner_id.as_str()),
            "{}",
            property.id
        );
    }
    for owner in &set.owners {
        assert!(set.properties_of(&owner.id).count() >= 1, "{}", owner.id);
    }
    let chatting: Vec<(&str, &str)> = set
        .owners_on_whatsapp()
        .map(|o| (o.id.as_str(), o.wa_id.as_ref().unwrap().as_str()))
        .collect();
    assert_eq!(
        chatting,
        [
            ("O-01", "34600000001"),
            ("O-05", "34600000005"),
            ("O-10", "34600000010")
        ]
    );
    for (id, _) in chatting {
        assert!(
            set.properties_of(id).count() >= 3,
            "{id} should own several"
        );
    }
}

#[test]
fn listings_are_realistic() {
    let set = set();
    let sales = set
        .properties
        .iter()
        .filter(|p| p.operation == Operation::Sale)
        .count();
    let share = sales as f64 / set.properties.len() as f64;
    assert!((0.6..=0.7).contains(&share), "{share}");
    let available = set
        .properties
        .iter()
        .filter(|p| p.status == ListingStatus::Available)
        .count();
    assert!(available * 10 >= set.properties.len() * 8);
    let statuses: HashSet<ListingStatus> = set.properties.iter().map(|p| p.status).collect();
    assert_eq!(statuses.len(), 5, "{statuses:?}");
    let kinds: HashSet<PropertyType> = set.properties.iter().map(|p| p.kind).collect();
    assert_eq!(kinds.len(), PropertyType::ALL.len());
    let six_months_ago = at_local(MADRID, today() - Days::new(LISTING_DAYS), 0, 0);
    let start_of_today = at_local(MADRID, today(), 0, 0);
    for p in &set.properties {
        assert!(
            (35..=250).contains(&p.area_m2),
            "{}: {} m²",
            p.id,
            p.area_m2
        );
        assert!(
            p.bedrooms <= 5 && (1..=3).contains(&p.bathrooms),
            "{}",
            p.id
        );
        assert_eq!(p.currency, "EUR");
        assert!(p.amenities.iter().all(|a| AMENITIES.contains(&a.as_str())));
        assert!(p.listed_at >= six_months_ago && p.listed_at < start_of_today);
        let place = hood(&p.neighbourhood).called;
        assert!(p.title.ends_with(&format!(" en {place}")), "{}", p.title);
        assert!(
            !p.description.contains("con amueblado"),
            "{}",
            p.description
        );
        let sentences = p.description.matches(". ").count() + 1;
        assert!((2..=3).contains(&sentences), "{}", p.description);
        if matches!(p.status, ListingStatus::Sold) {
            assert_eq!(p.operation, Operation::Sale);
        }
        if matches!(p.status, ListingStatus::Rented) {
            assert_eq!(p.operation, Operation::Rent);
        }
    }
    let penthouse = set.properties.iter().find(|p| p.kind == Penthouse).unwrap();
    assert!(penthouse.title.starts_with("Ático con terraza en "));
    assert!(penthouse.address.ends_with(", ático"));
}

#[test]
fn prices_per_square_metre_are_within_each_neighbourhoods_market() {
    for p in &set().properties {
        let hood = hood(&p.neighbourhood);
        let (low, high) = match p.operation {
            Operation::Sale => hood.sale_eur_m2,
            Operation::Rent => hood.rent_eur_m2,
        };
        let per_m2 = p.price as f64 / f64::from(p.area_m2);
        // Prices are rounded to 1,000 € (sale) or 10 € (rent).
        let (low, high) = (f64::from(low) * 0.98, f64::from(high) * 1.02);
        assert!((low..=high).contains(&per_m2), "{}: {per_m2:.0} €/m²", p.id);
        match p.operation {
            Operation::Sale => assert!((2_450.0..=12_250.0).contains(&per_m2)),
            Operation::Rent => assert!((11.7..=25.5).contains(&per_m2)),
        }
    }
    let salamanca = hood("Salamanca");
    assert_eq!(salamanca.sale_eur_m2, (7_000, 12_000));
}

#[test]
fn locations_are_in_their_neighbourhood_and_city() {
    for p in &set().properties {
        let (_, centre) = CITY_CENTRES.iter().find(|(c, _)| *c == p.city).unwrap();
        let km = p.location.distance_km(centre);
        assert!(km < 10.0, "{} is {km:.1} km from {}", p.id, p.city);
        let km = p.location.distance_km(&hood(&p.neighbourhood).centre);
        assert!(km < 1.0, "{} is {km:.1} km from {}", p.id, p.neighbourhood);
    }
}

#[test]
fn slots_are_in_the_next_three_weeks_on_working_hours() {
    // A week crossing the end of summer time too.
    for today in [today(), NaiveDate::from_ymd_opt(2026, 10, 20).unwrap()] {
        let set = demo_set(today, MADRID);
        let properties: HashMap<&str, &Property> =
            set.properties.iter().map(|p| (p.id.as_str(), p)).collect();
        for slot in &set.slots {
            let property = properties[slot.property_id.as_str()];
            assert_eq!(property.status, ListingStatus::Available);
            let local = slot.starts_at.with_timezone(&MADRID);
            let date = local.date_naive();
            assert!(
                date > today && date <= today + Days::new(SLOT_DAYS),
                "{}",
                slot.id
            );
            let time = (local.hour(), local.minute());
            assert!(VISIT_TIMES.contains(&time), "{}", slot.id);
            match date.weekday() {
                Weekday::Sun => panic!("{} is on a Sunday", slot.id),
                Weekday::Sat => assert!(local.hour() < 14, "{}", slot.id),
                _ => {}
            }
            let expected = format!(
                "S-{}-{}",
                property.id.replace('-', ""),
                local.format("%Y%m%d%H%M")
            );
            assert_eq!(slot.id, expected);
            assert_eq!(slot.minutes, 45);
            assert!(AGENTS.contains(&slot.agent.as_str()));
        }
        let available = set
            .properties
            .iter()
            .filter(|p| p.status == ListingStatus::Available);
        for p in available {
            let n = set.slots.iter().filter(|s| s.property_id == p.id).count();
            assert!((8..=24).contains(&n), "{}: {n} slots", p.id);
        }
    }
}

#[test]
fn visits_are_last_month_and_offers_follow_them() {
    // Whatever the day of the week the set is seeded on.
    for offset in 0..7 {
        visits_and_offers_hold(today() + Days::new(offset));
    }
}

fn visits_and_offers_hold(today: NaiveDate) {
    let set = demo_set(today, MADRID);
    let properties: HashMap<&str, &Property> =
        set.properties.iter().map(|p| (p.id.as_str(), p)).collect();
    let start_of_today = at_local(MADRID, today, 0, 0);
    let month_ago = at_local(MADRID, today - Days::new(30), 0, 0);
    for visit in &set.visits {
        assert!(properties.contains_key(visit.property_id.as_str()));
        assert!(visit.visited_at >= month_ago && visit.visited_at < start_of_today);
        assert!(DEMO_CUSTOMERS.contains(&visit.wa_id.as_str()));
        assert_eq!(visit.outcome.is_some(), visit.feedback.is_some());
        assert_eq!(visit.outcome.is_some(), visit.rating.is_some());
        assert!(visit.rating.is_none_or(|r| (1..=5).contains(&r)));
    }
    assert!(
        set.visits
            .windows(2)
            .all(|w| w[0].visited_at <= w[1].visited_at)
    );
    let outcomes: HashSet<_> = set.visits.iter().filter_map(|v| v.outcome).collect();
    assert_eq!(outcomes.len(), VisitOutcome::ALL.len());

    for offer in &set.offers {
        let property = properties[offer.property_id.as_str()];
        assert!(offer.amount < property.price, "{}", offer.id);
        let share = offer.amount as f64 / property.price as f64;
        assert!((0.90..=0.98).contains(&share), "{}: {share}", offer.id);
        assert_eq!(offer.currency, "EUR");
        assert!(offer.created_at < start_of_today, "{}", offer.id);
        let visited = set.visits.iter().any(|v| {
            v.property_id == offer.property_id
                && v.wa_id == offer.wa_id
                && v.outcome == Some(VisitOutcome::MadeOffer)
                && v.visited_at < offer.created_at
        });
        assert!(visited, "{} follows no visit", offer.id);
        let reserved = property.status == ListingStatus::Reserved;
        assert_eq!(
            offer.status == OfferStatus::Accepted,
            reserved,
            "{}",
            offer.id
        );
    }
    let reserved = set
        .properties
        .iter()
        .filter(|p| p.status == ListingStatus::Reserved)
        .count();
    let accepted = set
        .offers
        .iter()
        .filter(|o| o.status == OfferStatus::Accepted)
        .count();
    assert_eq!(accepted, reserved);
}

#[test]
fn nobody_visits_two_places_at_once() {
    for offset in 0..14 {
        let set = demo_set(today() + Days::new(offset), MADRID);
        let visits: HashSet<(&str, DateTime<Utc>)> = set
            .visits
            .iter()
            .map(|v| (v.wa_id.as_str(), v.visited_at))
            .collect();
        assert_eq!(visits.len(), set.visits.len(), "seeded on day +{offset}");
    }
}

#[test]
fn the_same_day_gives_the_same_set_and_another_day_the_same_ids() {
    assert_eq!(set(), set());
    let later = demo_set(today() + Days::new(3), MADRID);
    let ids = |set: &DemoSet| {
        let properties: Vec<String> = set.properties.iter().map(|p| p.id.clone()).collect();
        let visits: Vec<String> = set.visits.iter().map(|v| v.id.clone()).collect();
        let offers: Vec<String> = set.offers.iter().map(|o| o.id.clone()).collect();
        (properties, visits, offers)
    };
    assert_eq!(ids(&set()), ids(&later));
    let titles =
        |set: &DemoSet| -> Vec<String> { set.properties.iter().map(|p| p.title.clone()).collect() };
    assert_eq!(titles(&set()), titles(&later));
}

#[tokio::test]
async fn seeding_loads_everything_and_twice_changes_nothing() {
    let store = MemoryRealEstate::new();
    let set = set();
    let counts = seed(&store, &set).await.unwrap();
    assert_eq!(
        counts,
        SeedCounts {
            owners: set.owners.len(),
            staff: set.staff.len(),
            properties: set.properties.len(),
            slots: set.slots.len(),
            visits: set.visits.len(),
            offers: set.offers.len(),
        }
    );
    seed(&store, &set).await.unwrap();
    let stored = store.properties(&PropertyFilter::default()).await.unwrap();
    assert_eq!(stored.len(), set.properties.len());
    let owner = store
        .owner_by_wa_id(&demo_wa_id("34600000005"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner.id, "O-05");
    let first = &set.slots[0];
    let from = first.starts_at - chrono::Duration::days(1);
    let to = from + chrono::Duration::days(SLOT_DAYS as i64 + 2);
    let slots = store.slots(&first.property_id, from, to).await.unwrap();
    let expected = set
        .slots
        .iter()
        .filter(|s| s.property_id == first.property_id)
        .count();
    assert_eq!(slots.len(), expected);
    let customer = demo_wa_id(DEMO_CUSTOMERS[1]);
    assert_eq!(
        store.visits_of(&customer).await.unwrap().len(),
        set.visits.iter().filter(|v| v.wa_id == customer).count()
    );
}
