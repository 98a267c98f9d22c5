//! The operators' console at `/console`: server-rendered pages over the same functions the
//! admin API and the CLI call ([`crate::admin::operations`]) — a third face of them, never a second
//! implementation. Off (404) without `ZAGUAN_ADMIN_TOKEN`; signed in with that token and the
//! operator's name, then a signed session cookie ([`session`]). Every form that changes
//! something carries the session's CSRF token. The only script keeps an open conversation's
//! transcript current; every page works without it.

pub mod session;

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::header::{CONTENT_TYPE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use minijinja::Environment;
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::admin::operations::{self, AdminError, ListParams};
use crate::domain::WaId;
use crate::state::AppState;
use session::{Session, Sessions};

/// Failed sign-ins allowed before the form is closed for a while (all sources together).
const FAILED_SIGN_INS: usize = 5;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
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
        .route("/console/conversations/{wa_id}/reset", post(reset))
        .route("/console/conversations/{wa_id}/take", post(take))
        .route("/console/conversations/{wa_id}/release", post(release))
        .route("/console/conversations/{wa_id}/reply", post(reply))
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

async fn sign_in_form(State(state): State<AppState>) -> Result<Html<String>, ConsoleError> {
    sessions(&state)?;
    render("sign_in.html", json!({"name": ""}))
}

#[derive(Deserialize)]
struct SignInForm {
    operator: String,
    token: String,
}

/// Failed sign-ins of the last minute, all sources together.
fn failures() -> &'static Mutex<Vec<Instant>> {
    static FAILURES: OnceLock<Mutex<Vec<Instant>>> = OnceLock::new();
    FAILURES.get_or_init(Mutex::default)
}

async fn sign_in(
    State(state): State<AppState>,
    Form(form): Form<SignInForm>,
) -> Result<Response, ConsoleError> {
    let sessions = sessions(&state)?;
    let Some(token) = state.admin_token.as_deref() else {
        return Err(ConsoleError::Off);
    };
    {
        let mut failed = failures().lock().unwrap_or_else(|e| e.into_inner());
        failed.retain(|at| at.elapsed() < FAILURE_WINDOW);
        if failed.len() >= FAILED_SIGN_INS {
            tracing::warn!("console sign-in refused: too many failed attempts in the last minute");
            metrics::counter!("zaguan_console_sign_ins_total", "outcome" => "throttled")
                .increment(1);
            return Ok((
                StatusCode::TOO_MANY_REQUESTS,
                render("sign_in.html", json!({"error": "Too many failed attempts; wait a minute.", "name": form.operator}))?,
            )
                .into_response());
        }
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
        failures()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Instant::now());
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
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn sign_out(
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

/// Overview: what needs a person now, and how this instance is doing.
async fn overview(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers)?;
    let store = state.store.as_ref();
    let count = |params: ListParams| async move {
        operations::list_conversations(store, &params)
            .await
            .map(|page| page["conversations"].as_array().map_or(0, Vec::len))
    };
    let stuck = operations::list_conversations(
        store,
        &ListParams {
            idle_for: Some(STUCK_AFTER.to_owned()),
            limit: Some(200),
            ..ListParams::default()
        },
    )
    .await?["conversations"]
        .as_array()
        .map_or(0, |list| {
            list.iter()
                .filter(|c| c["dialog_state"].as_array().is_some_and(|s| !s.is_empty()))
                .count()
        });
    let requested = count(ListParams {
        handoff: Some("requested".into()),
        limit: Some(200),
        ..ListParams::default()
    })
    .await?;
    let taken = count(ListParams {
        handoff: Some("active".into()),
        limit: Some(200),
        ..ListParams::default()
    })
    .await?;
    let prompts = state
        .prompts
        .as_ref()
        .map(|p| serde_json::to_value(p.status()).unwrap_or_default());
    let last_hour = store
        .inbox_outcomes_since(Utc::now() - chrono::Duration::hours(1))
        .await?;
    render(
        "overview.html",
        who.context(
            "overview",
            json!({
                "stuck": stuck, "stuck_after": STUCK_AFTER, "requested": requested,
                "taken": taken, "prompts": prompts, "metrics": instance_metrics(),
                "last_hour": last_hour,
            }),
        ),
    )
}

/// Figures of this process's metrics registry (cumulative since it started).
fn instance_metrics() -> Value {
    let text = crate::telemetry::metrics_handle().render();
    let sum = |family: &str, label: Option<(&str, &str)>| -> u64 {
        let total: f64 = text
            .lines()
            .filter(|line| {
                line.starts_with(family)
                    && line[family.len()..].starts_with(['{', ' '])
                    && label.is_none_or(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |a, b| a + b);
        total.max(0.0).round() as u64
    };
    let buckets: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| l.starts_with("zaguan_turn_duration_seconds_bucket{"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    let quantile = |q: f64| -> String {
        let total = buckets.iter().map(|b| b.1).fold(0.0, f64::max);
        if total == 0.0 {
            return "—".to_owned();
        }
        buckets
            .iter()
            .find(|(_, count)| *count >= q * total)
            .map_or("—".to_owned(), |(le, _)| {
                if le.is_finite() {
                    format!("≤ {le} s")
                } else {
                    "over the largest bucket".to_owned()
                }
            })
    };
    let breakers: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with("zaguan_llm_breaker_open{"))
        .filter_map(|l| {
            let provider = l.split("provider=\"").nth(1)?.split('"').next()?;
            Some(json!({"provider": provider, "open": l.ends_with(" 1")}))
        })
        .collect();
    json!({
        "turns_answered": sum("zaguan_turns_total", Some(("outcome", "answered"))),
        "turns_failed": sum("zaguan_turns_total", Some(("outcome", "failed"))),
        "turn_p50": quantile(0.5),
        "turn_p99": quantile(0.99),
        "llm_fallbacks": sum("zaguan_llm_fallbacks_total", None),
        "breakers": breakers,
        "outbox_failed": sum("zaguan_outbound_sends_total", Some(("status", "failed"))),
        "outbox_retry": sum("zaguan_outbound_sends_total", Some(("status", "retry"))),
    })
}

#[derive(Debug, Default, Deserialize)]
struct ListFilters {
    #[serde(default)]
    state: String,
    #[serde(default)]
    idle_for: String,
    #[serde(default)]
    handoff: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    lang: String,
    #[serde(default)]
    q: String,
    page: Option<usize>,
}

const PAGE: usize = 25;

async fn conversations(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(filters): Query<ListFilters>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers)?;
    let page = filters.page.unwrap_or(1).max(1);
    let narrowing = !(filters.role.is_empty() && filters.lang.is_empty() && filters.q.is_empty());
    // Role, language and name are read per conversation: with one of them, a wider page is
    // read and narrowed here.
    let listed = operations::list_conversations(
        state.store.as_ref(),
        &ListParams {
            state: Some(filters.state.clone()),
            idle_for: Some(filters.idle_for.clone()),
            handoff: Some(filters.handoff.clone()),
            page: Some(if narrowing { 1 } else { page }),
            limit: Some(if narrowing { 200 } else { PAGE }),
        },
    )
    .await?;
    let mut rows = Vec::new();
    for c in listed["conversations"].as_array().into_iter().flatten() {
        let mut row = c.clone();
        let wa_id = c["wa_id"].as_str().unwrap_or_default();
        let user = match WaId::parse(wa_id) {
            Ok(wa_id) => state.store.user(&wa_id).await?,
            Err(_) => None,
        };
        let name = user.as_ref().and_then(|u| u.name.clone());
        let role = user.as_ref().map_or("prospect", |u| u.role.as_str());
        let q = filters.q.trim().to_lowercase();
        if (!filters.role.is_empty() && role != filters.role)
            || (!filters.lang.is_empty() && c["lang"].as_str() != Some(filters.lang.trim()))
            || (!q.is_empty()
                && !wa_id.contains(&q)
                && !name
                    .as_deref()
                    .is_some_and(|n| n.to_lowercase().contains(&q)))
        {
            continue;
        }
        row["name"] = json!(name);
        row["idle"] = json!(c["idle_seconds"].as_i64().map(idle).unwrap_or_default());
        rows.push(row);
    }
    // A full page may have more behind it (a last page of exactly PAGE shows an empty next).
    let (rows, more): (Vec<Value>, bool) = if narrowing {
        let more = rows.len() > page * PAGE;
        (
            rows.into_iter()
                .skip((page - 1) * PAGE)
                .take(PAGE)
                .collect(),
            more,
        )
    } else {
        let more = rows.len() == PAGE;
        (rows, more)
    };
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("state", &filters.state),
            ("idle_for", &filters.idle_for),
            ("handoff", &filters.handoff),
            ("role", &filters.role),
            ("lang", &filters.lang),
            ("q", &filters.q),
        ])
        .finish();
    let agents: Vec<String> = state
        .prompts
        .as_ref()
        .map(|p| p.prompts().agents().map(|a| a.name.clone()).collect())
        .unwrap_or_default();
    render(
        "conversations.html",
        who.context(
            "conversations",
            json!({
                "conversations": rows,
                "filters": {"state": filters.state, "idle_for": filters.idle_for,
                            "handoff": filters.handoff, "role": filters.role,
                            "lang": filters.lang, "q": filters.q},
                "agents": agents, "page": page, "more": more, "query": query,
            }),
        ),
    )
}

/// `3h 05m`, `12m`, `40s`.
fn idle(seconds: i64) -> String {
    let (h, m) = (seconds / 3600, (seconds % 3600) / 60);
    match (h, m) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m"),
        (h, m) => format!("{h}h {m:02}m"),
    }
}

async fn conversation_view(state: &AppState, raw: &str) -> Result<Value, ConsoleError> {
    let mut view = operations::show_conversation(state.store.as_ref(), raw).await?;
    let wa_id = WaId::parse(raw).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let user = state.store.user(&wa_id).await?;
    let midnight = Utc::now()
        .date_naive()
        .and_time(chrono::NaiveTime::MIN)
        .and_utc();
    view["tokens_today"] = json!(state.store.llm_tokens_since(raw, midnight).await?);
    view["name"] = json!(user.as_ref().and_then(|u| u.name.clone()));
    view["role"] = json!(user.as_ref().map_or("prospect", |u| u.role.as_str()));
    view["wa_id"] = json!(raw);
    view["c"] = view["conversation"].clone();
    view["lease"] = json!(state.store.lease_of(&wa_id).await?.map(|lease| json!({
        "owner": lease.owner,
        "until": lease.until.format("%d/%m %H:%M:%S UTC").to_string(),
        "held": !lease.released && lease.until > Utc::now(),
    })));
    let short = |at: &Value| {
        at.as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc).format("%d/%m %H:%M UTC").to_string())
    };
    for part in view["outbox"].as_array_mut().into_iter().flatten() {
        if let Some(at) = short(&part["at"]) {
            part["at"] = json!(at);
        }
    }
    for message in view["messages"].as_array_mut().into_iter().flatten() {
        if let Some(at) = short(&message["at"]) {
            message["at"] = json!(at);
        }
        for call in message["tool_calls"].as_array_mut().into_iter().flatten() {
            call["args_text"] =
                json!(serde_json::to_string_pretty(&call["args"]).unwrap_or_default());
        }
    }
    Ok(view)
}

async fn conversation(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(notice): Query<NoticeQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers)?;
    let mut view = conversation_view(&state, &raw).await?;
    view["notice"] = json!(notice.done);
    render("conversation.html", who.context("conversations", view))
}

#[derive(Debug, Default, Deserialize)]
struct NoticeQuery {
    done: Option<String>,
}

/// The transcript alone, for the page's refresh while it is open.
async fn transcript(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Html<String>, ConsoleError> {
    signed_in(&state, &headers)?;
    let view = conversation_view(&state, &raw).await?;
    render("transcript.html", view)
}

/// `path` with a notice of what was done (shown by the page).
fn with_notice(path: &str, what: &str) -> Response {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("done", what)
        .finish();
    redirect(&format!("{path}?{query}"))
}

/// After an action: back to the conversation, saying what was done.
fn done(raw: &str, what: &str) -> Response {
    with_notice(&format!("/console/conversations/{raw}"), what)
}

async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    operations::reset_conversation(state.store.as_ref(), &raw, Some(&who.session.operator)).await?;
    Ok(done(&raw, "Sent back to the primary assistant."))
}

async fn take(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    operations::take_conversation(
        state.store.as_ref(),
        &raw,
        Some(&who.session.operator),
        None,
        state.handoff_ttl,
    )
    .await?;
    Ok(done(
        &raw,
        "You have the conversation: the bot is silent until you release it.",
    ))
}

async fn release(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    operations::release_conversation(state.store.as_ref(), &raw, Some(&who.session.operator))
        .await?;
    Ok(done(&raw, "Released: the bot answers again."))
}

#[derive(Deserialize)]
struct ReplyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    text: String,
}

async fn reply(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<ReplyForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    operations::operator_message(
        state.store.as_ref(),
        &raw,
        Some(&who.session.operator),
        &form.text,
    )
    .await?;
    state.arrivals.wake();
    Ok(done(&raw, "Reply queued for WhatsApp."))
}

async fn forget_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers)?;
    render(
        "forget.html",
        who.context("conversations", json!({"wa_id": raw})),
    )
}

async fn forget(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    let counts = operations::forget_user(state.store.as_ref(), &raw, state.lease).await?;
    tracing::info!(operator = %who.session.operator, deleted = counts.total(), "user forgotten from the console");
    Ok(redirect("/console/conversations"))
}

async fn prompts(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(notice): Query<NoticeQuery>,
) -> Result<Html<String>, ConsoleError> {
    let who = signed_in(&state, &headers)?;
    let reloader = state
        .prompts
        .as_ref()
        .ok_or_else(|| AdminError::NotFound("no engine runs in this process".into()))?;
    let registry = reloader.prompts();
    let agents: Vec<Value> = registry
        .agents()
        .map(|a| {
            json!({
                "name": a.name, "kind": format!("{:?}", a.kind).to_lowercase(),
                "delegation": a.delegation, "roles": a.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
                "tools": a.tools, "keywords": a.keywords, "examples": a.examples,
            })
        })
        .collect();
    render(
        "prompts.html",
        who.context(
            "prompts",
            json!({"status": reloader.status(), "agents": agents, "notice": notice.done}),
        ),
    )
}

async fn reload(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let who = checked(&state, &headers, &form.csrf)?;
    let reloader = state
        .prompts
        .as_ref()
        .ok_or_else(|| AdminError::NotFound("no engine runs in this process".into()))?;
    let said = match reloader.reload().await {
        Ok(crate::engine::Reloaded::Loaded { .. }) => "New prompt set loaded.",
        Ok(crate::engine::Reloaded::Unchanged { .. }) => "No change in the prompts folder.",
        Err(_) => "Refused: the running set stays (problems below).",
    };
    tracing::info!(operator = %who.session.operator, "prompts reloaded from the console");
    Ok(with_notice("/console/prompts", said))
}

#[cfg(test)]
mod tests;
