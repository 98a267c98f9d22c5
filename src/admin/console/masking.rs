//! What a viewer reads of a conversation: phone numbers anywhere in its text — a customer's
//! own words, an agent's tool call for a customer's number, a notice quoting one — shown as
//! their last four digits, like the masked number in the header.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A run that may be a phone number: an optional `+`, then 8 to 15 digits with single spaces,
/// dots or dashes between them.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\+?\d(?:[ .-]?\d){7,14}").expect("a valid pattern"));

/// `text` with every phone number as `…1234`. A run inside a word or an id (`A-P1031-2026…`),
/// or shaped like a date (`2026-12-03`), is left as it is.
pub fn mask_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for found in NUMBER.find_iter(text) {
        let before = text[..found.start()].chars().next_back();
        let after = text[found.end()..].chars().next();
        let joined =
            |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
        let run = found.as_str();
        let date = run.len() == 10 && run.as_bytes()[4] == b'-' && run.as_bytes()[7] == b'-';
        if joined(before) || joined(after) || date {
            continue;
        }
        let digits: String = run.chars().filter(char::is_ascii_digit).collect();
        out.push_str(&text[last..found.start()]);
        out.push('…');
        out.push_str(&digits[digits.len() - 4..]);
        last = found.end();
    }
    out.push_str(&text[last..]);
    out
}

/// Every string inside `value` masked.
pub fn mask_numbers_in(value: &mut Value) {
    match value {
        Value::String(text) => *text = mask_numbers(text),
        Value::Array(items) => items.iter_mut().for_each(mask_numbers_in),
        Value::Object(fields) => fields.values_mut().for_each(mask_numbers_in),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::mask_numbers;

    #[test]
    fn numbers_are_masked_and_prices_ids_and_dates_are_not() {
        assert_eq!(
            mask_numbers("Llámame al +34 611 000 777 o al 611000778, gracias"),
            "Llámame al …0777 o al …0778, gracias"
        );
        assert_eq!(
            mask_numbers(r#"{"customer": "34611300005"}"#),
            r#"{"customer": "…0005"}"#
        );
        for kept in [
            "Piso de 1.130 €/mes, 250.000 € en venta",
            "Visita reservada (A-P1031-202612011000-4fdd65)",
            "el 2026-12-03 a las 10:00",
            "P-1031 y P-1028",
        ] {
            assert_eq!(mask_numbers(kept), kept);
        }
    }
}
