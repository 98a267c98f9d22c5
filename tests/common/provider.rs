//! One conformance suite for both LLM wire formats: how a provider's failures become
//! [`LlmError`]s is the same contract for OpenAI and Anthropic, so it is written once and run
//! against each client (`provider_conformance!`), each against a local server.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use serde_json::Value;
use url::Url;
use zaguan::llm::{Llm, LlmError, LlmRequest};

/// A request a [`Canned`] server received.
#[derive(Debug, Clone)]
pub struct Captured {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Captured {
    /// The header's value, if it was sent.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

/// A local server answering every request with one status and JSON body, keeping each request:
/// the provider a client under test speaks to.
pub struct Canned {
    /// `http://127.0.0.1:PORT`, without any API path.
    pub root: String,
    captured: Arc<Mutex<Vec<Captured>>>,
}

impl Canned {
    pub async fn answering(status: u16, body: impl Into<String>) -> Self {
        let status = StatusCode::from_u16(status).unwrap();
        let body: String = body.into();
        let captured = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&captured);
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, bytes: Bytes| {
            let log = Arc::clone(&log);
            let body = body.clone();
            async move {
                log.lock().unwrap().push(Captured {
                    path: uri.path().to_owned(),
                    headers,
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                });
                (status, [(header::CONTENT_TYPE, "application/json")], body)
            }
        });
        Self {
            root: super::serve_local(app).await,
            captured,
        }
    }

    pub fn only_request(&self) -> Captured {
        let captured = self.captured.lock().unwrap();
        assert_eq!(captured.len(), 1, "expected exactly one request");
        captured[0].clone()
    }
}

/// What the suite needs to know of a provider.
pub struct Provider {
    /// A client at `base` with `key` and `timeout`.
    pub client: fn(&Url, Option<&str>, Duration) -> Box<dyn Llm>,
    /// The API base for a server at `http://127.0.0.1:PORT` (OpenAI's ends in `/v1`).
    pub base: fn(&str) -> Url,
    /// The provider's error body for an error of `kind` saying `message`.
    pub error: fn(kind: &str, message: &str) -> String,
    pub request: fn() -> LlmRequest,
    pub key: &'static str,
}

impl Provider {
    async fn answering(&self, status: u16, body: String) -> Url {
        (self.base)(&Canned::answering(status, body).await.root)
    }

    async fn error_for(&self, status: u16, body: String) -> LlmError {
        let base = self.answering(status, body).await;
        (self.client)(&base, Some(self.key), Duration::from_secs(5))
            .complete(&(self.request)())
            .await
            .unwrap_err()
    }
}

pub async fn a_server_error_is_unavailable_and_says_why(p: &Provider) {
    let body = (p.error)("server_error", "The server had an error");
    match p.error_for(500, body).await {
        LlmError::Unavailable(message) => {
            assert!(message.contains("500"), "{message}");
            assert!(message.contains("The server had an error"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

pub async fn rate_limiting_is_unavailable(p: &Provider) {
    let body = (p.error)("rate_limit_error", "Rate limit reached");
    assert!(matches!(
        p.error_for(429, body).await,
        LlmError::Unavailable(m) if m.contains("429")
    ));
}

pub async fn a_bad_request_is_rejected(p: &Provider) {
    let body = (p.error)(
        "invalid_request_error",
        "messages.1: tool ids must be unique",
    );
    match p.error_for(400, body).await {
        LlmError::Rejected { status, message } => {
            assert_eq!(status, 400);
            assert!(message.contains("400"), "{message}");
            assert!(message.contains("tool ids must be unique"), "{message}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
}

pub async fn an_error_never_repeats_the_api_key_even_when_the_server_echoes_it(p: &Provider) {
    let body = (p.error)(
        "authentication_error",
        &format!("Incorrect API key provided: {}", p.key),
    );
    let error = p.error_for(401, body).await;
    assert!(
        matches!(error, LlmError::Rejected { status: 401, .. }),
        "{error:?}"
    );
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(p.key), "the key leaked: {shown}");
}

pub async fn a_garbage_success_body_is_unavailable(p: &Provider) {
    assert!(matches!(
        p.error_for(200, "<html>Bad gateway, sort of</html>".into())
            .await,
        LlmError::Unavailable(_)
    ));
}

pub async fn a_server_that_never_answers_is_unavailable_within_the_timeout(p: &Provider) {
    let app = Router::new().fallback(std::future::pending::<&'static str>);
    let base = (p.base)(&super::serve_local(app).await);
    let client = (p.client)(&base, Some(p.key), Duration::from_millis(300));
    let started = Instant::now();
    let error = client.complete(&(p.request)()).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(error, LlmError::Unavailable(_)), "{error:?}");
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed < Duration::from_secs(3),
        "gave up after {elapsed:?}"
    );
}

pub async fn nothing_listening_is_unavailable(p: &Provider) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let base = (p.base)(&format!("http://{addr}"));
    let error = (p.client)(&base, Some(p.key), Duration::from_secs(5))
        .complete(&(p.request)())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Unavailable(_)), "{error:?}");
}

/// The suite as `#[tokio::test]`s in a `conformance` module (or the one named), for the
/// provider `$provider` (an expression building a [`Provider`]).
#[macro_export]
macro_rules! provider_conformance {
    ($provider:expr) => {
        $crate::provider_conformance!(conformance, $provider);
    };
    ($module:ident, $provider:expr) => {
        mod $module {
            use super::*;
            $crate::provider_conformance!(@cases $provider;
                a_server_error_is_unavailable_and_says_why,
                rate_limiting_is_unavailable,
                a_bad_request_is_rejected,
                an_error_never_repeats_the_api_key_even_when_the_server_echoes_it,
                a_garbage_success_body_is_unavailable,
                a_server_that_never_answers_is_unavailable_within_the_timeout,
                nothing_listening_is_unavailable
            );
        }
    };
    (@cases $provider:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::common::provider::$case(&$provider).await;
            }
        )*
    };
}
