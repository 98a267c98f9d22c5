//! The operators' console at `/console`: server-rendered pages over the same functions the
//! admin API and the CLI call ([`crate::admin::operations`]) — a third face of them, never a second
//! implementation. Off (404) without `ZAGUAN_ADMIN_TOKEN`. Named operators sign in with their
//! password ([`crate::admin::team`]; the token signs in the bootstrap `admin`); the cookie names
//! a server-side session, so signing out or disabling someone ends it at once. What a page offers
//! follows the operator's role: viewers read with masked numbers, operators act, admins also
//! manage the team and export. Every form that changes something carries the session's CSRF
//! token. The only script keeps an open conversation's
//! transcript current; every page works without it.

pub mod i18n;
pub mod session;

mod refs;

mod actions;
mod follow_ups;
mod leads;
mod masking;
mod operators;
mod pages;
mod queue;
mod reports;
mod sign_in;
mod staff;

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
use crate::admin::team::{Identity, OperatorRole};
use crate::domain::WaId;
use crate::state::AppState;
use refs::Refs;
use subtle::ConstantTimeEq;

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/console", get(pages::overview))
        .route("/console/", get(pages::overview))
        .route("/console/console.css", get(stylesheet))
        .route(
            "/console/sign-in",
            get(sign_in::sign_in_form).post(sign_in::sign_in),
        )
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/queue", get(queue::queue))
        .route("/console/reports", get(reports::page))
        .route("/console/reports/{file}", get(reports::download))
        .route("/console/export/{file}", get(reports::export))
        .route("/console/conversations", get(pages::conversations))
        .route("/console/conversations/{wa_id}", get(pages::conversation))
        .route(
            "/console/conversations/{wa_id}/transcript",
            get(pages::transcript),
        )
        .route(
            "/console/conversations/{wa_id}/export/{file}",
            get(pages::export_test),
        )
        .route("/console/conversations/{wa_id}/reset", post(actions::reset))
        .route("/console/conversations/{wa_id}/take", post(actions::take))
        .route(
            "/console/conversations/{wa_id}/release",
            post(actions::release),
        )
        .route("/console/conversations/{wa_id}/reply", post(actions::reply))
        .route(
            "/console/conversations/{wa_id}/follow-up",
            post(actions::follow_up),
        )
        .route(
            "/console/conversations/{wa_id}/forget",
            get(actions::forget_form).post(actions::forget),
        )
        .route(
            "/console/operators",
            get(operators::operators).post(operators::add),
        )
        .route("/console/operators/{name}/reset", post(operators::reset))
        .route("/console/visits", get(follow_ups::visits))
        .route("/console/visits/{id}/outcome", post(follow_ups::outcome))
        .route("/console/offers", get(follow_ups::offers_list))
        .route("/console/leads", get(leads::leads))
        .route("/console/leads/{id}/email", get(leads::original))
        .route("/console/offers/{id}/answer", post(follow_ups::answer))
        .route("/console/staff", get(staff::staff).post(staff::add))
        .route("/console/staff/{id}/disable", post(staff::disable))
        .route(
            "/console/operators/{name}/disable",
            post(operators::disable),
        )
        .route("/console/prompts", get(pages::prompts))
        .route("/console/prompts/reload", post(actions::reload))
        .route("/console/owners", post(staff::add_owner))
        .route("/console/owners/{id}", post(staff::update_owner))
        .route("/console/language/{lang}", get(i18n::choose))
        .layer(axum::middleware::from_fn_with_state(state, i18n::locale))
}

fn templates() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.add_function("t", i18n::t);
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
            ("operators.html", include_str!("templates/operators.html")),
            ("staff.html", include_str!("templates/staff.html")),
            ("visits.html", include_str!("templates/visits.html")),
            ("offers.html", include_str!("templates/offers.html")),
            ("leads.html", include_str!("templates/leads.html")),
            ("queue.html", include_str!("templates/queue.html")),
            ("reports.html", include_str!("templates/reports.html")),
            ("queue_rows.html", include_str!("templates/queue_rows.html")),
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
    /// The operator's role (first) does not allow what needs the second.
    NotAllowed(OperatorRole, OperatorRole),
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
                    Html(format!(
                        "<p>{}</p><p><a href=\"/console\">{}</a></p>",
                        i18n::tr(
                            "Refused: this form is stale or not ours; reload the page.",
                            &[]
                        ),
                        i18n::tr("Back", &[])
                    )),
                )
                    .into_response()
            }
            ConsoleError::NotAllowed(has, needs) => {
                tracing::warn!(
                    role = has.as_str(),
                    needs = needs.as_str(),
                    "console action refused for the operator's role"
                );
                metrics::counter!("zaguan_admin_refusals_total", "reason" => "role").increment(1);
                (
                    StatusCode::FORBIDDEN,
                    Html(format!(
                        "<p>{}</p><p><a href=\"/console\">{}</a></p>",
                        i18n::tr(
                            "Refused: a {has} cannot do this; it needs an {needs}.",
                            &[
                                ("has", &i18n::tr(has.as_str(), &[])),
                                ("needs", &i18n::tr(needs.as_str(), &[]))
                            ]
                        ),
                        i18n::tr("Back", &[])
                    )),
                )
                    .into_response()
            }
            ConsoleError::Admin(error) => {
                let status = crate::admin::api::status_of(&error);
                (
                    status,
                    Html(format!(
                        "<p>{}</p><p><a href=\"/console\">{}</a></p>",
                        escape(&error.to_string()),
                        i18n::tr("Back", &[])
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
        .replace('"', "&quot;")
}

fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_owned())]).into_response()
}

/// Renders a page in the request's language ([`i18n`]), which every template reads as `lang`
/// and whose time zone the layout names.
fn render(name: &str, mut context: Value) -> Result<Html<String>, ConsoleError> {
    let locale = i18n::current();
    context["lang"] = json!(locale.lang.code());
    let back = i18n::back_to(context["nav"].as_str());
    context["back"] =
        json!(url::form_urlencoded::byte_serialize(back.as_bytes()).collect::<String>());
    if context.get("timezone").is_none() {
        context["timezone"] = json!(locale.tz.name());
    }
    templates()
        .get_template(name)
        .and_then(|t| t.render(minijinja::value::Serde(&context)))
        .map(Html)
        .map_err(|e| ConsoleError::Render(format!("{name}: {e:#}")))
}

/// The console exists only with an admin token (its bootstrap admin).
fn console_on(state: &AppState) -> Result<(), ConsoleError> {
    state
        .admin_token
        .as_ref()
        .map(drop)
        .ok_or(ConsoleError::Off)
}

/// The signed-in operator, and what every page shows of them.
struct SignedIn {
    identity: Identity,
    /// The session record's id, ended by signing out.
    session: String,
    csrf: String,
    refs: Refs,
}

impl SignedIn {
    fn context(&self, page: &str, mut extra: Value) -> Value {
        extra["operator"] = json!(self.identity.name);
        extra["operator_role"] = json!(self.identity.role.as_str());
        extra["can_act"] = json!(self.identity.may(OperatorRole::Operator));
        extra["is_admin"] = json!(self.identity.may(OperatorRole::Admin));
        extra["csrf"] = json!(self.csrf);
        extra["nav"] = json!(page);
        extra
    }

    /// Viewers see numbers masked, and link to conversations by sealed references.
    fn masked(&self) -> bool {
        !self.identity.may(OperatorRole::Operator)
    }

    /// How the page links to a conversation (`ref`) and shows its number (`shown`).
    fn link(&self, wa_id: &str) -> (String, String) {
        if self.masked() {
            let shown = WaId::parse(wa_id).map_or_else(|_| "…".to_owned(), |w| w.masked());
            (self.refs.seal(wa_id), shown)
        } else {
            (wa_id.to_owned(), wa_id.to_owned())
        }
    }

    /// Adds `ref` and `shown` beside a row's `wa_id` (replaced by `shown` for viewers).
    fn linked(&self, row: &mut Value) {
        let wa_id = row["wa_id"].as_str().unwrap_or_default().to_owned();
        let (reference, shown) = self.link(&wa_id);
        row["ref"] = json!(reference);
        row["shown"] = json!(shown);
        if self.masked() {
            row["wa_id"] = json!(shown);
        }
    }
}

fn refs(state: &AppState) -> Result<Refs, ConsoleError> {
    state
        .admin_token
        .as_deref()
        .map(Refs::new)
        .ok_or(ConsoleError::Off)
}

/// The number a page's path names: a number, or a viewer's sealed reference.
fn resolve(state: &AppState, raw: &str) -> Result<String, ConsoleError> {
    if Refs::is_sealed(raw) {
        refs(state)?
            .open(raw)
            .ok_or_else(|| AdminError::NotFound(format!("no conversation {raw}")).into())
    } else {
        Ok(raw.to_owned())
    }
}

async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<SignedIn, ConsoleError> {
    let refs = refs(state)?;
    let Some(cookie) = session::cookie_value(headers) else {
        return Err(ConsoleError::SignIn);
    };
    let signed = state
        .team()
        .session(&cookie, Utc::now())
        .await?
        .ok_or(ConsoleError::SignIn)?;
    Ok(SignedIn {
        identity: signed.identity,
        session: signed.id,
        csrf: signed.csrf,
        refs,
    })
}

/// A state-changing form: signed in with at least `role`, and carrying the session's CSRF token.
async fn checked(
    state: &AppState,
    headers: &HeaderMap,
    csrf: &str,
    role: OperatorRole,
) -> Result<SignedIn, ConsoleError> {
    let who = signed_in(state, headers).await?;
    if !bool::from(who.csrf.as_bytes().ct_eq(csrf.as_bytes())) {
        return Err(ConsoleError::Forbidden);
    }
    if !who.identity.may(role) {
        return Err(ConsoleError::NotAllowed(who.identity.role, role));
    }
    Ok(who)
}

async fn stylesheet(State(state): State<AppState>) -> Result<Response, ConsoleError> {
    console_on(&state)?;
    Ok((
        [(CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("templates/console.css"),
    )
        .into_response())
}

#[cfg(test)]
mod tests;
