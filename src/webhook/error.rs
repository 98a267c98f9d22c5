//! The webhook's failures and their HTTP answers (the README's endpoint table), mapped in one
//! place.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::payload::PayloadError;
use super::signature::SignatureError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// 413: over the body limit (Meta sends up to 3 MB). Nothing is stored.
    #[error("body over the size limit")]
    TooLarge,
    /// 408: the body did not arrive in full within the time limit. Nothing is stored.
    #[error("body not received in full")]
    BodyNotReceived,
    /// 401: not from Meta (or no app secret configured). Nothing is stored.
    #[error("signature refused: {0}")]
    Signature(#[from] SignatureError),
    /// 400: signed, but not a webhook notification. Nothing is stored.
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// 503: the store did not take the updates; Meta retries and nothing is lost.
    #[error("store failed: {0}")]
    Store(#[from] StoreError),
}

impl WebhookError {
    fn status(&self) -> StatusCode {
        match self {
            WebhookError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            WebhookError::BodyNotReceived => StatusCode::REQUEST_TIMEOUT,
            WebhookError::Signature(_) => StatusCode::UNAUTHORIZED,
            WebhookError::Payload(_) => StatusCode::BAD_REQUEST,
            WebhookError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn label(&self) -> &'static str {
        match self {
            WebhookError::TooLarge => "too_large",
            WebhookError::BodyNotReceived => "body_timeout",
            WebhookError::Signature(_) => "unauthorized",
            WebhookError::Payload(_) => "bad_request",
            WebhookError::Store(StoreError::Unavailable(_)) => "store_unavailable",
            WebhookError::Store(StoreError::Unexpected(_)) => "store_error",
        }
    }
}

impl IntoResponse for WebhookError {
    fn into_response(self) -> Response {
        match &self {
            WebhookError::Signature(e) => {
                tracing::warn!(reason = e.label(), "webhook refused: {self}");
            }
            WebhookError::Payload(_) | WebhookError::TooLarge | WebhookError::BodyNotReceived => {
                tracing::warn!("webhook refused: {self}");
            }
            WebhookError::Store(StoreError::Unexpected(cause)) => {
                tracing::error!(error = ?cause, "webhook not stored, answering 503");
            }
            WebhookError::Store(StoreError::Unavailable(_)) => {
                tracing::error!("webhook not stored, answering 503: {self}");
            }
        }
        metrics::counter!("zaguan_webhook_requests_total", "outcome" => self.label()).increment(1);
        // The reason is ours to log, not the caller's to read.
        let body = self.status().canonical_reason().unwrap_or("error");
        (self.status(), body).into_response()
    }
}
