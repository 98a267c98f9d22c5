//! `GET /webhook`: the verification handshake Meta performs when the webhook URL is configured.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::WebhookState;

#[derive(Debug, Deserialize)]
pub struct Handshake {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

/// 200 with `hub.challenge` as plain text when the mode is `subscribe` and the token matches;
/// 403 otherwise (also when no verify token is configured).
pub async fn verify(
    State(state): State<WebhookState>,
    query: Result<Query<Handshake>, QueryRejection>,
) -> Response {
    let Ok(Query(handshake)) = query else {
        return StatusCode::FORBIDDEN.into_response();
    };
    let token_matches = match (&state.verify_token, &handshake.verify_token) {
        (Some(expected), Some(given)) => {
            bool::from(expected.expose_secret().as_bytes().ct_eq(given.as_bytes()))
        }
        _ => false,
    };
    match (
        handshake.mode.as_deref(),
        token_matches,
        handshake.challenge,
    ) {
        (Some("subscribe"), true, Some(challenge)) => {
            tracing::info!("webhook verification handshake accepted");
            (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                challenge,
            )
                .into_response()
        }
        _ => {
            tracing::warn!("webhook verification handshake refused");
            metrics::counter!("zaguan_webhook_verifications_refused_total").increment(1);
            StatusCode::FORBIDDEN.into_response()
        }
    }
}
