//! `zaguan export leads|appointments|offers` and `GET /admin/export/{kind}`: for agencies
//! without a CRM endpoint, what happened since a moment as CSV (RFC 4180 quoting, optionally
//! with a UTF-8 byte-order mark so spreadsheets read the accents; a cell that starts like a
//! formula comes out as text) or JSON lines. Leads come from the contacts' profiles
//! (`users.lead_at`), so they outlive the events' retention and `users forget` removes them.
//! An export past [`MAX_ROWS`] is cut, and says where its next page starts.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::realestate::{AppointmentStore, OfferStore};
use crate::store::{BusinessEvent, EventQuery, EventStore, StoreError, UserStore};

/// Most rows one export holds.
pub const MAX_ROWS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    Leads,
    /// The portals' and the CRM's leads (`leads`), one row each, contacted or not.
    PortalLeads,
    Appointments,
    Offers,
}

impl ExportKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "leads" => Some(Self::Leads),
            "portal-leads" | "portal_leads" => Some(Self::PortalLeads),
            "appointments" => Some(Self::Appointments),
            "offers" => Some(Self::Offers),
            _ => None,
        }
    }

    fn columns(self) -> &'static [&'static str] {
        match self {
            ExportKind::Leads => &[
                "at",
                "wa_id",
                "name",
                "assistant",
                "source",
                "opted_out_at",
                "marketing_opted_out_at",
                "ctwa_clid",
            ],
            ExportKind::PortalLeads => &[
                "id",
                "received_at",
                "source",
                "portal_lead_id",
                "name",
                "wa_id",
                "email",
                "listing_id",
                "listing_ref",
                "status",
                "why",
                "first_contact_at",
                "answered_at",
            ],
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

/// One export: its rows, oldest first, and, when it was cut, where the next page starts.
#[derive(Debug, Default)]
pub struct Export {
    pub rows: Vec<Value>,
    /// The `since` of the next page: the export held more than [`MAX_ROWS`] rows.
    pub next: Option<DateTime<Utc>>,
}

/// The rows of `kind` since `since`, each an object with [`ExportKind::columns`].
pub async fn rows(
    kind: ExportKind,
    since: DateTime<Utc>,
    store: &(impl UserStore + EventStore + crate::store::LeadStore + ?Sized),
    realestate: &(impl AppointmentStore + OfferStore + ?Sized),
) -> Result<Export, StoreError> {
    page(kind, since, store, realestate, MAX_ROWS).await
}

/// At most `max` rows of `kind` since `since`: a page never splits an instant, so the next one
/// (`since` = [`Export::next`]) starts where this one stopped, without a gap or a repeat.
pub async fn page(
    kind: ExportKind,
    since: DateTime<Utc>,
    store: &(impl UserStore + EventStore + crate::store::LeadStore + ?Sized),
    realestate: &(impl AppointmentStore + OfferStore + ?Sized),
    max: usize,
) -> Result<Export, StoreError> {
    // A source that gave `max + 1` records was cut by the store: past its last instant (which
    // may hold more records than it gave) nothing of it is known.
    let mut horizon: Option<DateTime<Utc>> = None;
    let mut cut_source = |last: Option<DateTime<Utc>>, count: usize| {
        if count > max
            && let Some(last) = last
        {
            horizon = Some(horizon.map_or(last, |h| h.min(last)));
        }
    };
    let mut dated: Vec<(DateTime<Utc>, Value)> = match kind {
        ExportKind::Leads => {
            // From the contacts' profiles, kept as long as the contact is: not from the
            // events, which go after their retention.
            let mut leads = Vec::new();
            let mut recorded = std::collections::HashSet::new();
            let users = store.leads_since(since, max.saturating_add(1)).await?;
            cut_source(users.last().and_then(|u| u.lead_at), users.len());
            for user in users {
                let Some(at) = user.lead_at else { continue };
                recorded.insert(user.wa_id.clone());
                leads.push((
                    at,
                    json!({
                        "at": at, "wa_id": user.wa_id.as_str(), "name": user.name,
                        "assistant": user.lead_assistant,
                        "source": user.source(),
                        "opted_out_at": user.opted_out_at,
                        "marketing_opted_out_at": user.marketing_opted_out_at,
                        "ctwa_clid": user.referral.as_ref().and_then(|r| r.ctwa_clid.clone()),
                    }),
                ));
            }
            // Leads from before profiles recorded them exist only as events (while kept).
            let events = store
                .list_events(&EventQuery {
                    since: Some(since),
                    kind: Some("lead.created".to_owned()),
                    limit: max.saturating_add(1),
                    // Cut like the records, past its last instant: a page never skips one.
                    oldest_first: true,
                    ..EventQuery::default()
                })
                .await?;
            cut_source(events.iter().map(|e| e.at).max(), events.len());
            for e in events {
                if recorded.contains(&e.wa_id) {
                    continue;
                }
                if let BusinessEvent::LeadCreated { name, assistant } = e.event {
                    let user = store.user(&e.wa_id).await?;
                    let opted_out_at = user.as_ref().and_then(|u| u.opted_out_at);
                    let marketing = user.as_ref().and_then(|u| u.marketing_opted_out_at);
                    let clid = user
                        .as_ref()
                        .and_then(|u| u.referral.as_ref())
                        .and_then(|r| r.ctwa_clid.clone());
                    let source = user
                        .as_ref()
                        .map_or(crate::store::ORGANIC_SOURCE, |u| u.source());
                    leads.push((
                        e.at,
                        json!({
                            "at": e.at, "wa_id": e.wa_id.as_str(), "name": name,
                            "assistant": assistant,
                            "source": source,
                            "opted_out_at": opted_out_at,
                            "marketing_opted_out_at": marketing,
                            "ctwa_clid": clid,
                        }),
                    ));
                }
            }
            leads
        }
        ExportKind::PortalLeads => {
            let leads = store
                .leads(&crate::store::LeadFilter {
                    since: Some(since),
                    limit: max.saturating_add(1),
                    oldest_first: true,
                    ..crate::store::LeadFilter::default()
                })
                .await?;
            cut_source(leads.last().map(|l| l.received_at), leads.len());
            leads
                .into_iter()
                .map(|l| {
                    (
                        l.received_at,
                        json!({
                            "id": l.id, "received_at": l.received_at, "source": l.source,
                            "portal_lead_id": l.portal_lead_id, "name": l.name,
                            "wa_id": l.wa_id.as_ref().map(|w| w.as_str().to_owned()),
                            "email": l.email, "listing_id": l.listing_id,
                            "listing_ref": l.listing_ref, "status": l.status.as_str(),
                            "why": l.why, "first_contact_at": l.first_contact_at,
                            "answered_at": l.answered_at,
                        }),
                    )
                })
                .collect()
        }
        ExportKind::Appointments => realestate
            .appointments_created_since(since)
            .await?
            .into_iter()
            .map(|a| {
                (
                    a.created_at,
                    json!({
                        "id": a.id, "created_at": a.created_at, "wa_id": a.wa_id.as_str(),
                        "property_id": a.property_id, "starts_at": a.starts_at, "status": a.status.as_str(),
                    }),
                )
            })
            .collect(),
        ExportKind::Offers => realestate
            .offers_created_since(since)
            .await?
            .into_iter()
            .map(|o| {
                (
                    o.created_at,
                    json!({
                        "id": o.id, "created_at": o.created_at, "wa_id": o.wa_id.as_str(),
                        "property_id": o.property_id, "amount": o.amount, "currency": o.currency,
                        "conditions": o.conditions, "status": o.status.as_str(),
                    }),
                )
            })
            .collect(),
    };
    dated.sort_by_key(|(at, _)| *at);
    // The page ends before the first instant it cannot hold whole; the next starts there.
    let mut boundary = horizon;
    if dated.len() > max {
        let first_left = dated[max].0;
        boundary = Some(boundary.map_or(first_left, |b| b.min(first_left)));
    }
    let mut next = None;
    if let Some(boundary) = boundary {
        if dated.iter().any(|(at, _)| *at < boundary) {
            dated.retain(|(at, _)| *at < boundary);
            next = Some(boundary);
        } else {
            // More than a page at one instant: given whole as far as read, then past it.
            tracing::warn!(rows = dated.len(), %boundary, "export page: more rows than a page share one instant");
            dated.retain(|(at, _)| *at <= boundary);
            next = Some(boundary + chrono::Duration::milliseconds(1));
        }
    }
    Ok(Export {
        rows: dated.into_iter().map(|(_, row)| row).collect(),
        next,
    })
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
