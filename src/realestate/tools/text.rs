//! What the tools share: whose records a list tool shows, and writing amounts, dates and
//! listings the way a Spanish agency says them.

use crate::domain::phrases::weekday_es;
use crate::realestate::PropertyStore;
use chrono::{DateTime, Datelike, NaiveDate, Utc};

use crate::domain::Role;
use crate::domain::WaId;
use crate::engine::tools::{ToolContext, ToolError};
use crate::realestate::Property;

/// A listing by id, or an error telling the model where ids come from.
pub async fn listing(
    store: &(impl PropertyStore + ?Sized),
    id: &str,
) -> Result<Property, ToolError> {
    store
        .property(id.trim())
        .await
        .map_err(|e| ToolError::Failed(format!("the listings cannot be read right now: {e}")))?
        .ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "there is no property `{id}`; use an id from search_properties (like P-1001)"
            ))
        })
}

/// A store failure as the model should see it: try again later, tell the user.
pub fn unavailable(error: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(format!(
        "the agency's data cannot be reached right now ({error}); tell the user to try again in a few minutes"
    ))
}

/// `YYYY-MM-DD`, not in the past (in the business's time zone).
pub fn date_from_today(text: &str, context: &ToolContext) -> Result<NaiveDate, ToolError> {
    let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
        ToolError::InvalidArgs(format!(
            "`{text}` is not a date in the form YYYY-MM-DD (e.g. 2026-11-27)"
        ))
    })?;
    let today = context.now.with_timezone(&context.timezone).date_naive();
    if date < today {
        return Err(ToolError::InvalidArgs(format!(
            "{date} is in the past; today is {today}"
        )));
    }
    Ok(date)
}

/// `450.000 €`, `1.200 €/mes` handled by callers; other currencies by code (`1.000 USD`).
pub fn money(units: u64, currency: &str) -> String {
    let sign = if currency == "EUR" { "€" } else { currency };
    format!("{} {sign}", thousands(units))
}

/// `1234567` → `1.234.567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('.');
        }
        out.push(c);
    }
    out
}

/// A listing's price as said: `450.000 €` for sale, `1.200 €/mes` for rent.
pub fn price(property: &Property) -> String {
    match property.operation {
        crate::realestate::Operation::Sale => money(property.price, &property.currency),
        crate::realestate::Operation::Rent => {
            format!("{}/mes", money(property.price, &property.currency))
        }
    }
}

/// `jueves 27/11 a las 10:00`, in the business's time zone.
pub fn when(at: DateTime<Utc>, context: &ToolContext) -> String {
    let local = at.with_timezone(&context.timezone);
    format!(
        "{} {} a las {}",
        weekday_es(local.weekday()),
        local.format("%d/%m"),
        local.format("%H:%M")
    )
}

/// One line per listing: id, title, place, operation, price, rooms, size.
pub fn listing_line(property: &Property) -> String {
    format!(
        "{} · {} ({}, {}) · {} · {} · {} hab · {} baños · {} m²",
        property.id,
        property.title,
        property.neighbourhood,
        property.city,
        property.operation.label_es(),
        price(property),
        property.bedrooms,
        property.bathrooms,
        property.area_m2
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_written_the_spanish_way() {
        assert_eq!(money(450_000, "EUR"), "450.000 €");
        assert_eq!(money(999, "EUR"), "999 €");
        assert_eq!(money(1_234_567, "USD"), "1.234.567 USD");
        assert_eq!(thousands(0), "0");
    }
}

/// Whose records a list tool shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A customer's, by their WhatsApp number: the caller's own unless staff named another.
    Customer(WaId),
    /// A property's (staff only).
    Property(String),
}

/// What the list tools take from the agency's staff (the `agent` role): a customer's number or
/// a property id instead of the caller's own records.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct LookupArgs {
    #[schemars(
        description = "Solo para agentes de la agencia: el número de WhatsApp de un cliente (con prefijo, p. ej. 34600111222)"
    )]
    pub customer: Option<String>,
    #[schemars(description = "Solo para agentes de la agencia: una propiedad (P-…)")]
    pub property_id: Option<String>,
}

/// Whose records: the caller's own, or for staff the customer or property they name. Anyone
/// else naming one gets an error, never someone else's data nor their own passed off as it.
pub fn lookup(args: LookupArgs, context: &ToolContext) -> Result<Lookup, ToolError> {
    let customer = args
        .customer
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    let property = args
        .property_id
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty());
    if (customer.is_some() || property.is_some()) && context.role != Role::Agent {
        return Err(ToolError::Failed(
            "only the agency's staff can look at another customer's or a property's records; \
             call it without `customer` or `property_id` for the user's own"
                .into(),
        ));
    }
    Ok(match (customer, property) {
        (_, Some(property)) => Lookup::Property(property),
        (Some(customer), None) => {
            let digits: String = customer.chars().filter(char::is_ascii_digit).collect();
            Lookup::Customer(WaId::parse(&digits).map_err(|_| {
                ToolError::InvalidArgs(format!("`{customer}` is not a WhatsApp number"))
            })?)
        }
        (None, None) => Lookup::Customer(context.wa_id.clone()),
    })
}
