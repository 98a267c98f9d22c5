//! `/console/operators` (admins): the team, and adding, disabling and resetting an operator.
//! A new password and token are shown once, on the page that issued them.

use crate::admin::team::{Issued, OperatorRole, Team, TeamError};
use crate::state::AppState;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ConsoleError, SignedIn, checked, render, signed_in};
use crate::admin::operations::AdminError;

impl From<TeamError> for ConsoleError {
    fn from(error: TeamError) -> Self {
        match error {
            TeamError::Store(error) => ConsoleError::Admin(AdminError::Store(error)),
            TeamError::Unknown(_) => ConsoleError::Admin(AdminError::NotFound(error.to_string())),
            TeamError::Disabled(_) => ConsoleError::Admin(AdminError::Conflict(error.to_string())),
            TeamError::BadName(_) | TeamError::Exists(_) => {
                ConsoleError::Admin(AdminError::BadRequest(error.to_string()))
            }
        }
    }
}

/// The signed-in admin, or why not (the pages only admins see).
pub(super) async fn admin(state: &AppState, headers: &HeaderMap) -> Result<SignedIn, ConsoleError> {
    let who = signed_in(state, headers).await?;
    if !who.identity.may(OperatorRole::Admin) {
        return Err(ConsoleError::NotAllowed(
            who.identity.role,
            OperatorRole::Admin,
        ));
    }
    Ok(who)
}

async fn page(
    state: &AppState,
    who: &SignedIn,
    issued: Option<&Issued>,
    notice: Option<String>,
) -> Result<Html<String>, ConsoleError> {
    let short = super::i18n::at;
    let operators: Vec<Value> = state
        .team()
        .list()
        .await?
        .into_iter()
        .map(|o| {
            json!({
                "name": o.name, "role": o.role.as_str(),
                "disabled": o.disabled_at.map(short),
                "created": short(o.created_at), "created_by": o.created_by,
                "last_sign_in": o.last_sign_in_at.map(short),
            })
        })
        .collect();
    let sign_in_link = issued.map(|issued| {
        let base = state
            .config
            .as_ref()
            .and_then(|c| c.public_url.clone())
            .map_or_else(String::new, |url| {
                url.as_str().trim_end_matches('/').to_owned()
            });
        format!("{base}/console/sign-in?operator={}", issued.name)
    });
    render(
        "operators.html",
        who.context(
            "operators",
            json!({
                "operators": operators,
                "issued": issued.map(|i| json!({"name": i.name, "role": i.role.as_str(),
                    "password": i.password, "token": i.token, "link": sign_in_link})),
                "notice": notice,
            }),
        ),
    )
}

pub(super) async fn operators(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Html<String>, ConsoleError> {
    let who = admin(&state, &headers).await?;
    page(&state, &who, None, None).await
}

#[derive(Deserialize)]
pub(super) struct AddForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    display_name: String,
}

pub(super) async fn add(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<AddForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let role = OperatorRole::parse(&form.role).ok_or_else(|| {
        AdminError::BadRequest(format!(
            "`{}`: the role is viewer, operator or admin",
            form.role
        ))
    })?;
    let issued = state
        .team()
        .add(
            &form.name,
            role,
            Some(form.display_name.as_str()),
            &who.identity.name,
            Utc::now(),
        )
        .await?;
    page(&state, &who, Some(&issued), None).await
}

#[derive(Deserialize)]
pub(super) struct ActionForm {
    #[serde(default)]
    csrf: String,
}

pub(super) async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(form): Form<ActionForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let issued = state
        .team()
        .reset(&name, &who.identity.name, Utc::now())
        .await?;
    page(&state, &who, Some(&issued), None).await
}

pub(super) async fn disable(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(form): Form<ActionForm>,
) -> Result<Html<String>, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf, OperatorRole::Admin).await?;
    let name = Team::check_name(&name)?;
    let ended = state
        .team()
        .disable(&name, &who.identity.name, Utc::now())
        .await?;
    page(
        &state,
        &who,
        None,
        Some(super::i18n::tr(
            "{name} is disabled; {ended} session(s) ended.",
            &[("name", &name), ("ended", &ended)],
        )),
    )
    .await
}
