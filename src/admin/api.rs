//! The admin HTTP API (the README's endpoint table): operators find conversations stuck in a
//! subgraph, look at one, and send it back to the primary agent. Bearer `ZAGUAN_ADMIN_TOKEN` (the
//! bootstrap admin, compared in constant time) or an operator's own token (`zaguan operators
//! add`); without a configured admin token the routes do not exist (404), without a known token
//! they answer 401, and 403 when the operator's role does not allow the call (viewers: none;
//! operators: conversations, listings, prompts; admins: also exports and erasure). What is done
//! is recorded under the token's operator. JSON with stable field names.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use crate::admin::team::{Identity, OperatorRole};
use crate::realestate::listings::{self, Applied, ListingsError};
use crate::runtime::{PromptReloader, PromptStatus, Reloaded};
use crate::state::AppState;
use crate::store::StoreError;

use crate::admin::operations::{
    AdminError, ListParams, forget_user, list_conversations, operator_message,
    release_conversation, reset_conversation, set_role, show_conversation, take_conversation,
};

/// The HTTP status an [`AdminError`] answers with, for the API and the console alike (the
/// CLI shares the errors, not HTTP).
pub(crate) fn status_of(error: &AdminError) -> StatusCode {
    match error {
        AdminError::Disabled | AdminError::NotFound(_) => StatusCode::NOT_FOUND,
        AdminError::Unauthorized => StatusCode::UNAUTHORIZED,
        AdminError::Forbidden(_) => StatusCode::FORBIDDEN,
        AdminError::BadRequest(_) => StatusCode::BAD_REQUEST,
        AdminError::Conflict(_) => StatusCode::CONFLICT,
        AdminError::InvalidPrompts(_) => StatusCode::UNPROCESSABLE_ENTITY,
        AdminError::Store(StoreError::Unavailable(_)) => StatusCode::SERVICE_UNAVAILABLE,
        AdminError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let status = status_of(&self);
        let message = match self {
            AdminError::InvalidPrompts(problems) => {
                return (
                    status,
                    Json(json!({
                        "error": format!(
                            "{} problem(s) in the prompts folder; the running set stays",
                            problems.len()
                        ),
                        "problems": problems,
                    })),
                )
                    .into_response();
            }
            // Without the admin token the API does not exist: nothing says what it would be.
            AdminError::Disabled => "not found".to_owned(),
            AdminError::Store(StoreError::Unavailable(why)) => format!("store unavailable: {why}"),
            AdminError::Store(error) => {
                tracing::error!("admin request failed: {error:#}");
                "store error".to_owned()
            }
            other => other.to_string(),
        };
        (status, Json(json!({"error": message}))).into_response()
    }
}

/// Who the bearer token belongs to (the bootstrap admin token or an operator's own), if their
/// role allows at least `role`. Audit fields record this identity, never a name in the body.
pub(crate) async fn authorize(
    state: &AppState,
    headers: &HeaderMap,
    role: OperatorRole,
) -> Result<Identity, AdminError> {
    if state.admin_token.is_none() {
        return Err(AdminError::Disabled);
    }
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let identity = state
        .team()
        .bearer(presented)
        .await?
        .ok_or(AdminError::Unauthorized)?;
    if !identity.may(role) {
        tracing::warn!(operator = %identity.name, role = identity.role.as_str(), needs = role.as_str(), "admin API refused for the operator's role");
        metrics::counter!("zaguan_admin_refusals_total", "reason" => "role").increment(1);
        return Err(AdminError::Forbidden(format!(
            "{} is a {}; this needs an {}",
            identity.name,
            identity.role.as_str(),
            role.as_str()
        )));
    }
    Ok(identity)
}

/// The name wrong bearer tokens are counted under, per client address.
const BEARER: &str = "admin API bearer token";

/// Around every `/admin/…` route: a client address that sent wrong tokens too often waits
/// (429), like the console's sign-ins; a guessing script is slowed, nobody else is.
pub async fn throttle_bearer(
    State(state): State<AppState>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use crate::admin::throttle::{self, client_of};
    use axum::response::IntoResponse as _;
    let peer = peer.map(|axum::Extension(axum::extract::ConnectInfo(at))| at);
    let Some(address) = client_of(&state, request.headers(), peer) else {
        return next.run(request).await;
    };
    let now = chrono::Utc::now();
    let team = state.team();
    if !throttle::allows(team.store(), address, BEARER, now).await {
        tracing::warn!(%address, "admin API refused: too many wrong tokens in the last minute");
        metrics::counter!("zaguan_admin_refusals_total", "reason" => "throttled").increment(1);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            Json(serde_json::json!({"error": "too many wrong tokens from this address; wait a minute"})),
        )
            .into_response();
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        throttle::failed(team.store(), address, BEARER, now).await;
    }
    response
}

/// `GET /admin/conversations?state=&idle_for=&page=&limit=`.
pub async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<ListParams>,
) -> Result<Json<serde_json::Value>, AdminError> {
    authorize(&state, &headers, OperatorRole::Operator).await?;
    list_conversations(state.store.as_ref(), &params)
        .await
        .map(Json)
}

/// `GET /admin/conversations/{wa_id}`: state, the last 20 messages, the outbox.
pub async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<serde_json::Value>, AdminError> {
    authorize(&state, &headers, OperatorRole::Operator).await?;
    show_conversation(state.store.as_ref(), &raw)
        .await
        .map(Json)
}

#[derive(Debug, Default, Deserialize)]
pub struct ResetBody {}

/// `POST /admin/conversations/{wa_id}/reset`: back to the primary agent, history kept.
pub async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Option<Json<ResetBody>>,
) -> Result<Json<serde_json::Value>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let _ = body;
    reset_conversation(state.store.as_ref(), &raw, Some(&who.name))
        .await
        .map(Json)
}

#[derive(Debug, Default, Deserialize)]
pub struct RoleBody {
    /// `owner`, `agent`, `prospect`, or `auto` (back to what the business data says).
    role: Option<String>,
}

/// `POST /admin/users/{wa_id}/role`: sets a contact's role by hand, recorded with who and when.
/// Admins only: a number made an `agent` sees every customer's appointments and offers.
pub async fn role(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Option<Json<RoleBody>>,
) -> Result<Json<serde_json::Value>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Admin).await?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let role = body
        .role
        .ok_or_else(|| AdminError::BadRequest("role is required".to_owned()))?;
    set_role(state.store.as_ref(), &raw, &role, Some(&who.name))
        .await
        .map(Json)
}

fn reloader(state: &AppState) -> Result<&PromptReloader, AdminError> {
    state
        .prompts
        .as_deref()
        .ok_or_else(|| AdminError::NotFound("no prompt set in this process".to_owned()))
}

/// `GET /admin/prompts`: the active set's version (a hash of its files), load time and agents,
/// and the last set refused since.
pub async fn prompts(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<PromptStatus>, AdminError> {
    authorize(&state, &headers, OperatorRole::Operator).await?;
    Ok(Json(reloader(&state)?.status()))
}

/// `POST /admin/prompts/reload`: reads the folder now; 422 with every problem when the new set
/// is refused (the running set stays).
pub async fn reload_prompts(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    tracing::info!(operator = %who.name, "prompts reload asked through the admin API");
    let reloader = reloader(&state)?;
    let changed = match reloader.reload().await {
        Ok(Reloaded::Loaded { .. }) => true,
        Ok(Reloaded::Unchanged { .. }) => false,
        Err(problems) => {
            return Err(AdminError::InvalidPrompts(
                problems.iter().map(ToString::to_string).collect(),
            ));
        }
    };
    let mut body = serde_json::to_value(reloader.status()).unwrap_or_default();
    body["changed"] = json!(changed);
    Ok(Json(body))
}

#[derive(Debug, Default, Deserialize)]
pub struct TakeBody {
    /// `30m`, `2h`…: how long before it returns to the bot by itself (default
    /// `ZAGUAN_HANDOFF_TTL`).
    #[serde(rename = "for")]
    for_: Option<String>,
}

/// `POST /admin/conversations/{wa_id}/handoff`: an operator takes the conversation; the bot
/// stays silent until it is released or the handoff expires.
pub async fn take(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Option<Json<TakeBody>>,
) -> Result<Json<serde_json::Value>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    take_conversation(
        state.store.as_ref(),
        &raw,
        Some(&who.name),
        body.for_.as_deref(),
        state.handoff_ttl,
    )
    .await
    .map(Json)
}

/// `POST /admin/conversations/{wa_id}/release`: back to the bot.
pub async fn release(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<serde_json::Value>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    release_conversation(state.store.as_ref(), &raw, Some(&who.name))
        .await
        .map(Json)
}

#[derive(Debug, Default, Deserialize)]
pub struct MessageBody {
    text: Option<String>,
}

/// `POST /admin/conversations/{wa_id}/messages`: the operator's reply to the customer, sent
/// through the outbox (formatted for WhatsApp, no LLM). 409 unless an operator has the
/// conversation.
pub async fn send_message(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Option<Json<MessageBody>>,
) -> Result<(StatusCode, Json<serde_json::Value>), AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let queued = operator_message(
        state.store.as_ref(),
        &raw,
        Some(&who.name),
        body.text.as_deref().unwrap_or_default(),
    )
    .await?;
    // The workers send it now rather than at their next poll.
    state.arrivals.wake();
    Ok((StatusCode::ACCEPTED, Json(queued)))
}

/// `POST /admin/conversations/{wa_id}/follow-up`: the follow-up template to a customer whose
/// 24-hour window closed (202); 409 while the window is open or with no such template.
pub async fn send_follow_up(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    _body: Option<Json<MessageBody>>,
) -> Result<(StatusCode, Json<serde_json::Value>), AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let (templates, business) = state.templates_and_name();
    let queued = crate::admin::operations::operator_follow_up(
        state.store.as_ref(),
        &templates,
        &business,
        &raw,
        &who,
    )
    .await?;
    state.arrivals.wake();
    Ok((StatusCode::ACCEPTED, Json(queued)))
}

/// The real-estate store of the listings routes.
fn realestate(state: &AppState) -> Result<&dyn crate::realestate::RealEstateStore, AdminError> {
    state
        .realestate
        .as_deref()
        .ok_or_else(|| AdminError::NotFound("no real-estate store in this process".to_owned()))
}

impl From<ListingsError> for AdminError {
    fn from(error: ListingsError) -> Self {
        match error {
            ListingsError::Invalid(why) => {
                AdminError::BadRequest(format!("{why}; nothing was written"))
            }
            ListingsError::Store(error) => AdminError::Store(error),
        }
    }
}

/// `POST /admin/listings`: adds a listing (a JSON object) or several (an array), like
/// `zaguan listings add`; saved searches hear of them.
pub async fn add_listings(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<Applied>), AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let store = realestate(&state)?;
    let applied = listings::add(store, listings::parse(&body)?, Utc::now()).await?;
    tracing::info!(
        operator = %who.name,
        added = applied.added.len(),
        "listings added through the admin API"
    );
    Ok((StatusCode::CREATED, Json(applied)))
}

/// `PATCH /admin/listings/{id}`: changes the fields given (a JSON object), like
/// `zaguan listings update`; a lower price is news for saved searches.
pub async fn update_listing(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: String,
) -> Result<Json<Applied>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let store = realestate(&state)?;
    let mut items = listings::parse(&body)?;
    let [patch] = items.as_mut_slice() else {
        return Err(AdminError::BadRequest(
            "PATCH takes one listing's fields as a JSON object".to_owned(),
        ));
    };
    match patch.get("id").and_then(|v| v.as_str()) {
        Some(named) if named != id => {
            return Err(AdminError::BadRequest(format!(
                "the body names {named} but the path {id}; a listing's id cannot change"
            )));
        }
        _ => {
            patch.insert("id".to_owned(), json!(id));
        }
    }
    let applied =
        listings::update(store, items, Utc::now())
            .await
            .map_err(|error| match error {
                ListingsError::Invalid(why) if why.contains("does not exist") => {
                    AdminError::NotFound(why)
                }
                other => other.into(),
            })?;
    tracing::info!(operator = %who.name, listing = %id, cheaper = !applied.price_drops.is_empty(), "listing updated through the admin API");
    Ok(Json(applied))
}

#[derive(Debug, Default, Deserialize)]
pub struct ExportQuery {
    since: Option<String>,
    format: Option<crate::admin::export::ExportFormat>,
    #[serde(default)]
    bom: bool,
}

/// `GET /admin/export/{kind}?since=7d&format=csv|jsonl&bom=true`: like `zaguan export`.
pub async fn export(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(kind): Path<String>,
    Query(query): Query<ExportQuery>,
) -> Result<Response, AdminError> {
    use crate::admin::export::{self, ExportFormat, ExportKind};
    let who = authorize(&state, &headers, OperatorRole::Admin).await?;
    let kind = ExportKind::parse(&kind).ok_or_else(|| {
        AdminError::NotFound(format!("no export `{kind}`: leads, appointments or offers"))
    })?;
    let since = export::parse_since(query.since.as_deref().unwrap_or("7d"), Utc::now())
        .map_err(AdminError::BadRequest)?;
    let realestate = realestate(&state)?;
    let export = export::rows(kind, since, state.store.as_ref(), realestate).await?;
    let format = query.format.unwrap_or_default();
    let body = export::render(kind, &export.rows, format, query.bom);
    let content_type = match format {
        ExportFormat::Csv => "text/csv; charset=utf-8",
        ExportFormat::Jsonl => "application/x-ndjson",
    };
    tracing::info!(operator = %who.name, rows = export.rows.len(), cut = export.next.is_some(), "export served through the admin API");
    let mut response = ([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response();
    // A cut export says so, and where the next page starts (`?since=`).
    if let Some(next) = export.next {
        let headers = response.headers_mut();
        headers.insert("x-zaguan-export-cut", export.rows.len().into());
        if let Ok(value) = axum::http::HeaderValue::from_str(
            &next.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ) {
            headers.insert("x-zaguan-export-next-since", value);
        }
    }
    Ok(response)
}

/// `POST /admin/users/{wa_id}/forget`: like `zaguan users forget`.
pub async fn forget(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<serde_json::Value>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Admin).await?;
    let counts = forget_user(state.store.as_ref(), &raw, state.lease).await?;
    tracing::info!(operator = %who.name, deleted = counts.total(), "user forgotten through the admin API");
    Ok(Json(json!({"wa_id": raw, "deleted": counts})))
}

impl From<crate::realestate::people::PeopleError> for AdminError {
    fn from(error: crate::realestate::people::PeopleError) -> Self {
        use crate::realestate::people::PeopleError;
        match error {
            PeopleError::Invalid(why) => {
                AdminError::BadRequest(format!("{why}; nothing was written"))
            }
            PeopleError::Conflict(why) => {
                AdminError::Conflict(format!("{why}; nothing was written"))
            }
            PeopleError::NotFound(why) => AdminError::NotFound(why),
            PeopleError::Store(error) => AdminError::Store(error),
        }
    }
}

fn people_writing(state: &AppState) -> crate::realestate::people::Writing {
    crate::realestate::people::Writing {
        region: state
            .config
            .as_ref()
            .map_or_else(Default::default, |config| config.phone_region),
        now: Utc::now(),
    }
}

/// One JSON object: the body of a PATCH.
fn one_object(body: &str) -> Result<serde_json::Map<String, serde_json::Value>, AdminError> {
    use crate::realestate::people::{self, FileFormat};
    let mut items = people::parse(body, FileFormat::Json)?;
    match (items.len(), items.pop()) {
        (1, Some(item)) => Ok(item),
        _ => Err(AdminError::BadRequest(
            "PATCH takes one record's fields as a JSON object".to_owned(),
        )),
    }
}

/// `GET /admin/staff`: the agency's staff, disabled ones included (`disabled_at`).
pub async fn list_staff(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Vec<crate::realestate::StaffMember>>, AdminError> {
    authorize(&state, &headers, OperatorRole::Operator).await?;
    Ok(Json(realestate(&state)?.staff().await?))
}

/// `POST /admin/staff`: adds one member (a JSON object) or several (an array, or a CSV body
/// with `Content-Type: text/csv`), like `zaguan staff add|import`.
pub async fn add_staff(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<Vec<crate::realestate::StaffMember>>), AdminError> {
    use crate::realestate::people::{self, FileFormat};
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let format = if is_csv(&headers) {
        FileFormat::Csv
    } else {
        FileFormat::Json
    };
    let added = people::add_staff(
        realestate(&state)?,
        people::parse(&body, format)?,
        people_writing(&state),
    )
    .await?;
    tracing::info!(operator = %who.name, added = added.len(), "staff added through the admin API");
    Ok((StatusCode::CREATED, Json(added)))
}

/// `PATCH /admin/staff/{id}`: changes the fields given; `"disabled": true` disables,
/// `"new_calendar_token": true` replaces the feed's secret.
pub async fn update_staff(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: String,
) -> Result<Json<crate::realestate::StaffMember>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let mut patch = one_object(&body)?;
    let rotate = match patch.remove("new_calendar_token") {
        None => false,
        Some(serde_json::Value::Bool(rotate)) => rotate,
        Some(_) => {
            return Err(AdminError::BadRequest(
                "new_calendar_token: true or false".to_owned(),
            ));
        }
    };
    let member = crate::realestate::people::update_staff(
        realestate(&state)?,
        &id,
        patch,
        rotate,
        people_writing(&state),
    )
    .await?;
    tracing::info!(operator = %who.name, staff = %id, "staff member updated through the admin API");
    Ok(Json(member))
}

/// `GET /admin/owners`: the owners, each with the listings that name them.
pub async fn list_owners(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Vec<crate::realestate::people::OwnerView>>, AdminError> {
    authorize(&state, &headers, OperatorRole::Operator).await?;
    Ok(Json(
        crate::realestate::people::owners(realestate(&state)?).await?,
    ))
}

/// `POST /admin/owners`: like `zaguan owners add|import`.
pub async fn add_owners(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<Vec<crate::realestate::people::OwnerView>>), AdminError> {
    use crate::realestate::people::{self, FileFormat};
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let format = if is_csv(&headers) {
        FileFormat::Csv
    } else {
        FileFormat::Json
    };
    let added = people::add_owners(
        realestate(&state)?,
        people::parse(&body, format)?,
        people_writing(&state),
    )
    .await?;
    tracing::info!(operator = %who.name, added = added.len(), "owners added through the admin API");
    Ok((StatusCode::CREATED, Json(added)))
}

/// `PATCH /admin/owners/{id}`: changes the fields given; `listings` is the whole list.
pub async fn update_owner(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: String,
) -> Result<Json<crate::realestate::people::OwnerView>, AdminError> {
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let owner = crate::realestate::people::update_owner(
        realestate(&state)?,
        &id,
        one_object(&body)?,
        people_writing(&state),
    )
    .await?;
    tracing::info!(operator = %who.name, owner = %id, "owner updated through the admin API");
    Ok(Json(owner))
}

fn is_csv(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/csv"))
}

/// Which list: `?view=waiting|today|upcoming` for visits, `?view=open|answered` for offers.
#[derive(Debug, Deserialize)]
pub struct ViewQuery {
    view: Option<String>,
}

fn timezone(state: &AppState) -> chrono_tz::Tz {
    state
        .config
        .as_ref()
        .map_or(chrono_tz::UTC, |c| c.engine.timezone)
}

/// `GET /admin/appointments?view=`: like `zaguan appointments list` (all three views when
/// none is named), each visit with its view.
pub async fn list_appointments(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<ViewQuery>,
) -> Result<Json<Vec<serde_json::Value>>, AdminError> {
    use crate::realestate::follow_up::lists::{AppointmentView, appointment_json, appointments};
    authorize(&state, &headers, OperatorRole::Operator).await?;
    let views = match query.view.as_deref() {
        None => AppointmentView::ALL.to_vec(),
        Some(word) => vec![AppointmentView::parse(word).ok_or_else(|| {
            AdminError::BadRequest(format!("`{word}` is not waiting, today or upcoming"))
        })?],
    };
    let mut listed = Vec::new();
    for view in views {
        for appointment in
            appointments(realestate(&state)?, view, Utc::now(), timezone(&state)).await?
        {
            listed.push(appointment_json(&appointment, view));
        }
    }
    Ok(Json(listed))
}

#[derive(Debug, Deserialize)]
pub struct OutcomeBody {
    outcome: String,
}

/// `POST /admin/appointments/{id}/outcome` `{"outcome": "done"|"no-show"|"cancelled"}`: like
/// `zaguan appointments outcome`; 409 when it was recorded already.
pub async fn record_outcome(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<OutcomeBody>,
) -> Result<Json<serde_json::Value>, AdminError> {
    use crate::realestate::follow_up::lists::{AppointmentView, appointment_json};
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let by = format!("operator:{}", who.name);
    let appointment = crate::admin::follow_ups::outcome(
        realestate(&state)?,
        state.store.as_ref(),
        &id,
        &body.outcome,
        &by,
        Utc::now(),
    )
    .await?;
    tracing::info!(operator = %who.name, appointment = %id, outcome = %body.outcome, "visit outcome recorded through the admin API");
    Ok(Json(appointment_json(
        &appointment,
        AppointmentView::Waiting,
    )))
}

/// `GET /admin/offers?view=open|answered`: like `zaguan offers list`.
pub async fn list_offers(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<ViewQuery>,
) -> Result<Json<Vec<serde_json::Value>>, AdminError> {
    use crate::realestate::follow_up::lists::{OfferView, offer_json, offers};
    authorize(&state, &headers, OperatorRole::Operator).await?;
    let views =
        match query.view.as_deref() {
            None => vec![OfferView::Open, OfferView::Answered],
            Some(word) => vec![OfferView::parse(word).ok_or_else(|| {
                AdminError::BadRequest(format!("`{word}` is not open or answered"))
            })?],
        };
    let mut listed = Vec::new();
    for view in views {
        for offer in offers(realestate(&state)?, view, Utc::now()).await? {
            let mut line = offer_json(&offer);
            line["view"] = json!(view.as_str());
            listed.push(line);
        }
    }
    Ok(Json(listed))
}

#[derive(Debug, Deserialize)]
pub struct AnswerBody {
    answer: String,
    /// A counter-offer's amount, whole units: `250000` or `"250.000"`.
    amount: Option<serde_json::Value>,
}

/// `POST /admin/offers/{id}/answer` `{"answer": "accept"|"reject"|"counter", "amount": N}`:
/// like `zaguan offers answer`; 409 when it was answered already.
pub async fn answer_offer(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<AnswerBody>,
) -> Result<Json<serde_json::Value>, AdminError> {
    use crate::realestate::follow_up::lists::offer_json;
    let who = authorize(&state, &headers, OperatorRole::Operator).await?;
    let amount = match &body.amount {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(text)) => Some(text.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(AdminError::BadRequest(format!(
                "amount: `{other}` is not a number"
            )));
        }
    };
    let by = format!("operator:{}", who.name);
    let offer = crate::admin::follow_ups::answer(
        realestate(&state)?,
        state.store.as_ref(),
        &id,
        &body.answer,
        amount.as_deref(),
        &by,
        Utc::now(),
    )
    .await?;
    tracing::info!(operator = %who.name, offer = %id, answer = %body.answer, "offer answered through the admin API");
    Ok(Json(offer_json(&offer)))
}
