//! What the messages cost on WhatsApp. Since October 2026 Meta bills replies inside the window
//! too, so every part has a price: Meta says which parts it billed and in what category
//! (`outbox.pricing`, from their status webhooks), the agency says what a category costs, per
//! recipient country where it differs (`ZAGUAN_WHATSAPP_PRICES`).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::Period;
use crate::store::OutboxEntry;

/// USD per delivered message, per category and optionally per recipient country calling
/// code (`ZAGUAN_WHATSAPP_PRICES`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatsAppPrices {
    everywhere: HashMap<String, f64>,
    by_country: HashMap<(u16, String), f64>,
}

impl WhatsAppPrices {
    /// `marketing=0.0615,utility=0.0200,service=0.0200,52:marketing=0.0436`: a category's
    /// price, or a country code's (`52:`, Mexico) for that category; empty: no prices.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut prices = Self::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let bad = || {
                format!("`{item}` is not [COUNTRY_CODE:]CATEGORY=PRICE (USD per delivered message)")
            };
            let (key, price) = item.split_once('=').ok_or_else(bad)?;
            let price = price
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .ok_or_else(bad)?;
            let (country, category) = match key.split_once(':') {
                Some((code, category)) => (
                    Some(code.trim().parse::<u16>().map_err(|_| bad())?),
                    category,
                ),
                None => (None, key),
            };
            let category = category.trim().to_ascii_lowercase();
            if category.is_empty() || !category.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            {
                return Err(bad());
            }
            match country {
                Some(code) => prices.by_country.insert((code, category), price),
                None => prices.everywhere.insert(category, price),
            };
        }
        Ok(prices)
    }

    pub fn is_empty(&self) -> bool {
        self.everywhere.is_empty() && self.by_country.is_empty()
    }

    /// What one message of `category` to `part`'s recipient costs, when priced.
    fn price(&self, category: &str, part: &OutboxEntry) -> Option<f64> {
        crate::domain::phone::country_code(&part.wa_id)
            .and_then(|code| self.by_country.get(&(code, category.to_owned())))
            .or_else(|| self.everywhere.get(category))
            .copied()
    }
}

/// Billed messages and what they cost, for one row of a breakdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cost {
    pub messages: u64,
    /// USD; the priced messages only.
    pub usd: f64,
}

/// The period's WhatsApp bill, as the records and the prices say it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WhatsAppCost {
    pub total: Cost,
    /// Per day of the period, in order.
    pub by_day: Vec<(String, Cost)>,
    /// Per purpose (`reply` for an answer to the customer).
    pub by_purpose: Vec<(String, Cost)>,
    pub by_category: Vec<(String, Cost)>,
    /// The conversations that cost most, at most [`TOP_CONVERSATIONS`].
    pub by_conversation: Vec<(String, Cost)>,
    /// Categories billed without a price in `ZAGUAN_WHATSAPP_PRICES`.
    pub unpriced: Vec<String>,
}

/// How many conversations the report names.
pub const TOP_CONVERSATIONS: usize = 20;

/// The bill of `billed` (parts Meta billed) over `period`.
pub fn cost(billed: &[OutboxEntry], period: &Period, prices: &WhatsAppPrices) -> WhatsAppCost {
    let mut days: BTreeMap<String, Cost> = period
        .days()
        .into_iter()
        .map(|d| (d.format("%Y-%m-%d").to_string(), Cost::default()))
        .collect();
    let mut purposes: BTreeMap<String, Cost> = BTreeMap::new();
    let mut categories: BTreeMap<String, Cost> = BTreeMap::new();
    let mut conversations: HashMap<&str, Cost> = HashMap::new();
    let mut unpriced: Vec<String> = Vec::new();
    let mut total = Cost::default();
    for part in billed {
        let Some(pricing) = part.pricing.as_ref().filter(|p| p.billable) else {
            continue;
        };
        let usd = prices.price(&pricing.category, part).unwrap_or_else(|| {
            if !unpriced.contains(&pricing.category) {
                unpriced.push(pricing.category.clone());
            }
            0.0
        });
        let day = period.day_of(part.at).format("%Y-%m-%d").to_string();
        let purpose = part.purpose.map_or("reply", |p| p.key()).to_owned();
        for row in [
            days.entry(day).or_default(),
            purposes.entry(purpose).or_default(),
            categories.entry(pricing.category.clone()).or_default(),
            conversations.entry(part.wa_id.as_str()).or_default(),
            &mut total,
        ] {
            row.messages += 1;
            row.usd += usd;
        }
    }
    let mut by_conversation: Vec<(String, Cost)> = conversations
        .into_iter()
        .map(|(wa_id, cost)| (wa_id.to_owned(), cost))
        .collect();
    by_conversation.sort_by(|a, b| {
        b.1.usd
            .total_cmp(&a.1.usd)
            .then(b.1.messages.cmp(&a.1.messages))
            .then(a.0.cmp(&b.0))
    });
    by_conversation.truncate(TOP_CONVERSATIONS);
    unpriced.sort();
    WhatsAppCost {
        total,
        by_day: days.into_iter().collect(),
        by_purpose: purposes.into_iter().collect(),
        by_category: categories.into_iter().collect(),
        by_conversation,
        unpriced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Pricing, WaId};
    use crate::store::NewOutbox;
    use crate::templates::Purpose;
    use chrono::{NaiveDate, TimeZone, Utc};

    fn billed(to: &str, category: &str, purpose: Option<Purpose>, hour: u32) -> OutboxEntry {
        let at = Utc.with_ymd_and_hms(2026, 12, 1, hour, 0, 0).unwrap();
        let mut part = NewOutbox::text(WaId::parse(to).unwrap(), None, "hola", at);
        part.purpose = purpose;
        let mut entry = OutboxEntry::queued(crate::domain::OutboxId("x".into()), &part);
        entry.pricing = Some(Pricing {
            billable: category != "free",
            category: category.into(),
            pricing_model: "PMP".into(),
        });
        entry
    }

    #[test]
    fn prices_are_read_per_category_and_per_country_or_refused_with_the_item() {
        let prices =
            WhatsAppPrices::parse("marketing=0.06, service=0.02, 52:service=0.005").unwrap();
        let spain = billed("34600111222", "service", None, 9);
        let mexico = billed("5215512345678", "service", None, 9);
        assert_eq!(prices.price("service", &spain), Some(0.02));
        assert_eq!(prices.price("service", &mexico), Some(0.005));
        assert_eq!(prices.price("marketing", &mexico), Some(0.06));
        assert_eq!(prices.price("utility", &spain), None);
        for bad in [
            "marketing",
            "marketing=cheap",
            "xx:service=0.1",
            "service=-1",
            "=0.1",
        ] {
            let error = WhatsAppPrices::parse(bad).unwrap_err();
            assert!(error.contains(bad.trim()), "{bad}: {error}");
        }
        assert!(WhatsAppPrices::parse("").unwrap().is_empty());
    }

    #[test]
    fn the_bill_is_split_by_day_purpose_category_and_conversation() {
        let tz = chrono_tz::Europe::Madrid;
        let day = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let period = Period::new(day, day + chrono::Duration::days(1), tz).unwrap();
        let prices = WhatsAppPrices::parse("service=0.02,utility=0.01,marketing=0.06").unwrap();
        let parts = [
            billed("34600111222", "service", None, 9),
            billed("34600111222", "service", None, 10),
            billed("34600111222", "utility", Some(Purpose::VisitReminder), 11),
            billed("34600333444", "marketing", Some(Purpose::ListingAlert), 12),
            billed("34600333444", "authentication", None, 13),
            billed("34600333444", "free", None, 14),
        ];
        let bill = cost(&parts, &period, &prices);
        assert_eq!(bill.total.messages, 5, "the one not billable is left out");
        assert!((bill.total.usd - 0.11).abs() < 1e-9, "{}", bill.total.usd);
        assert_eq!(bill.by_day.len(), 2);
        assert_eq!(bill.by_day[0].1.messages, 5);
        assert_eq!(bill.by_day[1].1.messages, 0);
        let purposes: Vec<(&str, u64)> = bill
            .by_purpose
            .iter()
            .map(|(p, c)| (p.as_str(), c.messages))
            .collect();
        assert_eq!(
            purposes,
            [("listing_alert", 1), ("reply", 3), ("visit_reminder", 1)]
        );
        assert_eq!(
            bill.by_conversation[0].0, "34600333444",
            "the dearest first"
        );
        assert!((bill.by_conversation[1].1.usd - 0.05).abs() < 1e-9);
        assert_eq!(bill.unpriced, ["authentication"]);
    }
}
