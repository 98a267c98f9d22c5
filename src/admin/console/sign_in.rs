//! Signing in and out: the token form, its failures' limit, the session cookie.

use crate::state::AppState;
use axum::extract::{Form, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Instant;

use axum::Extension;
use axum::extract::ConnectInfo;
use subtle::ConstantTimeEq;

use super::*;
use crate::admin::throttle::{client_of, throttle};

pub(super) async fn sign_in_form(
    State(state): State<AppState>,
) -> Result<Html<String>, ConsoleError> {
    sessions(&state)?;
    render("sign_in.html", json!({"name": ""}))
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    operator: String,
    token: String,
}

pub(super) async fn sign_in(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Result<Response, ConsoleError> {
    let sessions = sessions(&state)?;
    let Some(token) = state.admin_token.as_deref() else {
        return Err(ConsoleError::Off);
    };
    let address = client_of(&state, &headers, peer.map(|Extension(ConnectInfo(at))| at));
    if let Some(address) = address
        && !throttle().allows(address, &form.operator, Instant::now())
    {
        tracing::warn!(%address, operator = %form.operator.trim(), "console sign-in refused: too many failed attempts in the last minute");
        metrics::counter!("zaguan_console_sign_ins_total", "outcome" => "throttled").increment(1);
        return Ok((
            StatusCode::TOO_MANY_REQUESTS,
            render(
                "sign_in.html",
                json!({"error": "Too many failed attempts; wait a minute.", "name": form.operator}),
            )?,
        )
            .into_response());
    }
    let operator: String = form
        .operator
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(40)
        .collect();
    use secrecy::ExposeSecret as _;
    let right = bool::from(
        form.token
            .trim()
            .as_bytes()
            .ct_eq(token.expose_secret().as_bytes()),
    );
    if !right || operator.is_empty() {
        if let Some(address) = address {
            throttle().failed(address, &form.operator, Instant::now());
        }
        tracing::warn!(operator = %operator, "console sign-in failed: wrong token or no name");
        metrics::counter!("zaguan_console_sign_ins_total", "outcome" => "failed").increment(1);
        return Ok((
            StatusCode::UNAUTHORIZED,
            render(
                "sign_in.html",
                json!({"error": "Wrong token, or no name given.", "name": operator}),
            )?,
        )
            .into_response());
    }
    let (_, cookie) = sessions.open(&operator, Utc::now());
    tracing::info!(operator = %operator, "console sign-in");
    metrics::counter!("zaguan_console_sign_ins_total", "outcome" => "ok").increment(1);
    Ok((
        StatusCode::SEE_OTHER,
        [
            (LOCATION, "/console".to_owned()),
            (
                SET_COOKIE,
                session::set_cookie(&cookie, state.secure_cookies),
            ),
        ],
    )
        .into_response())
}

#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    pub(super) csrf: String,
}

pub(super) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    tracing::info!(operator = %who.session.operator, "console sign-out");
    Ok((
        StatusCode::SEE_OTHER,
        [
            (LOCATION, "/console/sign-in".to_owned()),
            (SET_COOKIE, session::clear_cookie(state.secure_cookies)),
        ],
    )
        .into_response())
}
