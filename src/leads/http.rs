//! `POST /leads` (a CRM's or a portal's JSON push) and `POST /leads/email` (a portal's e-mail,
//! raw, from an inbound-mail service), behind `ZAGUAN_LEADS_TOKEN`: as a bearer token, or as
//! the password of HTTP Basic (what inbound-mail services put in the URL they call). Both
//! answer 202 once the lead is stored, before it is contacted; a lead pushed again answers 202
//! with `"duplicate": true` and is contacted no more.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use chrono::Utc;
use secrecy::ExposeSecret as _;
use serde_json::json;
use subtle::ConstantTimeEq as _;

use super::email::{self, Read};
use super::{Incoming, Intake, Received, input};
use crate::state::AppState;
use crate::store::LeadStatus;

/// The largest JSON push taken.
pub const MAX_JSON_BYTES: usize = 64 * 1024;
pub use super::email::MAX_EMAIL_BYTES;

fn refused(status: StatusCode, why: &str) -> Response {
    (status, Json(json!({"error": why}))).into_response()
}

/// Why a push is not taken before its body is read.
enum Refusal {
    /// No `ZAGUAN_LEADS_TOKEN`: the routes do not exist.
    Off,
    Unauthorized,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Off => refused(StatusCode::NOT_FOUND, "not found"),
            Refusal::Unauthorized => {
                let mut response = refused(
                    StatusCode::UNAUTHORIZED,
                    "the leads token is missing or wrong",
                );
                response
                    .headers_mut()
                    .insert(WWW_AUTHENTICATE, "Bearer".parse().expect("a valid header"));
                response
            }
        }
    }
}

/// The intake, when `ZAGUAN_LEADS_TOKEN` is set and the request carries it.
fn authorized(state: &AppState, headers: &HeaderMap) -> Result<Arc<Intake>, Refusal> {
    let intake = state.leads.clone().ok_or(Refusal::Off)?;
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            if let Some(token) = v.strip_prefix("Bearer ") {
                Some(token.trim().to_owned())
            } else {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(v.strip_prefix("Basic ")?.trim())
                    .ok()?;
                let pair = String::from_utf8(decoded).ok()?;
                pair.split_once(':')
                    .map(|(_, password)| password.to_owned())
            }
        })
        .unwrap_or_default();
    let expected = intake.settings().token.expose_secret().as_bytes();
    if presented.is_empty() || !bool::from(presented.as_bytes().ct_eq(expected)) {
        tracing::warn!("lead push refused: missing or wrong ZAGUAN_LEADS_TOKEN");
        super::counted("unknown", "unauthorized");
        return Err(Refusal::Unauthorized);
    }
    Ok(intake)
}

/// Stores the lead, answers 202, and contacts it in the background (the sweep contacts what a
/// crash left behind).
async fn take(
    intake: Arc<Intake>,
    incoming: Incoming,
    raw: Option<String>,
    unreadable: Option<String>,
) -> Response {
    let now = Utc::now();
    match intake.receive(incoming, raw, unreadable, now).await {
        Ok(Received { lead, new }) => {
            if new && lead.status == LeadStatus::New {
                let (intake, lead) = (intake.clone(), lead.clone());
                tokio::spawn(async move {
                    if let Err(error) = intake.contact(&lead, Utc::now()).await {
                        tracing::warn!(lead = %lead.id, "lead not contacted yet (the sweep retries): {error}");
                    }
                });
            }
            (
                StatusCode::ACCEPTED,
                Json(json!({
                    "lead": lead.id,
                    "status": lead.status.as_str(),
                    "why": lead.why,
                    "duplicate": !new,
                })),
            )
                .into_response()
        }
        Err(error) => {
            tracing::error!("lead not stored: {error}");
            refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "the lead could not be stored; send it again",
            )
        }
    }
}

/// `POST /leads`.
pub async fn push(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let intake = match authorized(&state, &headers) {
        Ok(intake) => intake,
        Err(refusal) => return refusal.into_response(),
    };
    match input::from_json(&body) {
        Ok(incoming) => take(intake, incoming, None, None).await,
        Err(why) => {
            super::counted("unknown", "invalid");
            tracing::info!("lead push refused: {why}");
            refused(StatusCode::BAD_REQUEST, &why)
        }
    }
}

/// `POST /leads/email`: the raw message. One no reader understands is stored as unreadable,
/// whole, for the console; never dropped.
pub async fn email(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let intake = match authorized(&state, &headers) {
        Ok(intake) => intake,
        Err(refusal) => return refusal.into_response(),
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return refused(
            StatusCode::BAD_REQUEST,
            "the body is empty: post the raw e-mail",
        );
    }
    let raw = String::from_utf8_lossy(&body).into_owned();
    match email::read(&body, intake.settings().region) {
        Read::Lead(incoming) => take(intake, incoming, Some(raw), None).await,
        Read::Unreadable { why, from } => {
            let source = from
                .rsplit_once('@')
                .map_or("email".to_owned(), |(_, domain)| domain.to_owned());
            tracing::warn!(%source, "lead e-mail unreadable: {why}");
            let incoming = Incoming {
                source,
                ..Incoming::default()
            };
            take(intake, incoming, Some(raw), Some(why)).await
        }
    }
}
