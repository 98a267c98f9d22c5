//! What the provider clients share at the HTTP boundary: one POST with its timing, the split of
//! failures into `Unavailable` (the server's trouble) and `Rejected` (it refused the request),
//! error texts that never carry the API key, and tool-call ids valid for every provider.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;

use http::HeaderValue;
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use url::Url;

use serde::Serialize;
use serde_json::value::RawValue;

pub(crate) use super::lane::Outgoing;
use super::lane::{Lane, LaneError};
use super::{LlmError, ToolSpec};

/// How much of an error body goes into an [`LlmError`] message.
const EXCERPT_CHARS: usize = 300;

/// `base` with `segments` appended, keeping any path it has (`…/v1` + `chat/completions`).
pub(crate) fn endpoint(mut base: Url, segments: &[&str]) -> anyhow::Result<Url> {
    let not_a_base = format!("`{base}` cannot be a base URL");
    base.path_segments_mut()
        .map_err(|()| anyhow::anyhow!(not_a_base))?
        .pop_if_empty()
        .extend(segments);
    Ok(base)
}

/// One pooled client per provider; `timeout` bounds each whole call (connect, send, read).
pub(crate) fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    client_with(timeout, Http2::Auto)
}

fn client_with(timeout: Duration, http2: Http2) -> anyhow::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(crate::transport::IDLE_CONNECTIONS);
    let builder = match http2 {
        // https: HTTP/2 when the server offers it (ALPN), else HTTP/1.1; http: HTTP/1.1.
        Http2::Auto => builder,
        Http2::PriorKnowledge => builder.http2_prior_knowledge(),
        Http2::Off => builder.http1_only(),
    };
    builder
        .http2_keep_alive_interval(Some(Duration::from_secs(30)))
        .http2_keep_alive_while_idle(true)
        .build()
        .context("building an LLM HTTP client")
}

/// How the model clients speak HTTP (`LLM_HTTP2`). On HTTP/2 the calls waiting on a model share
/// a few connections instead of holding one each (with its buffers and task): the memory of a
/// waiting turn is then mostly its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Http2 {
    /// HTTP/2 where the server offers it over TLS (OpenAI's and Anthropic's APIs do), HTTP/1.1
    /// otherwise.
    #[default]
    Auto,
    /// HTTP/2 without asking, also over plain `http://` (h2c): for a local gateway that speaks it.
    PriorKnowledge,
    /// HTTP/1.1 only.
    Off,
}

impl Http2 {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "" | "auto" => Ok(Self::Auto),
            "prior-knowledge" => Ok(Self::PriorKnowledge),
            "off" => Ok(Self::Off),
            other => Err(format!("`{other}`: auto, prior-knowledge or off")),
        }
    }
}

/// Calls one HTTP/2 connection carries at once, at most: servers cap a connection's streams
/// (100 to 250), and past the cap a call would wait for a stream rather than open another
/// connection. So calls are spread over one client (one connection) per this many calls the
/// policy lets run at once.
pub(crate) const STREAMS_PER_CONNECTION: usize = 100;

/// How a provider's calls reach it: reqwest clients spread round robin, and where HTTP/2 is
/// certain the leaner [`Lane`] in front of them.
pub(crate) struct Clients {
    clients: Box<[reqwest::Client]>,
    next: AtomicU64,
    lane: Option<Lane>,
    /// Set when the server turned out not to speak HTTP/2: reqwest from then on.
    lane_refused: AtomicBool,
}

impl Clients {
    /// Enough connections for `in_flight` calls at once, at most [`STREAMS_PER_CONNECTION`]
    /// each, to `endpoint`.
    pub(crate) fn new(
        endpoint: &Url,
        timeout: Duration,
        http2: Http2,
        in_flight: usize,
    ) -> anyhow::Result<Self> {
        let count = in_flight.div_ceil(STREAMS_PER_CONNECTION).max(1);
        let lane = match http2 {
            Http2::Off => None,
            Http2::Auto => Lane::new(endpoint, false, count, timeout),
            Http2::PriorKnowledge => Lane::new(endpoint, true, count, timeout),
        };
        // With a lane, reqwest is only its fallback: one client is enough.
        let clients = (0..if lane.is_some() { 1 } else { count })
            .map(|_| client_with(timeout, http2))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            clients: clients.into_boxed_slice(),
            next: AtomicU64::new(0),
            lane,
            lane_refused: AtomicBool::new(false),
        })
    }

    pub(crate) fn single(client: reqwest::Client) -> Self {
        Self {
            clients: Box::new([client]),
            next: AtomicU64::new(0),
            lane: None,
            lane_refused: AtomicBool::new(false),
        }
    }

    fn get(&self) -> &reqwest::Client {
        let n = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        &self.clients[n % self.clients.len()]
    }

    /// How the calls go, for the startup log.
    pub(crate) fn describe(&self) -> String {
        match &self.lane {
            Some(_) => "HTTP/2 lane".to_owned(),
            None => format!("{} reqwest clients", self.clients.len()),
        }
    }

    /// POSTs the JSON `body` to `endpoint` with `headers` and reads a JSON answer of type `T`.
    /// `api_key` is only used to blank it out of error texts and logs, should a server echo
    /// it. Bodies are logged at trace level only: they hold what customers wrote.
    pub(crate) async fn post_json<T: DeserializeOwned>(
        &self,
        endpoint: &Url,
        outgoing: Box<Outgoing>,
        api_key: Option<&SecretString>,
        provider: &'static str,
    ) -> Result<T, LlmError> {
        let started = Instant::now();
        tracing::trace!(body = %String::from_utf8_lossy(&outgoing.body), "{provider} request");
        let outgoing = match &self.lane {
            Some(lane) if !self.lane_refused.load(Ordering::Relaxed) => {
                match lane.post(outgoing).await {
                    Ok((status, answer)) => {
                        return read_answer(status, &answer, started, api_key, provider);
                    }
                    Err(LaneError::NotHttp2(outgoing)) => {
                        if !self.lane_refused.swap(true, Ordering::Relaxed) {
                            tracing::info!(
                                endpoint = %endpoint,
                                "{provider} does not offer HTTP/2: its calls go over HTTP/1.1"
                            );
                        }
                        outgoing
                    }
                    Err(error) => return Err(LlmError::Unavailable(error.to_string())),
                }
            }
            _ => outgoing,
        };
        // Boxed: with a lane this is the rare path, and a waiting call's future would otherwise
        // keep room for reqwest's.
        let (status, answer) = Box::pin(self.send(endpoint, outgoing)).await?;
        read_answer(status, &answer, started, api_key, provider)
    }

    /// The call through reqwest.
    async fn send(
        &self,
        endpoint: &Url,
        outgoing: Box<Outgoing>,
    ) -> Result<(StatusCode, bytes::Bytes), LlmError> {
        let Outgoing { headers, body } = *outgoing;
        // A call waiting on the model holds nothing of its request: the body goes as a
        // one-chunk stream, which the connection frees once written. A body of bytes would be
        // kept by reqwest until the answer (to resend it should a pooled connection turn out
        // closed; the policy's retries cover that).
        let length = body.len();
        let body = reqwest::Body::wrap_stream(futures::stream::once(async move {
            Ok::<_, std::convert::Infallible>(body)
        }));
        let response = self
            .get()
            .post(endpoint.clone())
            .headers(headers)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(body)
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport_error)?;
        Ok((status, body))
    }
}

/// A header whose value is secret: never shown in debug output.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, LlmError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        LlmError::Unexpected(anyhow::anyhow!("the API key is not a valid header value"))
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The answer's status and body as a `T`, or the error they mean.
fn read_answer<T: DeserializeOwned>(
    status: StatusCode,
    body: &[u8],
    started: Instant,
    api_key: Option<&SecretString>,
    provider: &'static str,
) -> Result<T, LlmError> {
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::debug!(
        duration_ms,
        http.status = status.as_u16(),
        "{provider} answered"
    );
    if tracing::enabled!(tracing::Level::TRACE) {
        tracing::trace!(body = %redacted(body, api_key), "{provider} response");
    }
    if !status.is_success() {
        let message = format!("HTTP {status}: {}", error_message(body, api_key));
        return Err(if is_retryable(status) {
            LlmError::Unavailable(message)
        } else {
            LlmError::Rejected {
                status: status.as_u16(),
                message,
            }
        });
    }
    serde_json::from_slice(body)
        .map_err(|e| LlmError::Unavailable(format!("unparseable answer (HTTP {status}): {e}")))
}

/// 429, 5xx (Anthropic's 529 "overloaded" among them) and 408 are the server's trouble, not the
/// request's.
fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || !status.is_client_error()
}

/// Timeouts, refused connections and broken bodies: the server may do better next time.
fn transport_error(error: reqwest::Error) -> LlmError {
    let error = error.without_url();
    if error.is_builder() {
        return LlmError::Unexpected(anyhow::Error::new(error));
    }
    LlmError::Unavailable(crate::transport::describe(&error))
}

/// `body` as text with the key blanked out.
fn redacted(body: &[u8], api_key: Option<&SecretString>) -> String {
    let text = String::from_utf8_lossy(body).into_owned();
    match api_key.map(|k| k.expose_secret()) {
        Some(key) if !key.is_empty() => text.replace(key, "[redacted]"),
        _ => text,
    }
}

/// What the provider said went wrong: `error.message` of an OpenAI or Anthropic error body,
/// else the start of the body; on one line, with the key blanked out.
fn error_message(body: &[u8], api_key: Option<&SecretString>) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: ErrorDetail,
    }
    #[derive(serde::Deserialize)]
    struct ErrorDetail {
        message: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(parsed) if !parsed.error.message.trim().is_empty() => {
            excerpt(parsed.error.message.as_bytes(), api_key)
        }
        _ => excerpt(body, api_key),
    }
}

/// The start of an error body on one line, with the key blanked out.
fn excerpt(body: &[u8], api_key: Option<&SecretString>) -> String {
    // Redacted before cutting, so no prefix of the key survives at the cut either.
    let text = redacted(body, api_key);
    let mut excerpt: String = text
        .chars()
        .take(EXCERPT_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(EXCERPT_CHARS).is_some() {
        excerpt.push('…');
    }
    excerpt
}

/// `^[A-Za-z0-9_-]{1,64}$`: the alphabet Anthropic accepts, so a history can move between providers.
pub(crate) fn is_portable_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A fresh portable id for a call whose provider id was missing or unusable.
pub(crate) fn new_call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("call_{nanos:x}_{n:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_ids_are_kept_and_others_are_not() {
        assert!(is_portable_id("call_abc-123"));
        assert!(!is_portable_id(""));
        assert!(!is_portable_id("call.1"));
        assert!(!is_portable_id("fc:1/2"));
        assert!(!is_portable_id(&"a".repeat(65)));
        assert!(is_portable_id(&new_call_id()));
        assert_ne!(new_call_id(), new_call_id());
    }

    #[test]
    fn an_excerpt_is_one_short_line_without_the_key() {
        let key = SecretString::from("sk-secret".to_owned());
        let body = format!("bad key sk-secret\n{}", "x".repeat(400));
        let text = excerpt(body.as_bytes(), Some(&key));
        assert!(!text.contains("sk-secret") && text.contains("[redacted]"));
        assert!(!text.contains('\n'));
        assert_eq!(text.chars().count(), EXCERPT_CHARS + 1);
    }
}

/// Each tool list's JSON in one wire format, encoded once. The same few lists (an agent's tools
/// for a role, built once per prompt set) go with every call, and encoding their JSON schemas
/// again each time was two thirds of encoding a request. Keyed by the list's `Arc`, which the
/// entry holds so the address cannot be reused; a prompt reload brings new lists, so the cache
/// starts over when it holds [`EncodedTools::MAX`] of them.
#[derive(Default)]
pub(crate) struct EncodedTools(std::sync::RwLock<Vec<Encoded>>);

/// A tool list and its JSON.
type Encoded = (Arc<[ToolSpec]>, Arc<RawValue>);

impl EncodedTools {
    const MAX: usize = 128;

    /// The JSON of `tools`, from `encode` the first time.
    pub(crate) fn get<W: Serialize>(
        &self,
        tools: &Arc<[ToolSpec]>,
        encode: impl FnOnce() -> W,
    ) -> Arc<RawValue> {
        let found = |entries: &[Encoded]| {
            entries
                .iter()
                .find(|(list, _)| Arc::ptr_eq(list, tools))
                .map(|(_, json)| json.clone())
        };
        if let Some(json) = found(&self.0.read().unwrap_or_else(|e| e.into_inner())) {
            return json;
        }
        let json: Arc<RawValue> = serde_json::value::to_raw_value(&encode())
            .expect("tool definitions are plain JSON")
            .into();
        let mut entries = self.0.write().unwrap_or_else(|e| e.into_inner());
        if let Some(json) = found(&entries) {
            return json;
        }
        if entries.len() >= Self::MAX {
            entries.clear();
        }
        entries.push((tools.clone(), json.clone()));
        json
    }
}

/// A request's `tools`: encoded here, or already encoded by [`EncodedTools`].
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum WireTools<'a, T: Serialize> {
    Fresh(Vec<T>),
    Encoded(&'a RawValue),
}

impl<T: Serialize> WireTools<'_, T> {
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Self::Fresh(tools) => tools.is_empty(),
            Self::Encoded(json) => json.get() == "[]",
        }
    }
}
