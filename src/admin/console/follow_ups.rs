//! `/console/visits` and `/console/offers`: what the bot booked and took, and what became of
//! it. Visits waiting for an outcome, today's and the coming ones; open offers and answered
//! ones; each list filtered by listing. Operators record an outcome or an answer here as the
//! agent's and the owner's buttons do (first to record wins: a later attempt is shown what was
//! recorded); viewers read the lists with numbers masked.

use axum::extract::{Form, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ConsoleError, SignedIn, checked, i18n, render, signed_in};
use crate::admin::follow_ups;
use crate::admin::operations::AdminError;
use crate::admin::team::OperatorRole;
use crate::realestate::follow_up::lists::{AppointmentView, OfferView, appointments, offers};
use crate::realestate::tools::text::money;
use crate::state::AppState;

fn realestate(state: &AppState) -> Result<&dyn crate::realestate::RealEstateStore, ConsoleError> {
    state.realestate.as_deref().ok_or_else(|| {
        ConsoleError::Admin(AdminError::NotFound(
            "no real-estate store in this process".to_owned(),
        ))
    })
}

fn timezone(state: &AppState) -> chrono_tz::Tz {
    state
        .config
        .as_ref()
        .map_or(chrono_tz::UTC, |c| c.engine.timezone)
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    view: Option<String>,
    /// Only this listing's (`P-1001`).
    #[serde(default)]
    property: Option<String>,
}

impl ListQuery {
    fn property(&self) -> Option<&str> {
        self.property
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
    }
}

async fn visits_page(
    state: &AppState,
    who: &SignedIn,
    query: &ListQuery,
    notice: Option<String>,
) -> Result<Html<String>, ConsoleError> {
    let view = match query.view.as_deref() {
        None | Some("") => AppointmentView::Waiting,
        Some(word) => AppointmentView::parse(word).ok_or_else(|| {
            AdminError::BadRequest(format!("`{word}` is not waiting, today or upcoming"))
        })?,
    };
    let tz = timezone(state);
    let store = realestate(state)?;
    let mut rows = Vec::new();
    for appointment in appointments(store, view, Utc::now(), tz)
        .await
        .map_err(AdminError::Store)?
    {
        if query
            .property()
            .is_some_and(|p| p != appointment.property_id)
        {
            continue;
        }
        let title = store
            .property(&appointment.property_id)
            .await
            .map_err(AdminError::Store)?
            .map(|p| p.title)
            .unwrap_or_default();
        let mut row = json!({
            "id": appointment.id,
            "property_id": appointment.property_id,
            "title": title,
            "wa_id": appointment.wa_id.as_str(),
            "starts_at": i18n::at(appointment.starts_at),
            "status": appointment.status.as_str(),
            "agent": appointment.follow_up.agent,
            "asked": appointment.follow_up.outcome_asked_at.is_some(),
            "outcome_by": appointment.follow_up.outcome_by,
            "open": appointment.status == crate::realestate::AppointmentStatus::Booked,
        });
        who.linked(&mut row);
        rows.push(row);
    }
    render(
        "visits.html",
        who.context(
            "visits",
            json!({
                "rows": rows, "view": view.as_str(), "property": query.property(),
                "timezone": tz.name(), "notice": notice,
            }),
        ),
    )
}

pub(super) async fn visits(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    visits_page(&state, &who, &query, None).await
}

#[derive(Deserialize)]
pub(super) struct OutcomeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    view: Option<String>,
}

pub(super) async fn outcome(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<OutcomeForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let by = format!("operator:{}", who.identity.name);
    let notice = match follow_ups::outcome(
        realestate(&state)?,
        state.store.as_ref(),
        &id,
        &form.outcome,
        &by,
        Utc::now(),
    )
    .await
    {
        Ok(appointment) => {
            tracing::info!(operator = %who.identity.name, appointment = %id, outcome = %form.outcome, "visit outcome recorded in the console");
            i18n::tr(
                "{id}: {status}",
                &[
                    ("id", &appointment.id),
                    ("status", &i18n::tr(appointment.status.as_str(), &[])),
                ],
            )
        }
        Err(AdminError::Conflict(why)) => why,
        Err(error) => return Err(error.into()),
    };
    let query = ListQuery {
        view: form.view,
        property: None,
    };
    visits_page(&state, &who, &query, Some(notice)).await
}

async fn offers_page(
    state: &AppState,
    who: &SignedIn,
    query: &ListQuery,
    notice: Option<String>,
) -> Result<Html<String>, ConsoleError> {
    let view = match query.view.as_deref() {
        None | Some("") => OfferView::Open,
        Some(word) => OfferView::parse(word)
            .ok_or_else(|| AdminError::BadRequest(format!("`{word}` is not open or answered")))?,
    };
    let tz = timezone(state);
    let mut rows: Vec<Value> = Vec::new();
    for offer in offers(realestate(state)?, view, Utc::now())
        .await
        .map_err(AdminError::Store)?
    {
        if query.property().is_some_and(|p| p != offer.property_id) {
            continue;
        }
        let mut row = json!({
            "id": offer.id,
            "property_id": offer.property_id,
            "wa_id": offer.wa_id.as_str(),
            "amount": money(offer.amount, &offer.currency),
            "conditions": offer.conditions,
            "status": offer.status.as_str(),
            "counter": offer.answer.counter_amount.map(|c| money(c, &offer.currency)),
            "answered_by": offer.answer.answered_by,
            "answered_at": offer.answer.answered_at.map(i18n::at),
            "created_at": i18n::at(offer.created_at),
            "open": offer.status == crate::realestate::OfferStatus::Submitted,
        });
        who.linked(&mut row);
        rows.push(row);
    }
    render(
        "offers.html",
        who.context(
            "offers",
            json!({
                "rows": rows, "view": view.as_str(), "property": query.property(),
                "timezone": tz.name(), "notice": notice,
            }),
        ),
    )
}

pub(super) async fn offers_list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    offers_page(&state, &who, &query, None).await
}

#[derive(Deserialize)]
pub(super) struct AnswerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    answer: String,
    #[serde(default)]
    amount: String,
}

pub(super) async fn answer(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<AnswerForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let by = format!("operator:{}", who.identity.name);
    let amount = Some(form.amount.trim()).filter(|a| !a.is_empty());
    let notice = match follow_ups::answer(
        realestate(&state)?,
        state.store.as_ref(),
        &id,
        &form.answer,
        amount,
        &by,
        Utc::now(),
    )
    .await
    {
        Ok(offer) => {
            tracing::info!(operator = %who.identity.name, offer = %id, answer = %form.answer, "offer answered in the console");
            i18n::tr(
                "{id}: {status}",
                &[
                    ("id", &offer.id),
                    ("status", &i18n::tr(offer.status.as_str(), &[])),
                ],
            )
        }
        Err(AdminError::Conflict(why) | AdminError::BadRequest(why)) => why,
        Err(error) => return Err(error.into()),
    };
    offers_page(&state, &who, &ListQuery::default(), Some(notice)).await
}
