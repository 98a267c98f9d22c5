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

use crate::realestate::PropertyStore;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::engine::tools::{ToolContext, ToolError, ToolOutput, TypedTool};
use crate::realestate::mortgage::{
    MAX_RATE_PERCENT, MAX_YEARS, MIN_YEARS, MortgageInput, MortgageSimulation,
    minimum_down_payment, simulate,
};
use crate::realestate::tools::text;
use crate::realestate::{Operation, Property};

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
    store: Arc<dyn PropertyStore>,
}

impl SimulateMortgage {
    pub fn new(store: Arc<dyn PropertyStore>) -> Self {
        Self { store }
    }
}

/// The arguments once checked; `None` is "not given" (absent or `null`). They are read by
/// [`parse_args`], whose errors say what to send instead.
#[derive(Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct MortgageArgs {
    #[schemars(
        description = "Id of a listing for sale from the search results, e.g. P-1001: its price and currency are used."
    )]
    property_id: Option<String>,
    #[schemars(
        description = "Purchase price in whole currency units, e.g. 300000. Required without property_id (the amount is then in euros). With property_id, simulates this price instead of the listing's, e.g. an offer the customer considers."
    )]
    #[schemars(range(min = 1))]
    price: Option<u64>,
    #[schemars(
        description = "What the buyer pays up front (entrada), in whole currency units; at least 20 % of the price. When absent: exactly that 20 % minimum."
    )]
    #[schemars(range(min = 0))]
    down_payment: Option<u64>,
    #[schemars(description = format!("Term in years, {MIN_YEARS} to {MAX_YEARS}. When absent: {DEFAULT_YEARS}."))]
    #[schemars(range(min = MIN_YEARS, max = MAX_YEARS))]
    years: Option<u32>,
    #[schemars(
        description = "Annual nominal rate (TIN) in percent, at most two decimals, e.g. 2.95. When absent: 3.00, a reference rate for a fixed-rate mortgage in Spain; use the customer's rate when they give one."
    )]
    #[schemars(range(min = 0, max = MAX_RATE_PERCENT))]
    annual_rate_percent: Option<f64>,
}

#[async_trait]
impl TypedTool for SimulateMortgage {
    type Args = MortgageArgs;
    const NAME: &'static str = "simulate_mortgage";

    fn description(&self) -> String {
        "Simulates a fixed-rate mortgage to buy a property (constant monthly \
         payment, French amortisation): the monthly payment, the total interest and the \
         total paid to the bank. Give property_id to use a listing's price and currency, \
         or price for any other amount (in euros). Spanish banks lend at most 80 % of the \
         price of a main residence, so the down payment is at least 20 %. The figures are \
         an estimate, not a bank's offer; say so."
            .into()
    }

    async fn call(
        &self,
        args: MortgageArgs,
        _context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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

impl<'de> serde::Deserialize<'de> for MortgageArgs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let args = Value::deserialize(deserializer)?;
        parse_args(&args).map_err(|error| match error {
            ToolError::InvalidArgs(reason) | ToolError::Failed(reason) => {
                serde::de::Error::custom(reason)
            }
        })
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
mod tests;
