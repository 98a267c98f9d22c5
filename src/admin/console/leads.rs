//! `/console/leads`: the portals' and the CRM's leads of the last days, each with where it
//! came from, the listing, when it came and was first written to and answered, and why one
//! was not contacted; per source, how many and how fast. An unreadable e-mail's original is a
//! click away (`/console/leads/{id}/email`, for operators: it is the customer's mail).

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::response::{Html, IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::{ConsoleError, i18n, render, signed_in};
use crate::admin::operations::AdminError;
use crate::admin::team::OperatorRole;
use crate::state::AppState;
use crate::store::{LeadFilter, LeadStatus, PortalLead};

/// Leads read for the page.
const SHOWN: usize = 500;

#[derive(Debug, Default, Deserialize)]
pub(super) struct LeadsQuery {
    days: Option<i64>,
}

/// The median of `seconds`, computed and written as the reports do.
fn median(seconds: Vec<i64>) -> String {
    super::reports::duration(crate::admin::reports::median(seconds))
}

fn seconds_between(from: chrono::DateTime<Utc>, to: Option<chrono::DateTime<Utc>>) -> Option<i64> {
    to.map(|to| (to - from).num_seconds().max(0))
}

pub(super) async fn leads(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<LeadsQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    let days = query.days.unwrap_or(7).clamp(1, 90);
    let leads = state
        .store
        .leads(&LeadFilter {
            since: Some(Utc::now() - chrono::Duration::days(days)),
            limit: SHOWN,
            ..LeadFilter::default()
        })
        .await?;
    let mut by_source: BTreeMap<String, Vec<&PortalLead>> = BTreeMap::new();
    for lead in &leads {
        by_source.entry(lead.source.clone()).or_default().push(lead);
    }
    let sources: Vec<Value> = by_source
        .iter()
        .map(|(source, leads)| {
            let count = |pred: fn(&PortalLead) -> bool| leads.iter().filter(|l| pred(l)).count();
            json!({
                "source": source,
                "received": leads.len(),
                "contacted": count(|l| l.first_contact_at.is_some() && l.status != LeadStatus::Skipped),
                "answered": count(|l| l.answered_at.is_some()),
                "not_contacted": count(|l| matches!(l.status,
                    LeadStatus::Uncontactable | LeadStatus::Unreadable | LeadStatus::Unreachable | LeadStatus::Skipped)),
                "to_contact": median(leads.iter().filter_map(|l| seconds_between(l.received_at, l.first_contact_at)).collect()),
                "to_answer": median(leads.iter().filter_map(|l| seconds_between(l.received_at, l.answered_at)).collect()),
            })
        })
        .collect();
    let rows: Vec<Value> = leads
        .iter()
        .map(|lead| {
            let mut row = json!({
                "id": lead.id,
                "received": i18n::at(lead.received_at),
                "source": crate::leads::portal_name(&lead.source),
                "listing": lead.listing_id.as_ref().or(lead.listing_ref.as_ref()),
                "known_listing": lead.listing_id.is_some(),
                "name": lead.name,
                "email": if who.masked() { None } else { lead.email.clone() },
                "wa_id": lead.wa_id.as_ref().map(|w| w.as_str().to_owned()),
                "status": lead.status.as_str(),
                "why": lead.why,
                "first_contact": lead.first_contact_at.map(i18n::at),
                "answered": lead.answered_at.map(i18n::at),
                "has_email": lead.raw_email.is_some(),
            });
            if lead.wa_id.is_some() {
                who.linked(&mut row);
            }
            row
        })
        .collect();
    render(
        "leads.html",
        who.context(
            "leads",
            json!({
                "days": days, "sources": sources, "leads": rows, "shown": SHOWN,
                "can_read_email": who.identity.may(OperatorRole::Operator),
            }),
        ),
    )
}

/// `/console/leads/{id}/email`: the e-mail as it came, as plain text.
pub(super) async fn original(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    if !who.identity.may(OperatorRole::Operator) {
        return Err(ConsoleError::NotAllowed(
            who.identity.role,
            OperatorRole::Operator,
        ));
    }
    let raw = state
        .store
        .lead(&id)
        .await?
        .and_then(|l| l.raw_email)
        .ok_or_else(|| AdminError::NotFound(format!("no e-mail of lead {id}")))?;
    tracing::info!(operator = %who.identity.name, lead = %id, "a lead's e-mail read in the console");
    Ok((
        [
            (CONTENT_TYPE, "text/plain; charset=utf-8"),
            // Shown, never run: the mail's HTML stays text.
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        raw,
    )
        .into_response())
}
