//! `zaguan export leads|appointments|offers` and `GET /admin/export/{kind}`: for agencies
//! without a CRM endpoint, what happened since a moment as CSV (RFC 4180 quoting, optionally
//! with a UTF-8 byte-order mark so spreadsheets read the accents; a cell that starts like a
//! formula comes out as text) or JSON lines. Leads come from the `lead.created` events, so
//! `users forget` removes them here too.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::realestate::RealEstateStore;
use crate::store::{BusinessEvent, EventQuery, Store, StoreError};

/// Most rows one export holds.
pub const MAX_ROWS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    Leads,
    Appointments,
    Offers,
}

impl ExportKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "leads" => Some(Self::Leads),
            "appointments" => Some(Self::Appointments),
            "offers" => Some(Self::Offers),
            _ => None,
        }
    }

    fn columns(self) -> &'static [&'static str] {
        match self {
            ExportKind::Leads => &["at", "wa_id", "name", "assistant", "opted_out_at"],
            ExportKind::Appointments => &[
                "id",
                "created_at",
                "wa_id",
                "property_id",
                "starts_at",
                "status",
            ],
            ExportKind::Offers => &[
                "id",
                "created_at",
                "wa_id",
                "property_id",
                "amount",
                "currency",
                "conditions",
                "status",
            ],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    #[default]
    Csv,
    Jsonl,
}

/// `7d`, `24h`, `30m`, or an RFC 3339 time: the moment an export starts from.
pub fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.to_utc());
    }
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: i64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not like 7d, 24h, 30m or 2026-11-01T00:00:00Z"))?;
    let span = match unit {
        "d" => chrono::Duration::days(n),
        "h" => chrono::Duration::hours(n),
        "m" => chrono::Duration::minutes(n),
        _ => return Err(format!("`{text}`: the unit is d, h or m")),
    };
    Ok(now - span)
}

/// The rows of `kind` since `since`, each an object with [`ExportKind::columns`].
pub async fn rows(
    kind: ExportKind,
    since: DateTime<Utc>,
    store: &dyn Store,
    realestate: &dyn RealEstateStore,
) -> Result<Vec<Value>, StoreError> {
    let mut rows: Vec<Value> = match kind {
        ExportKind::Leads => {
            let mut events = store
                .list_events(&EventQuery {
                    since: Some(since),
                    kind: Some("lead.created".to_owned()),
                    limit: MAX_ROWS,
                    ..EventQuery::default()
                })
                .await?;
            events.reverse();
            let mut leads = Vec::with_capacity(events.len());
            for e in events {
                if let BusinessEvent::LeadCreated { name, assistant } = e.event {
                    // Whether the agency may write to them first (BAJA / STOP).
                    let opted_out_at = store.user(&e.wa_id).await?.and_then(|u| u.opted_out_at);
                    leads.push(json!({
                        "at": e.at, "wa_id": e.wa_id.as_str(), "name": name, "assistant": assistant,
                        "opted_out_at": opted_out_at,
                    }));
                }
            }
            leads
        }
        ExportKind::Appointments => realestate
            .appointments_created_since(since)
            .await?
            .into_iter()
            .map(|a| {
                json!({
                    "id": a.id, "created_at": a.created_at, "wa_id": a.wa_id.as_str(),
                    "property_id": a.property_id, "starts_at": a.starts_at, "status": a.status.as_str(),
                })
            })
            .collect(),
        ExportKind::Offers => realestate
            .offers_created_since(since)
            .await?
            .into_iter()
            .map(|o| {
                json!({
                    "id": o.id, "created_at": o.created_at, "wa_id": o.wa_id.as_str(),
                    "property_id": o.property_id, "amount": o.amount, "currency": o.currency,
                    "conditions": o.conditions, "status": o.status.as_str(),
                })
            })
            .collect(),
    };
    rows.truncate(MAX_ROWS);
    Ok(rows)
}

/// `rows` written as `format`; `bom` starts a CSV with the UTF-8 byte-order mark.
pub fn render(kind: ExportKind, rows: &[Value], format: ExportFormat, bom: bool) -> Vec<u8> {
    match format {
        ExportFormat::Jsonl => {
            let mut out = Vec::new();
            for row in rows {
                out.extend(serde_json::to_vec(row).unwrap_or_default());
                out.push(b'\n');
            }
            out
        }
        ExportFormat::Csv => {
            let mut out = if bom {
                b"\xEF\xBB\xBF".to_vec()
            } else {
                Vec::new()
            };
            let mut writer = csv::WriterBuilder::new()
                .terminator(csv::Terminator::CRLF)
                .from_writer(&mut out);
            let columns = kind.columns();
            // Writing to memory cannot fail.
            let _ = writer.write_record(columns);
            for row in rows {
                let record = columns.iter().map(|c| match &row[*c] {
                    Value::Null => String::new(),
                    Value::String(text) => inert(text),
                    other => other.to_string(),
                });
                let _ = writer.write_record(record);
            }
            let _ = writer.flush();
            drop(writer);
            out
        }
    }
}

/// A text cell a spreadsheet will not run: one that starts like a formula (`=`, `+`, `-`, `@`,
/// or a tab or carriage return before one) gets a leading `'`, which spreadsheets read as
/// «this is text». A customer's profile name is theirs to choose, `=HYPERLINK(…)` included.
pub(crate) fn inert(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_span_or_a_time() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(
            parse_since("7d", now).unwrap(),
            now - chrono::Duration::days(7)
        );
        assert_eq!(
            parse_since("24h", now).unwrap(),
            now - chrono::Duration::hours(24)
        );
        assert_eq!(
            parse_since("2026-11-01T00:00:00Z", now)
                .unwrap()
                .to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert!(parse_since("7w", now).is_err());
        assert!(parse_since("", now).is_err());
    }

    #[test]
    fn a_cell_that_starts_like_a_formula_comes_out_as_text() {
        let rows = vec![
            json!({"at": "2026-11-26T10:00:00Z", "wa_id": "34600111222",
                   "name": "=HYPERLINK(\"http://x.example\",\"Hola\")", "assistant": "@SUM(A1)",
                   "opted_out_at": null}),
            json!({"at": "2026-11-26T11:00:00Z", "wa_id": "34600111223", "name": "-2+3",
                   "assistant": "+34 600", "opted_out_at": null}),
            json!({"at": "2026-11-26T12:00:00Z", "wa_id": "34600111224", "name": "Lucía = Luz",
                   "assistant": "\t=1", "opted_out_at": null}),
        ];
        let csv =
            String::from_utf8(render(ExportKind::Leads, &rows, ExportFormat::Csv, false)).unwrap();
        let cells: Vec<Vec<String>> = csv::Reader::from_reader(csv.as_bytes())
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect();
        assert_eq!(cells[0][2], "'=HYPERLINK(\"http://x.example\",\"Hola\")");
        assert_eq!(cells[0][3], "'@SUM(A1)");
        assert_eq!(cells[1][2], "'-2+3");
        assert_eq!(cells[1][3], "'+34 600");
        assert_eq!(cells[2][2], "Lucía = Luz", "only a cell's start matters");
        assert_eq!(cells[2][3], "'\t=1");
        for row in &cells {
            assert!(
                !row.iter()
                    .any(|cell| cell.starts_with(['=', '+', '-', '@'])),
                "{row:?}"
            );
        }
    }

    #[test]
    fn csv_quotes_as_rfc_4180_and_can_start_with_a_bom() {
        let rows = vec![json!({
            "id": "F-1", "created_at": "2026-11-26T10:00:00Z", "wa_id": "34600111222",
            "property_id": "P-1001", "amount": 250000, "currency": "EUR",
            "conditions": "con hipoteca, \"sin muebles\"\nentrega en marzo", "status": "submitted",
        })];
        let csv = render(ExportKind::Offers, &rows, ExportFormat::Csv, true);
        let text = String::from_utf8(csv).unwrap();
        assert!(text.starts_with('\u{feff}'));
        assert_eq!(
            text.trim_start_matches('\u{feff}'),
            "id,created_at,wa_id,property_id,amount,currency,conditions,status\r\n\
             F-1,2026-11-26T10:00:00Z,34600111222,P-1001,250000,EUR,\"con hipoteca, \"\"sin muebles\"\"\nentrega en marzo\",submitted\r\n"
        );
        let jsonl = render(ExportKind::Offers, &rows, ExportFormat::Jsonl, false);
        assert_eq!(jsonl.iter().filter(|b| **b == b'\n').count(), 1);
    }
}
