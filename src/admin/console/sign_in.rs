//! Signing in and out: the name-and-password form, its failures' limit (per client address, and
//! per account from that address, never for an account from everywhere), the session cookie.

use crate::state::AppState;
use axum::extract::{Form, Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;
use std::net::SocketAddr;

use axum::Extension;
use axum::extract::ConnectInfo;

use super::i18n::tr;
use super::session;
use super::{ConsoleError, checked, console_on, render};
use crate::admin::team::OperatorRole;
use crate::admin::throttle::{self, client_of};

#[derive(Deserialize, Default)]
pub(super) struct SignInQuery {
    #[serde(default)]
    operator: String,
}

pub(super) async fn sign_in_form(
    State(state): State<AppState>,
    Query(query): Query<SignInQuery>,
) -> Result<Html<String>, ConsoleError> {
    console_on(&state)?;
    let name: String = query.operator.chars().take(40).collect();
    render("sign_in.html", json!({"name": name}))
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    #[serde(default)]
    operator: String,
    #[serde(default)]
    password: String,
}

pub(super) async fn sign_in(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Result<Response, ConsoleError> {
    console_on(&state)?;
    let name: String = form
        .operator
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(40)
        .collect::<String>()
        .to_lowercase();
    let address = client_of(&state, &headers, peer.map(|Extension(ConnectInfo(at))| at));
    if let Some(address) = address
        && !throttle::allows(state.team().store(), address, &name, Utc::now()).await
    {
        tracing::warn!(%address, operator = %name, "console sign-in refused: too many failed attempts in the last minute");
        metrics::counter!("zaguan_console_sign_ins_total", "outcome" => "throttled").increment(1);
        return Ok((
            StatusCode::TOO_MANY_REQUESTS,
            render(
                "sign_in.html",
                json!({"error": tr("Too many failed attempts; wait a minute.", &[]), "name": name}),
            )?,
        )
            .into_response());
    }
    let signed = state
        .team()
        .sign_in(&name, &form.password, Utc::now())
        .await?;
    let Some((signed, cookie)) = signed else {
        if let Some(address) = address {
            throttle::failed(state.team().store(), address, &name, Utc::now()).await;
        }
        tracing::warn!(operator = %name, "console sign-in failed: wrong name or password, or disabled");
        metrics::counter!("zaguan_console_sign_ins_total", "outcome" => "failed").increment(1);
        return Ok((
            StatusCode::UNAUTHORIZED,
            render(
                "sign_in.html",
                json!({"error": tr("Wrong name or password.", &[]), "name": name}),
            )?,
        )
            .into_response());
    };
    tracing::info!(operator = %signed.identity.name, role = signed.identity.role.as_str(), "console sign-in");
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
    /// `queue` when the form was on the queue page: the answer goes back there.
    #[serde(default)]
    pub(super) back: String,
}

/// Ends the session on the server (a copied cookie stops working too) and clears the cookie.
pub(super) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Viewer).await?;
    state.team().sign_out(&who.session).await?;
    tracing::info!(operator = %who.identity.name, "console sign-out");
    Ok((
        StatusCode::SEE_OTHER,
        [
            (LOCATION, "/console/sign-in".to_owned()),
            (SET_COOKIE, session::clear_cookie(state.secure_cookies)),
        ],
    )
        .into_response())
}
