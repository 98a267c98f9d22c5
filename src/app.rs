//! The HTTP application: shared state and the router (ARCHITECTURE.md §4).

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use secrecy::SecretString;
use tokio::sync::Notify;

use crate::store::Store;
use crate::{health, telemetry, webhook};

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    /// `WHATSAPP_VERIFY_TOKEN`; `None` refuses every handshake.
    pub verify_token: Option<Arc<SecretString>>,
    /// `WHATSAPP_APP_SECRET`; `None` refuses every `POST /webhook`.
    pub app_secret: Option<Arc<SecretString>>,
    /// Woken when new messages land in the inbox, so workers need not poll tightly.
    pub inbox_signal: Arc<Notify>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn Store>,
        verify_token: Option<SecretString>,
        app_secret: Option<SecretString>,
    ) -> Self {
        Self {
            store,
            verify_token: verify_token.map(Arc::new),
            app_secret: app_secret.map(Arc::new),
            inbox_signal: Arc::new(Notify::new()),
        }
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/webhook",
            get(webhook::verify)
                .post(webhook::receive)
                .layer(DefaultBodyLimit::max(webhook::MAX_BODY_BYTES)),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(telemetry::render_metrics))
        .with_state(state)
}
