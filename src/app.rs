//! The HTTP application: every route and its limits (the README's endpoint table), over the
//! [`AppState`] the handlers share.

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::get;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

pub use crate::state::AppState;
use crate::{admin, health, leads, telemetry, webhook};

/// A client that has not sent its whole body by then gets 408 (a slow or stuck sender must not
/// hold a connection forever).
const BODY_TIMEOUT: Duration = Duration::from_secs(15);
/// A request not answered by then gets 503; for the webhook, Meta then redelivers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(25);

pub fn router(state: AppState) -> Router {
    let public = Router::new()
        .route(
            "/webhook",
            get(webhook::verify)
                .post(webhook::receive)
                .layer(DefaultBodyLimit::max(webhook::MAX_BODY_BYTES)),
        )
        .route(
            "/leads",
            axum::routing::post(leads::http::push)
                .layer(DefaultBodyLimit::max(leads::http::MAX_JSON_BYTES)),
        )
        .route(
            "/leads/email",
            axum::routing::post(leads::http::email)
                .layer(DefaultBodyLimit::max(leads::http::MAX_EMAIL_BYTES)),
        )
        .route("/healthz", get(health::healthz))
        .route(
            "/calendar/{file}",
            get(admin::calendar_feed::agent_calendar),
        )
        .route("/readyz", get(health::readyz));
    // On the public port unless ZAGUAN_METRICS_ADDR gives it a listener of its own.
    let separate = state
        .config
        .as_ref()
        .is_some_and(|c| c.metrics_addr.is_some());
    let public = if separate {
        public
    } else {
        public.route("/metrics", get(telemetry::render_metrics))
    };
    public
        .merge(admin_routes(state.clone()))
        .merge(admin::console::routes(state.clone()))
        .layer(RequestBodyTimeoutLayer::new(BODY_TIMEOUT))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .with_state(state)
}

/// `/metrics` alone, for the listener of `ZAGUAN_METRICS_ADDR`.
pub fn metrics_router() -> Router {
    Router::new()
        .route("/metrics", get(telemetry::render_metrics))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
}

/// The admin API, behind its token (wrong ones throttled per client address).
fn admin_routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin/conversations", get(admin::api::list))
        .route(
            "/admin/users/{wa_id}/role",
            axum::routing::post(admin::api::role),
        )
        .route("/admin/conversations/{wa_id}", get(admin::api::show))
        .route(
            "/admin/conversations/{wa_id}/reset",
            axum::routing::post(admin::api::reset),
        )
        .route(
            "/admin/conversations/{wa_id}/handoff",
            axum::routing::post(admin::api::take),
        )
        .route(
            "/admin/conversations/{wa_id}/release",
            axum::routing::post(admin::api::release),
        )
        .route(
            "/admin/conversations/{wa_id}/messages",
            axum::routing::post(admin::api::send_message),
        )
        .route(
            "/admin/conversations/{wa_id}/follow-up",
            axum::routing::post(admin::api::send_follow_up),
        )
        .route(
            "/admin/listings",
            axum::routing::post(admin::api::add_listings),
        )
        .route(
            "/admin/listings/{id}",
            axum::routing::patch(admin::api::update_listing),
        )
        .route(
            "/admin/staff",
            get(admin::api::list_staff).post(admin::api::add_staff),
        )
        .route(
            "/admin/staff/{id}",
            axum::routing::patch(admin::api::update_staff),
        )
        .route(
            "/admin/owners",
            get(admin::api::list_owners).post(admin::api::add_owners),
        )
        .route(
            "/admin/owners/{id}",
            axum::routing::patch(admin::api::update_owner),
        )
        .route("/admin/appointments", get(admin::api::list_appointments))
        .route(
            "/admin/appointments/{id}/outcome",
            axum::routing::post(admin::api::record_outcome),
        )
        .route("/admin/offers", get(admin::api::list_offers))
        .route(
            "/admin/offers/{id}/answer",
            axum::routing::post(admin::api::answer_offer),
        )
        .route("/admin/export/{kind}", get(admin::api::export))
        .route(
            "/admin/users/{wa_id}/forget",
            axum::routing::post(admin::api::forget),
        )
        .route("/admin/prompts", get(admin::api::prompts))
        .route(
            "/admin/prompts/reload",
            axum::routing::post(admin::api::reload_prompts),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state,
            admin::api::throttle_bearer,
        ))
}
