//! The operators' console at `/console`: server-rendered pages over the same functions the
//! admin API and the CLI call ([`crate::admin::operations`]) — a third face of them, never a second
//! implementation. Off (404) without `ZAGUAN_ADMIN_TOKEN`; signed in with that token and the
//! operator's name, then a signed session cookie ([`session`]). Every form that changes
//! something carries the session's CSRF token. The only script keeps an open conversation's
//! transcript current; every page works without it.

pub mod session;

mod actions;
mod pages;
mod sign_in;

use actions::*;
use pages::*;
use sign_in::*;

use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use minijinja::Environment;
use serde_json::{Value, json};

use crate::admin::operations::AdminError;
use crate::state::AppState;
use session::{Session, Sessions};

/// A conversation counts as stuck on the overview after this long idle in an assistant.
const STUCK_AFTER: &str = "30m";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console", get(overview))
        .route("/console/", get(overview))
        .route("/console/console.css", get(stylesheet))
        .route("/console/sign-in", get(sign_in_form).post(sign_in))
        .route("/console/sign-out", post(sign_out))
        .route("/console/conversations", get(conversations))
        .route("/console/conversations/{wa_id}", get(conversation))
        .route("/console/conversations/{wa_id}/transcript", get(transcript))
        .route(
            "/console/conversations/{wa_id}/export/{file}",
            get(export_test),
        )
        .route("/console/conversations/{wa_id}/reset", post(reset))
        .route("/console/conversations/{wa_id}/take", post(take))
        .route("/console/conversations/{wa_id}/release", post(release))
        .route("/console/conversations/{wa_id}/reply", post(reply))
        .route("/console/conversations/{wa_id}/follow-up", post(follow_up))
        .route(
            "/console/conversations/{wa_id}/forget",
            get(forget_form).post(forget),
        )
        .route("/console/prompts", get(prompts))
        .route("/console/prompts/reload", post(reload))
}

fn templates() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in [
            ("layout.html", include_str!("templates/layout.html")),
            ("sign_in.html", include_str!("templates/sign_in.html")),
            ("overview.html", include_str!("templates/overview.html")),
            (
                "conversations.html",
                include_str!("templates/conversations.html"),
            ),
            (
                "conversation.html",
                include_str!("templates/conversation.html"),
            ),
            ("transcript.html", include_str!("templates/transcript.html")),
            ("forget.html", include_str!("templates/forget.html")),
            ("prompts.html", include_str!("templates/prompts.html")),
        ] {
            env.add_template(name, source)
                .expect("the console's templates parse");
        }
        env
    })
}

/// Why a console request did not get its page.
enum ConsoleError {
    /// No admin token: the console does not exist.
    Off,
    /// Not signed in (or the session expired): to the sign-in form.
    SignIn,
    /// A form without this session's CSRF token.
    Forbidden,
    Admin(AdminError),
    Render(String),
}

impl From<AdminError> for ConsoleError {
    fn from(error: AdminError) -> Self {
        ConsoleError::Admin(error)
    }
}

impl From<crate::store::StoreError> for ConsoleError {
    fn from(error: crate::store::StoreError) -> Self {
        ConsoleError::Admin(AdminError::Store(error))
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        match self {
            ConsoleError::Off => (StatusCode::NOT_FOUND, "not found").into_response(),
            ConsoleError::SignIn => redirect("/console/sign-in"),
            ConsoleError::Forbidden => {
                tracing::warn!("console form refused: missing or wrong CSRF token");
                (
                    StatusCode::FORBIDDEN,
                    "refused: this form is stale or not ours; reload the page",
                )
                    .into_response()
            }
            ConsoleError::Admin(error) => {
                let status = error.status();
                (
                    status,
                    Html(format!(
                        "<p>{}</p><p><a href=\"/console\">Back</a></p>",
                        escape(&error.to_string())
                    )),
                )
                    .into_response()
            }
            ConsoleError::Render(why) => {
                tracing::error!("console page did not render: {why}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the page did not render: {why}"),
                )
                    .into_response()
            }
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_owned())]).into_response()
}

fn render(name: &str, context: Value) -> Result<Html<String>, ConsoleError> {
    templates()
        .get_template(name)
        .and_then(|t| t.render(minijinja::value::Serde(&context)))
        .map(Html)
        .map_err(|e| ConsoleError::Render(format!("{name}: {e:#}")))
}

fn sessions(state: &AppState) -> Result<Sessions, ConsoleError> {
    state
        .admin_token
        .as_deref()
        .map(Sessions::new)
        .ok_or(ConsoleError::Off)
}

/// The signed-in operator, and what every page shows of them.
struct SignedIn {
    session: Session,
    csrf: String,
}

impl SignedIn {
    fn context(&self, page: &str, mut extra: Value) -> Value {
        extra["operator"] = json!(self.session.operator);
        extra["csrf"] = json!(self.csrf);
        extra["nav"] = json!(page);
        extra
    }
}

fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<SignedIn, ConsoleError> {
    let sessions = sessions(state)?;
    let session = session::cookie_value(headers)
        .and_then(|value| sessions.read(&value, Utc::now()))
        .ok_or(ConsoleError::SignIn)?;
    let csrf = sessions.csrf(&session);
    Ok(SignedIn { session, csrf })
}

/// A state-changing form: signed in, and carrying this session's CSRF token.
fn checked(state: &AppState, headers: &HeaderMap, csrf: &str) -> Result<SignedIn, ConsoleError> {
    let who = signed_in(state, headers)?;
    if sessions(state)?.csrf_ok(&who.session, csrf) {
        Ok(who)
    } else {
        Err(ConsoleError::Forbidden)
    }
}

async fn stylesheet(State(state): State<AppState>) -> Result<Response, ConsoleError> {
    sessions(&state)?;
    Ok((
        [(CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("templates/console.css"),
    )
        .into_response())
}

#[cfg(test)]
mod tests;
