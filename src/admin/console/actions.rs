//! What operators do from the pages: reset, take, release, reply, forget, reload the prompts; each
//! answers with a redirect and a notice.

use crate::admin::operations::{self, AdminError};
use crate::state::AppState;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{Html, Response};
use serde::Deserialize;
use serde_json::json;

use super::i18n::tr;
use super::sign_in::CsrfForm;
use super::{ConsoleError, checked, redirect, render, resolve, signed_in};
use crate::admin::team::OperatorRole;

/// `path` with a notice of what was done (shown by the page).
pub(super) fn with_notice(path: &str, what: &str) -> Response {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("done", what)
        .finish();
    redirect(&format!("{path}?{query}"))
}

/// After an action: back to the queue when it came from there, else to the conversation,
/// saying what was done.
pub(super) fn done(raw: &str, what: &str, back: &str) -> Response {
    if back == "queue" {
        with_notice("/console/queue", what)
    } else {
        with_notice(&format!("/console/conversations/{raw}"), what)
    }
}

pub(super) async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let raw = resolve(&state, &raw)?;
    operations::reset_conversation(state.store.as_ref(), &raw, Some(&who.identity.name)).await?;
    Ok(done(
        &raw,
        &tr("Sent back to the primary assistant.", &[]),
        &form.back,
    ))
}

pub(super) async fn take(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let raw = resolve(&state, &raw)?;
    operations::take_conversation(
        state.store.as_ref(),
        &raw,
        Some(&who.identity.name),
        None,
        state.handoff_ttl,
    )
    .await?;
    Ok(done(
        &raw,
        &tr(
            "You have the conversation: the bot is silent until you release it.",
            &[],
        ),
        &form.back,
    ))
}

pub(super) async fn release(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let raw = resolve(&state, &raw)?;
    operations::release_conversation(state.store.as_ref(), &raw, Some(&who.identity.name)).await?;
    Ok(done(
        &raw,
        &tr("Released: the bot answers again.", &[]),
        &form.back,
    ))
}

#[derive(Deserialize)]
pub(super) struct ReplyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
    #[serde(default)]
    text: String,
}

pub(super) async fn reply(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<ReplyForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let raw = resolve(&state, &raw)?;
    operations::operator_message(
        state.store.as_ref(),
        &raw,
        Some(&who.identity.name),
        &form.text,
    )
    .await?;
    state.arrivals.wake();
    Ok(done(
        &raw,
        &tr("Reply queued for WhatsApp.", &[]),
        &form.back,
    ))
}

/// The follow-up template to a customer whose window closed: what the console offers when a
/// reply is refused for that.
pub(super) async fn follow_up(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let raw = resolve(&state, &raw)?;
    let (templates, business) = state.templates_and_name();
    operations::operator_follow_up(
        state.store.as_ref(),
        &templates,
        &business,
        &raw,
        &who.identity,
    )
    .await?;
    state.arrivals.wake();
    Ok(done(
        &raw,
        &tr("Follow-up template queued for WhatsApp.", &[]),
        &form.back,
    ))
}

pub(super) async fn forget_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers).await?;
    if !who.identity.may(OperatorRole::Admin) {
        return Err(ConsoleError::NotAllowed(
            who.identity.role,
            OperatorRole::Admin,
        ));
    }
    let raw = resolve(&state, &raw)?;
    render(
        "forget.html",
        who.context("conversations", json!({"wa_id": raw})),
    )
}

pub(super) async fn forget(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let raw = resolve(&state, &raw)?;
    let counts = operations::forget_user(state.store.as_ref(), &raw, state.lease).await?;
    tracing::info!(operator = %who.identity.name, deleted = counts.total(), "user forgotten from the console");
    Ok(redirect("/console/conversations"))
}

pub(super) async fn reload(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Operator).await?;
    let reloader = state
        .prompts
        .as_ref()
        .ok_or_else(|| AdminError::NotFound("no engine runs in this process".into()))?;
    let said = match reloader.reload().await {
        Ok(crate::runtime::Reloaded::Loaded { .. }) => tr("New prompt set loaded.", &[]),
        Ok(crate::runtime::Reloaded::Unchanged { .. }) => {
            tr("No change in the prompts folder.", &[])
        }
        Err(_) => tr("Refused: the running set stays (problems below).", &[]),
    };
    tracing::info!(operator = %who.identity.name, "prompts reloaded from the console");
    Ok(with_notice("/console/prompts", &said))
}
