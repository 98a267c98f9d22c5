//! The figures are those of `realestate::mortgage`'s tests, computed independently with
//! Python's `decimal`.

use std::collections::BTreeSet;

use chrono::{TimeZone, Utc};

use super::*;
use crate::domain::GeoPoint;
use crate::domain::Role;
use crate::domain::WaId;
use crate::engine::Tool as _;
use crate::realestate::store::PropertyStore;
use crate::realestate::{ListingStatus, MemoryRealEstate, PropertyType};
use serde_json::json;

fn property(id: &str, operation: Operation, price: u64, currency: &str) -> Property {
    Property {
        id: id.into(),
        title: "Ático con terraza".into(),
        description: "Ático luminoso con terraza de 30 m².".into(),
        operation,
        kind: PropertyType::Penthouse,
        city: "Madrid".into(),
        neighbourhood: "Chamberí".into(),
        address: "Calle de Fuencarral 120".into(),
        location: GeoPoint {
            lat: 40.4319,
            lon: -3.7020,
        },
        price,
        currency: currency.into(),
        bedrooms: 2,
        bathrooms: 2,
        area_m2: 95,
        amenities: vec!["terraza".into(), "ascensor".into()],
        status: ListingStatus::Available,
        owner_id: "O-07".into(),
        listed_at: Utc.with_ymd_and_hms(2026, 1, 15, 9, 0, 0).unwrap(),
        photos: Vec::new(),
        price_dropped_at: None,
        agent_id: None,
        feed_id: None,
        descriptions: Default::default(),
    }
}

async fn tool() -> SimulateMortgage {
    let store = MemoryRealEstate::new();
    store
        .upsert_properties(&[
            property("P-1001", Operation::Sale, 450_000, "EUR"),
            property("P-2001", Operation::Rent, 1_450, "EUR"),
            property("P-3001", Operation::Sale, 312_500, "USD"),
        ])
        .await
        .unwrap();
    SimulateMortgage::new(Arc::new(store))
}

fn context() -> ToolContext {
    ToolContext::new(
        WaId::parse("34600111222").unwrap(),
        Role::Prospect,
        Utc::now(),
    )
}

async fn run(args: Value) -> Result<String, ToolError> {
    tool()
        .await
        .run(args, &context())
        .await
        .map(|output| output.text)
}

async fn invalid(args: Value) -> String {
    match run(args).await {
        Err(ToolError::InvalidArgs(text)) => text,
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

#[tokio::test]
async fn a_listing_is_simulated_with_its_price_and_the_defaults() {
    // 360.000 € at 3 % over 30 years: 1.517,77 € (exact 1517.7745…), last 1.520,39 €.
    assert_eq!(
        run(json!({"property_id": "P-1001"})).await.unwrap(),
        "Hipoteca para P-1001 (ático en Chamberí, 450.000 €): entrada 90.000 € (20 %), \
         préstamo 360.000 €, 30 años al 3,00 % (tipo de referencia) → cuota 1.517,77 €/mes \
         (la última, 1.520,39 €); intereses totales 186.399,82 €; total pagado al banco \
         546.399,82 €."
    );
}

#[tokio::test]
async fn a_bare_price_is_simulated_in_euros() {
    let text = run(json!({
        "price": 250000,
        "down_payment": 50000.0,
        "years": 25,
        "annual_rate_percent": 3,
    }))
    .await
    .unwrap();
    assert_eq!(
        text,
        "Hipoteca para una vivienda de 250.000 €: entrada 50.000 € (20 %), préstamo \
         200.000 €, 25 años al 3,00 % → cuota 948,42 €/mes (la última, 949,60 €); \
         intereses totales 84.527,18 €; total pagado al banco 284.527,18 €."
    );
}

#[tokio::test]
async fn a_price_with_a_listing_is_simulated_instead_of_the_listed_one() {
    // 187.500 − 37.500 = 150.000 € at 2,5 % over 30 years: 592,68 €.
    let text = run(json!({
        "property_id": "P-1001",
        "price": 187500,
        "down_payment": 50000,
        "annual_rate_percent": 2.5,
        "years": null,
    }))
    .await
    .unwrap();
    assert!(
        text.starts_with(
            "Hipoteca para P-1001 (ático en Chamberí) a un precio de 187.500 € (anunciado a \
             450.000 €): entrada 50.000 € (26,7 %), préstamo 137.500 €, 30 años al 2,50 %"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_listing_in_another_currency_is_written_with_its_code() {
    let text = run(json!({"property_id": "P-3001", "down_payment": 62500}))
        .await
        .unwrap();
    assert!(
        text.starts_with(
            "Hipoteca para P-3001 (ático en Chamberí, 312.500 USD): entrada 62.500 USD (20 %), \
             préstamo 250.000 USD,"
        ),
        "{text}"
    );
    assert!(text.contains(" USD/mes"), "{text}");
}

#[tokio::test]
async fn a_schedule_that_ends_early_says_at_which_instalment() {
    // Loan 1.339 € at 11,12 % over 40 years: the payment rounded up repays it at 479.
    let text = run(json!({"price": 1674, "annual_rate_percent": 11.12, "years": 40}))
        .await
        .unwrap();
    assert!(
        text.contains("cuota 12,56 €/mes (la última, la n.º 479, 9,96 €)"),
        "{text}"
    );
}

#[tokio::test]
async fn without_a_price_or_a_listing_the_model_is_told_what_to_give() {
    assert_eq!(
        invalid(json!({"years": 30})).await,
        "give `property_id` (the listing's price is used) or `price`"
    );
    assert_eq!(
        invalid(json!({"property_id": null, "price": null})).await,
        "give `property_id` (the listing's price is used) or `price`"
    );
}

#[tokio::test]
async fn an_unknown_listing_is_refused() {
    assert_eq!(
        invalid(json!({"property_id": "P-9999"})).await,
        "no property P-9999; use the id from the search results"
    );
}

#[tokio::test]
async fn a_listing_for_rent_is_refused() {
    assert_eq!(
        invalid(json!({"property_id": "P-2001"})).await,
        "P-2001 is for rent (1.450 €/mes): a mortgage is only for buying; simulate a \
         property for sale or give a `price`"
    );
}

#[tokio::test]
async fn a_term_out_of_range_or_of_the_wrong_type_is_refused() {
    assert_eq!(
        invalid(json!({"price": 300000, "years": 50})).await,
        "years must be between 5 and 40, not 50"
    );
    assert_eq!(
        invalid(json!({"price": 300000, "years": 3})).await,
        "years must be between 5 and 40, not 3"
    );
    for years in [json!("30"), json!(30.5), json!(-30)] {
        assert_eq!(
            invalid(json!({"price": 300000, "years": years})).await,
            format!("`years` must be a whole number of years from 5 to 40, e.g. 30; not {years}")
        );
    }
}

#[tokio::test]
async fn arguments_of_the_wrong_type_name_the_field() {
    assert_eq!(
        invalid(json!({"price": "450.000"})).await,
        "`price` must be a whole amount in currency units, as a number without separators, \
         e.g. 450000; not \"450.000\""
    );
    assert_eq!(
        invalid(json!({"price": 300000, "down_payment": 60000.5})).await,
        "`down_payment` must be a whole amount in currency units, as a number without \
         separators, e.g. 90000; not 60000.5"
    );
    assert_eq!(
        invalid(json!({"property_id": 1001})).await,
        "`property_id` must be a listing id like \"P-1001\", not 1001"
    );
    assert_eq!(
        invalid(json!({"price": 300000, "annual_rate_percent": "3 %"})).await,
        "`annual_rate_percent` must be a number of percent like 2.95 (for 2,95 %), not \"3 %\""
    );
    assert_eq!(
        invalid(json!({"price": 300000, "currency": "EUR"})).await,
        "unknown field `currency`; the fields are property_id, price, down_payment, years, \
         annual_rate_percent"
    );
    assert!(
        invalid(json!([300000]))
            .await
            .starts_with("the arguments must be")
    );
}

#[tokio::test]
async fn the_refusals_of_the_simulation_reach_the_model() {
    assert_eq!(
        invalid(json!({"property_id": "P-1001", "down_payment": 45000})).await,
        "Spanish banks lend at most 80 % of the price of a main residence: the down payment \
         must be at least 90000 (20 % of the price 450000), not 45000"
    );
    assert_eq!(
        invalid(json!({"price": 300000, "annual_rate_percent": 3.125})).await,
        "the annual rate has at most two decimals, as banks quote it (e.g. 3.15), not 3.125"
    );
}

#[test]
fn the_schema_is_valid_and_describes_the_arguments() {
    let spec = SimulateMortgage::new(Arc::new(MemoryRealEstate::new())).spec();
    assert_eq!(spec.name, "simulate_mortgage");
    let validator = jsonschema::draft202012::options()
        .build(&spec.parameters)
        .unwrap();
    let properties = spec.parameters["properties"].as_object().unwrap();
    assert_eq!(
        properties
            .keys()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        BTreeSet::from(FIELDS)
    );
    assert!(validator.is_valid(&json!({"property_id": "P-1001", "years": 25})));
    assert!(validator.is_valid(&json!({"price": 300000, "annual_rate_percent": 2.95})));
    assert!(!validator.is_valid(&json!({"price": 300000, "years": 50})));
    assert!(!validator.is_valid(&json!({"price": 300000, "currency": "EUR"})));
}

#[test]
fn amounts_are_written_the_spanish_way() {
    assert_eq!(cents_money(123_456, "EUR"), "1.234,56 €");
    assert_eq!(cents_money(5, "EUR"), "0,05 €");
    assert_eq!(cents_money(123_456, "USD"), "1.234,56 USD");
    assert_eq!(share_percent(90_000, 450_000), "20");
    assert_eq!(share_percent(90_001, 450_001), "20");
    assert_eq!(share_percent(50_000, 187_500), "26,7");
}
