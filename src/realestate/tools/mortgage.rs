//! `simulate_mortgage`: the monthly payment, interest and total of a mortgage to buy a listing
//! (or any price), so the assistants quote figures computed by
//! [`mortgage::simulate`](crate::realestate::mortgage::simulate) instead of the model's
//! arithmetic. It reads the listing for its price and currency and changes nothing, so it runs
//! for every role without confirmation.
//!
//! Arguments are checked strictly — a wrong type, an unknown field, a rate with three decimals
//! is refused with a message naming the field — because a mortgage figure built on a
//! misread argument would be quoted to the customer as fact. The result is one line in Spanish,
//! amounts written the Spanish way (`1.517,77 €`), ready to be quoted.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::engine::tools::{Tool, ToolContext, ToolError, ToolOutput};
use crate::llm::ToolSpec;
use crate::realestate::mortgage::{
    MAX_RATE_PERCENT, MAX_YEARS, MIN_YEARS, MortgageInput, MortgageSimulation,
    minimum_down_payment, simulate,
};
use crate::realestate::tools::text;
use crate::realestate::{Operation, Property, RealEstateStore};

/// The term when the customer gives none.
pub const DEFAULT_YEARS: u32 = 30;
/// The rate when the customer gives none: a round reference close to what Spanish banks charged
/// for new fixed-rate mortgages in 2025 (review it when rates move), not any bank's offer — the
/// result says "tipo de referencia".
pub const REFERENCE_RATE_PERCENT: f64 = 3.0;
/// The currency of a bare `price`.
const DEFAULT_CURRENCY: &str = "EUR";
/// Whole amounts above this are not exact in JSON's doubles.
const MAX_EXACT_AMOUNT: f64 = 9_007_199_254_740_992.0;

const FIELDS: [&str; 5] = [
    "property_id",
    "price",
    "down_payment",
    "years",
    "annual_rate_percent",
];

pub struct SimulateMortgage {
    store: Arc<dyn RealEstateStore>,
}

impl SimulateMortgage {
    pub fn new(store: Arc<dyn RealEstateStore>) -> Self {
        Self { store }
    }
}

/// The arguments once checked; `None` is "not given" (absent or `null`).
#[derive(Debug)]
struct MortgageArgs {
    property_id: Option<String>,
    price: Option<u64>,
    down_payment: Option<u64>,
    years: Option<u32>,
    annual_rate_percent: Option<f64>,
}

#[async_trait]
impl Tool for SimulateMortgage {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "simulate_mortgage".into(),
            description: "Simulates a fixed-rate mortgage to buy a property (constant monthly \
                payment, French amortisation): the monthly payment, the total interest and the \
                total paid to the bank. Give property_id to use a listing's price and currency, \
                or price for any other amount (in euros). Spanish banks lend at most 80 % of the \
                price of a main residence, so the down payment is at least 20 %. The figures are \
                an estimate, not a bank's offer; say so."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "property_id": {
                        "type": "string",
                        "description": "Id of a listing for sale from the search results, e.g. \
                            P-1001: its price and currency are used."
                    },
                    "price": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Purchase price in whole currency units, e.g. 300000. \
                            Required without property_id (the amount is then in euros). With \
                            property_id, simulates this price instead of the listing's, e.g. \
                            an offer the customer considers."
                    },
                    "down_payment": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "What the buyer pays up front (entrada), in whole \
                            currency units; at least 20 % of the price. When absent: exactly \
                            that 20 % minimum."
                    },
                    "years": {
                        "type": "integer",
                        "minimum": MIN_YEARS,
                        "maximum": MAX_YEARS,
                        "description": format!(
                            "Term in years, {MIN_YEARS} to {MAX_YEARS}. When absent: {DEFAULT_YEARS}."
                        )
                    },
                    "annual_rate_percent": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": MAX_RATE_PERCENT,
                        "description": "Annual nominal rate (TIN) in percent, at most two \
                            decimals, e.g. 2.95. When absent: 3.00, a reference rate for a \
                            fixed-rate mortgage in Spain; use the customer's rate when they \
                            give one."
                    }
                },
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, args: Value, _context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args = parse_args(&args)?;
        let listing = match &args.property_id {
            Some(id) => Some(self.listing(id).await?),
            None => None,
        };
        let (price, currency) = match (&listing, args.price) {
            (Some(property), price) => (price.unwrap_or(property.price), &*property.currency),
            (None, Some(price)) => (price, DEFAULT_CURRENCY),
            (None, None) => {
                return Err(ToolError::InvalidArgs(
                    "give `property_id` (the listing's price is used) or `price`".into(),
                ));
            }
        };
        let input = MortgageInput {
            price,
            down_payment: args
                .down_payment
                .unwrap_or_else(|| minimum_down_payment(price)),
            annual_rate_percent: args.annual_rate_percent.unwrap_or(REFERENCE_RATE_PERCENT),
            years: args.years.unwrap_or(DEFAULT_YEARS),
        };
        let simulation =
            simulate(&input).map_err(|error| ToolError::InvalidArgs(error.to_string()))?;
        Ok(describe(
            listing.as_ref(),
            &input,
            args.annual_rate_percent.is_none(),
            &simulation,
            currency,
        )
        .into())
    }
}

impl SimulateMortgage {
    /// The listing `id`, which must be for sale.
    async fn listing(&self, id: &str) -> Result<Property, ToolError> {
        let property = self
            .store
            .property(id)
            .await
            .map_err(text::unavailable)?
            .ok_or_else(|| {
                ToolError::InvalidArgs(format!(
                    "no property {id}; use the id from the search results"
                ))
            })?;
        if property.operation == Operation::Rent {
            return Err(ToolError::InvalidArgs(format!(
                "{id} is for rent ({}): a mortgage is only for buying; simulate a property for \
                 sale or give a `price`",
                text::price(&property)
            )));
        }
        Ok(property)
    }
}

fn parse_args(args: &Value) -> Result<MortgageArgs, ToolError> {
    let Value::Object(object) = args else {
        return Err(ToolError::InvalidArgs(format!(
            "the arguments must be a JSON object with the fields {}",
            FIELDS.join(", ")
        )));
    };
    if let Some(unknown) = object.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(ToolError::InvalidArgs(format!(
            "unknown field `{unknown}`; the fields are {}",
            FIELDS.join(", ")
        )));
    }
    let property_id = match given(object, "property_id") {
        None => None,
        Some(Value::String(id)) if !id.trim().is_empty() => Some(id.trim().to_owned()),
        Some(other) => {
            return Err(ToolError::InvalidArgs(format!(
                "`property_id` must be a listing id like \"P-1001\", not {other}"
            )));
        }
    };
    let years = match given(object, "years") {
        None => None,
        Some(value) => Some(
            whole_number(value)
                .and_then(|years| u32::try_from(years).ok())
                .ok_or_else(|| {
                    ToolError::InvalidArgs(format!(
                        "`years` must be a whole number of years from {MIN_YEARS} to \
                         {MAX_YEARS}, e.g. {DEFAULT_YEARS}; not {value}"
                    ))
                })?,
        ),
    };
    let annual_rate_percent = match given(object, "annual_rate_percent") {
        None => None,
        Some(value) => Some(value.as_f64().ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "`annual_rate_percent` must be a number of percent like 2.95 (for 2,95 %), \
                 not {value}"
            ))
        })?),
    };
    Ok(MortgageArgs {
        property_id,
        price: amount(object, "price", "450000")?,
        down_payment: amount(object, "down_payment", "90000")?,
        years,
        annual_rate_percent,
    })
}

/// A field's value; `null` counts as not given.
fn given<'a>(object: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    object.get(field).filter(|value| !value.is_null())
}

/// A whole, non-negative amount of currency units.
fn amount(
    object: &Map<String, Value>,
    field: &str,
    example: &str,
) -> Result<Option<u64>, ToolError> {
    let Some(value) = given(object, field) else {
        return Ok(None);
    };
    whole_number(value).map(Some).ok_or_else(|| {
        ToolError::InvalidArgs(format!(
            "`{field}` must be a whole amount in currency units, as a number without \
             separators, e.g. {example}; not {value}"
        ))
    })
}

/// A JSON number that is a whole non-negative integer: `30` or `30.0`, not `30.5`, `-1` or
/// `"30"`.
fn whole_number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|x| x.fract() == 0.0 && (0.0..=MAX_EXACT_AMOUNT).contains(x))
            .map(|x| x as u64)
    })
}

/// The one line the model quotes.
fn describe(
    listing: Option<&Property>,
    input: &MortgageInput,
    reference_rate: bool,
    simulation: &MortgageSimulation,
    currency: &str,
) -> String {
    let price = text::money(input.price, currency);
    let subject = match listing {
        Some(property) if property.price == input.price => format!(
            "{} ({} en {}, {price})",
            property.id,
            property.kind.label_es(),
            property.neighbourhood
        ),
        Some(property) => format!(
            "{} ({} en {}) a un precio de {price} (anunciado a {})",
            property.id,
            property.kind.label_es(),
            property.neighbourhood,
            text::money(property.price, currency)
        ),
        None => format!("una vivienda de {price}"),
    };
    let rate = format!(
        "{} %{}",
        format!("{:.2}", input.annual_rate_percent).replace('.', ","),
        if reference_rate {
            " (tipo de referencia)"
        } else {
            ""
        }
    );
    let payment = cents_money(simulation.monthly_payment_cents, currency);
    let last = cents_money(simulation.last_payment_cents, currency);
    let last = if simulation.months == input.years * 12 {
        format!("la última, {last}")
    } else {
        format!("la última, la n.º {}, {last}", simulation.months)
    };
    format!(
        "Hipoteca para {subject}: entrada {} ({} %), préstamo {}, {} años al {rate} → cuota \
         {payment}/mes ({last}); intereses totales {}; total pagado al banco {}.",
        text::money(input.down_payment, currency),
        share_percent(input.down_payment, input.price),
        text::money(simulation.loan_cents / 100, currency),
        input.years,
        cents_money(simulation.total_interest_cents, currency),
        cents_money(simulation.total_paid_cents, currency),
    )
}

/// `cents` the Spanish way, as [`text::money`] writes whole units but with the cents:
/// `1.517,77 €`, or `1.517,77 USD` for a currency other than euros.
fn cents_money(cents: u64, currency: &str) -> String {
    let sign = if currency == "EUR" { "€" } else { currency };
    format!("{},{:02} {sign}", text::thousands(cents / 100), cents % 100)
}

/// `part` as a percentage of `whole`, to one decimal only when needed: `20`, `22,5`.
fn share_percent(part: u64, whole: u64) -> String {
    let tenths = (part * 2000 + whole) / (2 * whole);
    if tenths.is_multiple_of(10) {
        (tenths / 10).to_string()
    } else {
        format!("{},{}", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {
    //! The figures are those of `realestate::mortgage`'s tests, computed independently with
    //! Python's `decimal`.

    use std::collections::BTreeSet;

    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::domain::GeoPoint;
    use crate::domain::Role;
    use crate::domain::WaId;
    use crate::realestate::{ListingStatus, MemoryRealEstate, PropertyType};

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
        ToolContext {
            wa_id: WaId::parse("34600111222").unwrap(),
            role: Role::Prospect,
            location: None,
            now: Utc::now(),
            timezone: chrono_tz::Europe::Madrid,
        }
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
                format!(
                    "`years` must be a whole number of years from 5 to 40, e.g. 30; not {years}"
                )
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
}
