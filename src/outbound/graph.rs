//! The Graph API's messages endpoint (`POST {base}/{phone_number_id}/messages`): text messages,
//! interactive reply buttons, and mark-as-read with the typing indicator. Errors are classified
//! here, once, into what the sender can do about them.

use std::time::Duration;

use anyhow::Context as _;
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::domain::{GraphError, WaId, WaMessageId};
use crate::store::{ListRow, ReplyButton};

/// Most reply buttons WhatsApp shows on one message.
pub const MAX_BUTTONS: usize = 3;
/// Longest button title WhatsApp accepts, in characters.
pub const MAX_BUTTON_TITLE: usize = 20;
/// Longest reply button id WhatsApp accepts, in characters.
const MAX_BUTTON_ID: usize = 256;

/// Longest body of an interactive message, in characters.
pub const MAX_INTERACTIVE_BODY: usize = 1024;
/// Longest text message WhatsApp accepts, in characters.
pub const MAX_TEXT_BODY: usize = 4096;
/// Longest image caption WhatsApp accepts, in characters.
pub const MAX_CAPTION: usize = 1024;
/// Most rows of one list message.
pub const MAX_LIST_ROWS: usize = 10;
/// Longest list row title, description and id, and list button text, in characters.
pub const MAX_ROW_TITLE: usize = 24;
pub const MAX_ROW_DESCRIPTION: usize = 72;
const MAX_ROW_ID: usize = 200;
pub const MAX_LIST_BUTTON: usize = 20;

/// What to send.
#[derive(Debug, Clone, PartialEq)]
pub enum OutboundMessage<'a> {
    Text {
        body: &'a str,
    },
    /// A question with up to three reply buttons (a confirmation).
    Buttons {
        body: &'a str,
        buttons: &'a [ReplyButton],
    },
    /// A photo by its link, with a caption.
    Image {
        link: &'a str,
        caption: &'a str,
    },
    /// A list of up to ten rows to tap, behind a button.
    List {
        body: &'a str,
        button: &'a str,
        rows: &'a [ListRow],
    },
    /// Photos to swipe, each with the same quick replies, under a body text.
    Carousel {
        body: &'a str,
        cards: &'a [crate::store::Card],
        buttons: &'a [ReplyButton],
    },
    /// An approved template with its body parameters (outside the 24-hour window).
    Template {
        name: &'a str,
        language: &'a str,
        parameters: &'a [String],
        /// The payloads of its quick-reply buttons, in order.
        buttons: &'a [String],
    },
}

/// Why a Graph call did not succeed, as the sender acts on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SendError {
    /// Try again later: 429, 5xx, network trouble, throughput and pair rate limits (130429,
    /// 131056), maintenance (131057). `retry_after` when the server said how long.
    #[error("temporarily refused: {error}")]
    Retry {
        error: GraphError,
        retry_after: Option<Duration>,
    },
    /// The request reached the Graph API but its answer was lost (a timeout or a broken
    /// connection after sending, an unreadable success): the message may have been accepted.
    /// Its status webhook says so; sending it again at once could deliver it twice.
    #[error("sent, answer lost: {error}")]
    Unconfirmed { error: GraphError },
    /// Never retried: outside the 24-hour window (131047), undeliverable (131026), a bad
    /// parameter (100), any other 4xx.
    #[error("refused: {error}")]
    Permanent { error: GraphError },
    /// Meta's quality and policy limits (131048, 131049, 368): not retried, and an operator
    /// must look at the account.
    #[error("refused by a quality or policy limit: {error}")]
    Policy { error: GraphError },
    /// The access token is invalid or expired (190): nothing goes out until an operator
    /// replaces it, so messages wait and are retried.
    #[error("access token rejected: {error}")]
    Token { error: GraphError },
}

impl SendError {
    pub fn graph_error(&self) -> &GraphError {
        match self {
            SendError::Retry { error, .. }
            | SendError::Unconfirmed { error }
            | SendError::Permanent { error }
            | SendError::Policy { error }
            | SendError::Token { error } => error,
        }
    }

    /// The metric label of the error's Graph code (`none` without one).
    pub fn code_label(&self) -> String {
        self.graph_error()
            .code
            .map_or_else(|| "none".to_owned(), |code| code.to_string())
    }
}

/// Calls to the Graph API one client makes at once; the others wait their turn. As many as one
/// HTTP/2 connection to graph.facebook.com carries at once: over HTTP/1.1 (a proxy, a local
/// fake) a burst of 10,000 read marks otherwise opened about 900 connections together, each
/// with its buffers and task (about 20 KiB).
pub const GRAPH_IN_FLIGHT: usize = 100;

/// The Graph API client for one access token; `None` is a dry run (nothing leaves the process).
pub struct GraphClient {
    http: reqwest::Client,
    base: Url,
    token: Option<SecretString>,
    /// [`GRAPH_IN_FLIGHT`] permits.
    in_flight: tokio::sync::Semaphore,
    /// Bounds a call's wait for a permit, as it bounds the call.
    timeout: Duration,
}

impl GraphClient {
    /// `base` is `WHATSAPP_API_BASE_URL` (`https://graph.facebook.com/v21.0`); `timeout`
    /// bounds each call.
    pub fn new(base: Url, token: Option<SecretString>, timeout: Duration) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(GRAPH_IN_FLIGHT)
            .build()
            .context("building the Graph API HTTP client")?;
        if base.cannot_be_a_base() {
            anyhow::bail!("`{base}` cannot be a base URL");
        }
        Ok(Self {
            http,
            base,
            token,
            in_flight: tokio::sync::Semaphore::new(GRAPH_IN_FLIGHT),
            timeout,
        })
    }

    pub fn is_dry_run(&self) -> bool {
        self.token.is_none()
    }

    /// Sends one message; its Graph `wamid`, or `None` in a dry run. `callback_data` (at most
    /// 512 characters) comes back in the message's status webhooks.
    pub async fn send(
        &self,
        phone_number_id: &str,
        to: &WaId,
        message: &OutboundMessage<'_>,
        callback_data: Option<&str>,
    ) -> Result<Option<WaMessageId>, SendError> {
        let mut body = message_body(to, message);
        if let Some(data) = callback_data {
            body["biz_opaque_callback_data"] = json!(data);
        }
        let Some(answer) = self.post(phone_number_id, &body).await? else {
            return Ok(None);
        };
        let answer: SendAnswer =
            serde_json::from_value(answer).map_err(|e| SendError::Unconfirmed {
                error: local_error(format!("unreadable answer: {e}")),
            })?;
        let wamid = answer
            .messages
            .into_iter()
            .next()
            .map(|m| WaMessageId::from(m.id))
            .ok_or_else(|| SendError::Unconfirmed {
                error: local_error("answer without a message id".to_owned()),
            })?;
        Ok(Some(wamid))
    }

    /// Marks an inbound message (and those before it) read; with `typing`, shows the typing
    /// indicator for up to 25 s or until the reply arrives. Sent again, it renews the indicator.
    pub async fn mark_read(
        &self,
        phone_number_id: &str,
        wamid: &WaMessageId,
        typing: bool,
    ) -> Result<(), SendError> {
        let mut body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": wamid.as_str(),
        });
        if typing {
            body["typing_indicator"] = json!({"type": "text"});
        }
        self.post(phone_number_id, &body).await.map(drop)
    }

    /// Every template of the WhatsApp Business Account `waba_id` (`GET
    /// {base}/{waba_id}/message_templates`, following the pages), for `zaguan templates check`.
    pub async fn message_templates(&self, waba_id: &str) -> anyhow::Result<Vec<AccountTemplate>> {
        let Some(token) = &self.token else {
            anyhow::bail!("WHATSAPP_ACCESS_TOKEN is unset");
        };
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked in new")
            .pop_if_empty()
            .extend([waba_id, "message_templates"]);
        url.query_pairs_mut()
            .append_pair(
                "fields",
                "name,language,status,category,components,parameter_format",
            )
            .append_pair("limit", "100");
        let mut templates = Vec::new();
        let mut next = Some(url);
        // A bound: an account has at most a few thousand templates.
        for _ in 0..100 {
            let Some(url) = next.take() else {
                break;
            };
            let response = self
                .http
                .get(url)
                .bearer_auth(token.expose_secret())
                .send()
                .await
                .map_err(|e| anyhow::anyhow!(crate::transport::describe(&e.without_url())))?;
            let status = response.status();
            let body: Value = response
                .json()
                .await
                .context("the template list is not JSON")?;
            if !status.is_success() {
                let message = body["error"]["message"].as_str().unwrap_or("no message");
                anyhow::bail!("the Graph API answered {status}: {message}");
            }
            let page: TemplatePage =
                serde_json::from_value(body).context("an unreadable template list")?;
            templates.extend(page.data);
            next = page
                .paging
                .and_then(|p| p.next)
                .and_then(|next| next.parse::<Url>().ok());
        }
        Ok(templates)
    }

    /// One POST to `{base}/{phone_number_id}/messages`; `None` in a dry run.
    async fn post(&self, phone_number_id: &str, body: &Value) -> Result<Option<Value>, SendError> {
        let Some(token) = &self.token else {
            return Ok(None);
        };
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked in new")
            .pop_if_empty()
            .extend([phone_number_id, "messages"]);
        tracing::trace!(body = %body, "Graph API request");
        let Ok(Ok(_permit)) = tokio::time::timeout(self.timeout, self.in_flight.acquire()).await
        else {
            metrics::counter!("zaguan_graph_calls_not_started_total").increment(1);
            // Never sent: safe to send again.
            return Err(SendError::Retry {
                error: local_error(format!(
                    "not sent: {GRAPH_IN_FLIGHT} Graph API calls were in flight for {:?}",
                    self.timeout
                )),
                retry_after: None,
            });
        };
        let response = self
            .http
            .post(url)
            .bearer_auth(token.expose_secret())
            .json(body)
            .send()
            .await
            .map_err(|e| {
                let connect = e.is_connect();
                let error = local_error(crate::transport::describe(&e.without_url()));
                if connect {
                    // Never reached the server: safe to send again.
                    SendError::Retry {
                        error,
                        retry_after: None,
                    }
                } else {
                    SendError::Unconfirmed { error }
                }
            })?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let bytes = response.bytes().await.map_err(|e| {
            let error = local_error(crate::transport::describe(&e.without_url()));
            if status.is_success() {
                SendError::Unconfirmed { error }
            } else {
                SendError::Retry { error, retry_after }
            }
        })?;
        tracing::trace!(http.status = status.as_u16(), body = %String::from_utf8_lossy(&bytes), "Graph API answer");
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| SendError::Unconfirmed {
                    error: local_error(format!("unreadable answer (HTTP {status}): {e}")),
                });
        }
        let error = serde_json::from_slice::<ErrorAnswer>(&bytes)
            .map(|answer| answer.error.into_graph_error())
            .unwrap_or_else(|_| {
                local_error(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&bytes)
                        .chars()
                        .take(200)
                        .collect::<String>()
                ))
            });
        Err(classify(status, error, retry_after))
    }
}

/// The JSON body of a message to `to`. A business-scoped user id (not a phone number) goes in
/// `recipient`, a phone number in `to`.
pub fn message_body(to: &WaId, message: &OutboundMessage<'_>) -> Value {
    let mut body = json!({
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
    });
    let key = to.as_str();
    if key.bytes().all(|b| b.is_ascii_digit()) {
        body["to"] = json!(key);
    } else {
        body["recipient"] = json!(key);
    }
    match message {
        OutboundMessage::Text { body: text } => {
            body["type"] = json!("text");
            body["text"] = json!({"preview_url": false, "body": text});
        }
        OutboundMessage::Buttons {
            body: text,
            buttons,
        } => {
            let buttons: Vec<Value> = buttons
                .iter()
                .take(MAX_BUTTONS)
                .map(|button| {
                    json!({"type": "reply", "reply": {
                        "id": button.id.chars().take(MAX_BUTTON_ID).collect::<String>(),
                        "title": button.title.chars().take(MAX_BUTTON_TITLE).collect::<String>(),
                    }})
                })
                .collect();
            body["type"] = json!("interactive");
            body["interactive"] = json!({
                "type": "button",
                "body": {"text": text.chars().take(MAX_INTERACTIVE_BODY).collect::<String>()},
                "action": {"buttons": buttons},
            });
        }
        OutboundMessage::Image { link, caption } => {
            body["type"] = json!("image");
            body["image"] = json!({"link": link});
            if !caption.is_empty() {
                body["image"]["caption"] = json!(cut(caption, MAX_CAPTION));
            }
        }
        OutboundMessage::List {
            body: text,
            button,
            rows,
        } => {
            let rows: Vec<Value> = rows
                .iter()
                .take(MAX_LIST_ROWS)
                .map(|row| {
                    let mut item = json!({
                        "id": cut(&row.id, MAX_ROW_ID),
                        "title": cut(&row.title, MAX_ROW_TITLE),
                    });
                    if !row.description.is_empty() {
                        item["description"] = json!(cut(&row.description, MAX_ROW_DESCRIPTION));
                    }
                    item
                })
                .collect();
            body["type"] = json!("interactive");
            body["interactive"] = json!({
                "type": "list",
                "body": {"text": cut(text, MAX_INTERACTIVE_BODY)},
                "action": {
                    "button": cut(button, MAX_LIST_BUTTON),
                    "sections": [{"rows": rows}],
                },
            });
        }
        OutboundMessage::Carousel {
            body: text,
            cards,
            buttons,
        } => {
            // Meta's «Interactive media carousel messages»: 2–10 cards with an image header,
            // the same quick replies on each; its request syntax types every card `cta_url`,
            // whichever buttons it carries.
            let quick_replies: Vec<Value> = buttons
                .iter()
                .take(crate::outbound::bundle::MAX_CARD_BUTTONS)
                .map(|button| {
                    json!({"type": "quick_reply", "quick_reply": {
                        "id": cut(&button.id, MAX_BUTTON_ID),
                        "title": cut(&button.title, MAX_BUTTON_TITLE),
                    }})
                })
                .collect();
            let cards: Vec<Value> = cards
                .iter()
                .take(*crate::outbound::bundle::CAROUSEL_CARDS.end())
                .enumerate()
                .map(|(i, card)| {
                    let mut shown = json!({
                        "card_index": i,
                        "type": "cta_url",
                        "header": {"type": "image", "image": {"link": card.link}},
                        "action": {"buttons": quick_replies},
                    });
                    if !card.caption.is_empty() {
                        shown["body"] = json!({"text": cut(&card.caption, crate::outbound::bundle::MAX_CARD_BODY)});
                    }
                    shown
                })
                .collect();
            body["type"] = json!("interactive");
            body["interactive"] = json!({
                "type": "carousel",
                "body": {"text": cut(text, MAX_INTERACTIVE_BODY)},
                "action": {"cards": cards},
            });
        }
        OutboundMessage::Template {
            name,
            language,
            parameters,
            buttons,
        } => {
            let parameters: Vec<Value> = parameters
                .iter()
                .map(|text| json!({"type": "text", "text": text}))
                .collect();
            let mut components = vec![json!({"type": "body", "parameters": parameters})];
            components.extend(buttons.iter().enumerate().map(|(index, payload)| {
                json!({
                    "type": "button",
                    "sub_type": "quick_reply",
                    "index": index.to_string(),
                    "parameters": [{"type": "payload", "payload": payload}],
                })
            }));
            body["type"] = json!("template");
            body["template"] = json!({
                "name": name,
                "language": {"code": language},
                "components": components,
            });
        }
    }
    body
}

/// `text` cut to `max` characters (WhatsApp counts characters, not bytes).
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// What the sender may do about `error` (HTTP `status`), by Graph code first, then by status.
pub fn classify(status: StatusCode, error: GraphError, retry_after: Option<Duration>) -> SendError {
    match error.code {
        Some(130429 | 131056 | 131057 | 131000 | 131016 | 2 | 4 | 80007) => {
            SendError::Retry { error, retry_after }
        }
        Some(190) => SendError::Token { error },
        Some(131048 | 131049 | 368) => SendError::Policy { error },
        Some(131047 | 131026 | 100) => SendError::Permanent { error },
        _ if status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT
            || status.is_server_error() =>
        {
            SendError::Retry { error, retry_after }
        }
        _ if status == StatusCode::UNAUTHORIZED => SendError::Token { error },
        _ => SendError::Permanent { error },
    }
}

/// `Retry-After` in seconds (the form Meta and proxies use); HTTP dates are not worth parsing.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// An error that did not come from the Graph API (no code).
fn local_error(message: String) -> GraphError {
    GraphError {
        code: None,
        title: None,
        message: Some(message),
        error_data: None,
    }
}

/// A template as the account lists it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AccountTemplate {
    pub name: String,
    pub language: String,
    pub status: String,
    #[serde(default)]
    pub category: Option<String>,
    /// Its header, body, footer and buttons, as Meta describes them.
    #[serde(default)]
    pub components: Vec<serde_json::Value>,
    /// `POSITIONAL` (`{{1}}`) or `NAMED` (`{{first_name}}`).
    #[serde(default)]
    pub parameter_format: Option<String>,
}

#[derive(Deserialize)]
struct TemplatePage {
    #[serde(default)]
    data: Vec<AccountTemplate>,
    #[serde(default)]
    paging: Option<Paging>,
}

#[derive(Deserialize)]
struct Paging {
    #[serde(default)]
    next: Option<String>,
}

#[derive(Deserialize)]
struct SendAnswer {
    #[serde(default)]
    messages: Vec<SentMessage>,
}

#[derive(Deserialize)]
struct SentMessage {
    id: String,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: WireError,
}

/// `{"error": {"message", "type", "code", "error_subcode", "error_data", "fbtrace_id"}}`.
#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    error_user_title: Option<String>,
    #[serde(default)]
    error_data: Option<Value>,
}

impl WireError {
    fn into_graph_error(self) -> GraphError {
        GraphError {
            code: self.code,
            title: self.error_user_title,
            message: self.message,
            error_data: self.error_data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: i64) -> GraphError {
        GraphError {
            code: Some(code),
            title: None,
            message: Some("x".into()),
            error_data: None,
        }
    }

    #[test]
    fn graph_codes_decide_before_http_statuses() {
        let bad = StatusCode::BAD_REQUEST;
        for code in [130429, 131056, 131057] {
            assert!(
                matches!(classify(bad, error(code), None), SendError::Retry { .. }),
                "{code}"
            );
        }
        for code in [131047, 131026, 100] {
            assert!(
                matches!(
                    classify(bad, error(code), None),
                    SendError::Permanent { .. }
                ),
                "{code}"
            );
        }
        for code in [131048, 131049, 368] {
            assert!(
                matches!(classify(bad, error(code), None), SendError::Policy { .. }),
                "{code}"
            );
        }
        assert!(matches!(
            classify(StatusCode::UNAUTHORIZED, error(190), None),
            SendError::Token { .. }
        ));
        assert!(matches!(
            classify(
                StatusCode::INTERNAL_SERVER_ERROR,
                local_error("boom".into()),
                None
            ),
            SendError::Retry { .. }
        ));
        assert!(matches!(
            classify(bad, local_error("bad".into()), None),
            SendError::Permanent { .. }
        ));
    }

    #[test]
    fn a_phone_number_goes_in_to_and_a_business_scoped_id_in_recipient() {
        let text = OutboundMessage::Text { body: "Hola" };
        let phone = message_body(&WaId::parse("34600111222").unwrap(), &text);
        assert_eq!(phone["to"], "34600111222");
        assert_eq!(phone["text"], json!({"preview_url": false, "body": "Hola"}));
        let bsuid = message_body(&WaId::parse("ES.13491208655302741918").unwrap(), &text);
        assert_eq!(bsuid["recipient"], "ES.13491208655302741918");
        assert!(bsuid.get("to").is_none());
    }

    #[test]
    fn a_template_carries_its_language_and_body_parameters() {
        let parameters = vec![
            "Ático en Chamberí".to_owned(),
            "27/11 a las 10:00".to_owned(),
        ];
        let body = message_body(
            &WaId::parse("34600111222").unwrap(),
            &OutboundMessage::Template {
                name: "visit_reminder",
                language: "es",
                parameters: &parameters,
                buttons: &[],
            },
        );
        assert_eq!(body["type"], "template");
        assert_eq!(
            body["template"],
            json!({"name": "visit_reminder", "language": {"code": "es"},
                   "components": [{"type": "body", "parameters": [
                       {"type": "text", "text": "Ático en Chamberí"},
                       {"type": "text", "text": "27/11 a las 10:00"}]}]})
        );
    }

    #[test]
    fn a_templates_quick_replies_carry_the_buttons_ids() {
        let parameters = vec!["Ático".to_owned()];
        let buttons = vec!["visit:A-1:done".to_owned(), "visit:A-1:no_show".to_owned()];
        let body = message_body(
            &WaId::parse("34600111222").unwrap(),
            &OutboundMessage::Template {
                name: "visit_outcome",
                language: "es",
                parameters: &parameters,
                buttons: &buttons,
            },
        );
        assert_eq!(
            body["template"]["components"][1],
            json!({"type": "button", "sub_type": "quick_reply", "index": "0",
                   "parameters": [{"type": "payload", "payload": "visit:A-1:done"}]})
        );
        assert_eq!(
            body["template"]["components"][2]["parameters"][0]["payload"],
            "visit:A-1:no_show"
        );
        assert_eq!(body["template"]["components"][2]["index"], "1");
    }

    #[test]
    fn buttons_are_cut_to_whatsapps_limits() {
        let buttons: Vec<ReplyButton> = ["Sí, confirmar la visita", "No", "Cambiar día", "Otra"]
            .iter()
            .enumerate()
            .map(|(i, title)| ReplyButton::new(format!("choice:{i}:{}", "x".repeat(300)), *title))
            .collect();
        let body = message_body(
            &WaId::parse("34600111222").unwrap(),
            &OutboundMessage::Buttons {
                body: "¿Confirmo la visita del jueves a las 18:00?",
                buttons: &buttons,
            },
        );
        let sent = body["interactive"]["action"]["buttons"].as_array().unwrap();
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[0]["reply"]["title"], "Sí, confirmar la vis");
        assert_eq!(
            sent[0]["reply"]["id"].as_str().unwrap().chars().count(),
            256
        );
        assert!(
            sent[1]["reply"]["id"]
                .as_str()
                .unwrap()
                .starts_with("choice:1:")
        );
        assert_eq!(body["interactive"]["type"], "button");
    }
}
