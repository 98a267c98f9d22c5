//! `/healthz` (the process runs) and `/readyz` (the store answers): the probes of deploy files.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;

use crate::app::AppState;

/// A ready check that takes longer than this counts as not ready.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn healthz() -> &'static str {
    "ok"
}

pub async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match tokio::time::timeout(READY_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready"),
        Ok(Err(error)) => {
            tracing::warn!("not ready: {error}");
            (StatusCode::SERVICE_UNAVAILABLE, "store unavailable")
        }
        Err(_) => {
            tracing::warn!("not ready: store ping timed out");
            (StatusCode::SERVICE_UNAVAILABLE, "store unavailable")
        }
    }
}
