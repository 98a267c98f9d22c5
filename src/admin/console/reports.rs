//! `/console/reports`: the agency's funnel and activity over a period, for the whole deployment
//! ([`crate::admin::reports`]), as SVG charts drawn here with their numbers beside them; each
//! chart downloads as CSV (`/console/reports/{chart}.csv`).

use crate::admin::reports::{self, Period, Prices, Report, svg};
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{Html, IntoResponse, Response};
use chrono::{NaiveDate, Utc};
use serde::Deserialize;
use serde_json::json;

use super::i18n::tr;
use super::{ConsoleError, render, signed_in};
use crate::admin::operations::AdminError;
use crate::admin::team::OperatorRole;

#[derive(Debug, Default, Deserialize)]
pub(super) struct PeriodQuery {
    /// The last N days (default 7).
    days: Option<i64>,
    /// Or `from` and `to`, `YYYY-MM-DD`, inclusive.
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

impl PeriodQuery {
    fn period(&self, state: &AppState) -> Result<Period, ConsoleError> {
        let tz = state
            .config
            .as_ref()
            .map_or(chrono_tz::UTC, |c| c.engine.timezone);
        let bad = |why: String| ConsoleError::Admin(AdminError::BadRequest(why));
        if !self.from.is_empty() || !self.to.is_empty() {
            let day = |text: &str| {
                NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                    .map_err(|_| bad(format!("`{text}` is not a date like 2026-11-23")))
            };
            return Period::new(day(&self.from)?, day(&self.to)?, tz).map_err(bad);
        }
        Period::last_days(self.days.unwrap_or(7), Utc::now(), tz).map_err(bad)
    }

    fn query_string(&self, period: &Period) -> String {
        format!("from={}&to={}", period.first, period.last)
    }
}

async fn report_of(state: &AppState, period: &Period) -> Result<Report, ConsoleError> {
    let inputs = reports::gather(state.store.as_ref(), state.realestate.as_deref(), period).await?;
    let prices = state
        .config
        .as_ref()
        .map_or_else(Prices::default, |c| c.llm_prices.clone());
    Ok(reports::compute(&inputs, period, &prices))
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(String::new, |r| format!("{:.0}%", r * 100.0))
}

/// `2m 05s`, `45s`, `—`.
pub(super) fn duration(seconds: Option<i64>) -> String {
    match seconds {
        None => "—".to_owned(),
        Some(s) if s < 60 => format!("{s}s"),
        Some(s) if s < 3600 => format!("{}m {:02}s", s / 60, s % 60),
        Some(s) => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub(super) async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<PeriodQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let period = query.period(&state)?;
    let report = report_of(&state, &period).await?;
    let funnel_svg = svg::bars(
        "funnel-chart",
        &tr("Funnel", &[]),
        &report
            .funnel
            .iter()
            .map(|s| {
                let shown = match s.rate {
                    Some(_) => format!("{} ({})", s.count, percent(s.rate)),
                    None => s.count.to_string(),
                };
                (tr(s.label, &[]), s.count as f64, shown)
            })
            .collect::<Vec<_>>(),
    );
    let days: Vec<String> = report.days.iter().map(|d| d.date.clone()).collect();
    let conversations_svg = svg::columns(
        "conversations-chart",
        &tr("Conversations per day", &[]),
        &days,
        &[(
            tr("conversations", &[]),
            report.days.iter().map(|d| d.conversations as f64).collect(),
        )],
    );
    let priced = !report.providers.is_empty() && report.days.iter().any(|d| !d.cost.is_empty());
    let cost_series: Vec<(String, Vec<f64>)> = report
        .providers
        .iter()
        .map(|p| {
            let values = report
                .days
                .iter()
                .map(|d| {
                    if priced {
                        d.cost.get(p).copied().unwrap_or(0.0)
                    } else {
                        d.tokens.get(p).copied().unwrap_or(0) as f64
                    }
                })
                .collect();
            (p.clone(), values)
        })
        .collect();
    let cost_svg = svg::columns(
        "cost-chart",
        &if priced {
            tr("Model cost per day (USD)", &[])
        } else {
            tr("Model tokens per day", &[])
        },
        &days,
        &cost_series,
    );
    let assistants_svg = svg::bars(
        "assistants-chart",
        &tr("Steps per assistant", &[]),
        &report
            .turns_per_assistant
            .iter()
            .map(|(a, n)| (a.clone(), *n as f64, n.to_string()))
            .collect::<Vec<_>>(),
    );
    let steps = &report.steps;
    let steps_svg = svg::bars(
        "steps-chart",
        &tr("How steps were decided", &[]),
        &[
            (
                tr("a model", &[]),
                steps.model as f64,
                steps.model.to_string(),
            ),
            (
                tr("the fast path", &[]),
                steps.fast_path as f64,
                format!("{} ({})", steps.fast_path, percent(steps.fast_path_share)),
            ),
            (
                tr("offline mode", &[]),
                steps.offline as f64,
                format!("{} ({})", steps.offline, percent(steps.offline_share)),
            ),
        ],
    );
    let cost_rows: Vec<serde_json::Value> = report
        .days
        .iter()
        .map(|d| {
            json!({
                "date": d.date,
                "cells": report.providers.iter().map(|p| match d.cost.get(p) {
                    Some(usd) => format!("${usd:.2} · {}", tr("{count} tokens", &[("count", &d.tokens.get(p).copied().unwrap_or(0))])),
                    None => tr("{count} tokens", &[("count", &d.tokens.get(p).copied().unwrap_or(0))]),
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    // What WhatsApp charged, beside what the model cost.
    let usd = |v: f64| format!("{v:.4}");
    let whatsapp_days: Vec<serde_json::Value> = report
        .days
        .iter()
        .zip(&report.whatsapp.by_day)
        .map(|(d, (date, cost))| {
            json!({
                "date": date, "messages": cost.messages, "usd": usd(cost.usd),
                "model": usd(d.cost.values().sum()),
            })
        })
        .collect();
    let whatsapp_purposes: Vec<serde_json::Value> = report
        .whatsapp
        .by_purpose
        .iter()
        .map(|(purpose, cost)| json!({"purpose": purpose, "messages": cost.messages, "usd": usd(cost.usd)}))
        .collect();
    let whatsapp_conversations: Vec<serde_json::Value> = report
        .whatsapp
        .by_conversation
        .iter()
        .map(|(wa_id, cost)| {
            let mut row = json!({"wa_id": wa_id, "messages": cost.messages, "usd": usd(cost.usd)});
            who.linked(&mut row);
            row
        })
        .collect();
    render(
        "reports.html",
        who.context(
            "reports",
            json!({
                "r": report,
                "query": query.query_string(&period),
                "funnel": report.funnel.iter().map(|s| json!({
                    "key": s.key, "label": tr(s.label, &[]), "count": s.count, "rate": percent(s.rate),
                })).collect::<Vec<_>>(),
                "first_reply": duration(report.first_reply_median),
                "to_person": duration(report.person_median),
                "fast_path_share": percent(report.steps.fast_path_share),
                "offline_share": percent(report.steps.offline_share),
                "cost_rows": cost_rows,
                "whatsapp": {
                    "messages": report.whatsapp.total.messages,
                    "usd": usd(report.whatsapp.total.usd),
                    "days": whatsapp_days,
                    "purposes": whatsapp_purposes,
                    "conversations": whatsapp_conversations,
                    "unpriced": report.whatsapp.unpriced,
                },
                "priced": priced,
                "max_rows": crate::admin::export::MAX_ROWS,
                "svg": {
                    "funnel": funnel_svg, "conversations": conversations_svg, "cost": cost_svg,
                    "assistants": assistants_svg, "steps": steps_svg,
                },
            }),
        ),
    )
}

/// One chart's numbers as CSV.
pub(super) async fn download(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(file): Path<String>,
    Query(query): Query<PeriodQuery>,
) -> Result<Response, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let chart = file.strip_suffix(".csv").unwrap_or(&file);
    if !reports::CHARTS.contains(&chart) {
        return Err(AdminError::NotFound(format!("no chart {file}")).into());
    }
    let period = query.period(&state)?;
    let mut report = report_of(&state, &period).await?;
    // Numbers are shown to those who may see them, as on the page.
    for (wa_id, _) in &mut report.whatsapp.by_conversation {
        let mut row = json!({"wa_id": wa_id.as_str()});
        who.linked(&mut row);
        *wa_id = row["wa_id"].as_str().unwrap_or_default().to_owned();
    }
    let body = reports::csv(&report, chart)
        .ok_or_else(|| AdminError::NotFound(format!("no chart {file}")))?;
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"{chart}-{}-{}.csv\"",
                    period.first, period.last
                ),
            ),
        ],
        body,
    )
        .into_response())
}

/// `/console/export/{kind}.csv?from=&to=` (admins): leads, appointments or offers of the
/// period as CSV for a spreadsheet (byte-order mark, formula cells neutralised); a cut export
/// says where its next page starts.
pub(super) async fn export(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(file): Path<String>,
    Query(query): Query<PeriodQuery>,
) -> Result<Response, ConsoleError> {
    use crate::admin::export::{self, ExportFormat, ExportKind};
    let who = signed_in(&state, &headers).await?;
    if !who.identity.may(OperatorRole::Admin) {
        return Err(ConsoleError::NotAllowed(
            who.identity.role,
            OperatorRole::Admin,
        ));
    }
    let kind = ExportKind::parse(file.strip_suffix(".csv").unwrap_or(&file))
        .ok_or_else(|| AdminError::NotFound(format!("no export {file}")))?;
    let period = query.period(&state)?;
    let realestate = state
        .realestate
        .as_deref()
        .ok_or_else(|| AdminError::NotFound("no real-estate store in this process".into()))?;
    let mut export = export::rows(kind, period.from(), state.store.as_ref(), realestate).await?;
    // The period's end bounds it too (the rows are oldest first).
    let to = period.to();
    let before = export.rows.len();
    export.rows.retain(|row| {
        let at = row["at"]
            .as_str()
            .or(row["created_at"].as_str())
            .or(row["received_at"].as_str());
        at.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .is_none_or(|t| t.to_utc() < to)
    });
    if export.rows.len() < before {
        export.next = None;
    }
    tracing::info!(operator = %who.identity.name, rows = export.rows.len(), "export downloaded from the console");
    let body = export::render(kind, &export.rows, ExportFormat::Csv, true);
    let name = file.strip_suffix(".csv").unwrap_or(&file);
    let mut response = (
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"{name}-{}-{}.csv\"",
                    period.first, period.last
                ),
            ),
        ],
        body,
    )
        .into_response();
    if let Some(next) = export.next
        && let Ok(value) = axum::http::HeaderValue::from_str(
            &next.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
    {
        response
            .headers_mut()
            .insert("x-zaguan-export-next-since", value);
    }
    Ok(response)
}
