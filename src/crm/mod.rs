//! Business events out to the agency's CRM (`ZAGUAN_EVENTS_URL`): each event the engine wrote
//! to `events` ([`crate::store::Event`]) is POSTed as JSON to every configured URL, signed with
//! `ZAGUAN_EVENTS_SECRET`, its id as the idempotency key. In order per conversation (a waiting
//! event holds back the ones behind it), once however many instances run (an instance holds an
//! event while it sends it), retried with backoff on timeouts, 408, 429 and 5xx for up to a
//! day, failed for good on any other refusal. `zaguan events list|retry` shows and resends the
//! failed ones; see docs/events.md.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt as _;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;
use url::Url;

use crate::runtime::{PeriodicJob, spawn_every};
use crate::store::{Event, EventStore, EventUpdate, StoreError};

/// Signature header: `sha256=` and the hex HMAC-SHA256 of `{timestamp}.{raw body}`.
pub const SIGNATURE_HEADER: &str = "X-Zaguan-Signature-256";
/// Unix seconds of the attempt; part of what is signed, so a replay is told by its age.
pub const TIMESTAMP_HEADER: &str = "X-Zaguan-Timestamp";
/// The event's id, the same on every attempt: receivers drop what they have seen.
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";
pub const EVENT_TYPE_HEADER: &str = "X-Zaguan-Event";

/// Where events go and how hard to try.
#[derive(Debug, Clone)]
pub struct EventSettings {
    pub urls: Vec<Url>,
    pub secret: SecretString,
    /// Only these types are sent (the others are settled without a request); `None`: all.
    pub types: Option<BTreeSet<String>>,
    /// Each request's limit.
    pub timeout: Duration,
    /// An event not accepted this long after it happened is failed for good.
    pub max_age: chrono::Duration,
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// How often to look for due events, and how many conversations' events at once.
    pub every: Duration,
    pub batch: usize,
}

impl EventSettings {
    pub fn new(urls: Vec<Url>, secret: SecretString) -> Self {
        Self {
            urls,
            secret,
            types: None,
            timeout: Duration::from_secs(10),
            max_age: chrono::Duration::days(1),
            base_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(3600),
            every: Duration::from_secs(1),
            batch: 50,
        }
    }
}

/// The signature of `body` sent at `timestamp` (Unix seconds), as the header carries it.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The delivery loop of one process.
pub struct EventDelivery {
    store: Arc<dyn EventStore>,
    /// Where each conversation's contact came from (`users.lead_source`), for the body's
    /// `source`; `None`: the body has none.
    sources: Option<Arc<dyn crate::store::UserStore>>,
    http: reqwest::Client,
    settings: EventSettings,
}

impl PeriodicJob for EventDelivery {
    const DONE: Option<&'static str> = None;
    const FAILED: &'static str = "events not delivered this round";
    type Error = StoreError;

    async fn round(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        self.tick(now).await
    }
}

/// How one receiver answered.
enum Answer {
    Accepted,
    Retry(String),
    Refused(String),
}

impl EventDelivery {
    pub fn new(store: Arc<dyn EventStore>, settings: EventSettings) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .build()?;
        Ok(Self {
            store,
            sources: None,
            http,
            settings,
        })
    }

    /// Every event's body says where its contact came from: the portal or CRM that sent them
    /// as a lead (`idealista`…), else `click_to_whatsapp_ad` with the ad's `referral`
    /// (`ctwa_clid` included), else `organic` (they wrote on WhatsApp first).
    pub fn with_sources(mut self, users: Arc<dyn crate::store::UserStore>) -> Self {
        self.sources = Some(users);
        self
    }

    /// The body receivers get for `event`.
    async fn body_of(&self, event: &Event) -> serde_json::Value {
        let mut body = event.body();
        if let Some(users) = &self.sources {
            let user = match users.user(&event.wa_id).await {
                Ok(user) => user,
                // Not known now: the event goes without it rather than wait.
                Err(_) => return body,
            };
            let source = user
                .as_ref()
                .map_or(crate::store::ORGANIC_SOURCE, |u| u.source());
            body["source"] = serde_json::json!(source);
            // The ad's click id lets the agency's CRM report the conversion to Meta.
            if let Some(referral) = user.as_ref().and_then(|u| u.referral.as_ref()) {
                body["referral"] = serde_json::json!(referral);
            }
        }
        body
    }

    /// Delivers every `settings.every` until the process stops.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let every = self.settings.every;
        spawn_every(self, every)
    }

    /// Sends the events due at `now` (the oldest of each conversation); returns how many were
    /// attempted.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let due = self.store.due_events(now, self.settings.batch).await?;
        // Held long enough for every receiver to time out once.
        let hold = chrono::Duration::from_std(
            self.settings.timeout * u32::try_from(self.settings.urls.len()).unwrap_or(1) * 2,
        )
        .unwrap_or(chrono::Duration::minutes(5))
            + chrono::Duration::seconds(10);
        let attempted = futures::stream::iter(due)
            .map(|event| async move {
                if !self.store.claim_event(&event.id, now, now + hold).await? {
                    return Ok::<_, StoreError>(0);
                }
                let update = self.attempt(&event).await;
                let outcome = match &update {
                    EventUpdate::Delivered { .. } => "delivered",
                    EventUpdate::Retry { .. } => "retry",
                    EventUpdate::Failed { .. } => "failed",
                };
                metrics::counter!("zaguan_events_total", "type" => event.event.kind(), "outcome" => outcome)
                    .increment(1);
                match &update {
                    EventUpdate::Failed { error } => {
                        tracing::error!(event = %event.id, "event failed for good: {error}");
                    }
                    EventUpdate::Retry { at, error } => {
                        tracing::warn!(event = %event.id, retry_at = %at, "event not accepted, retrying: {error}");
                    }
                    EventUpdate::Delivered { .. } => {}
                }
                self.store.settle_event(&event.id, &update).await?;
                Ok(1)
            })
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await;
        attempted.into_iter().sum()
    }

    /// One attempt at every receiver; how it ended.
    async fn attempt(&self, event: &Event) -> EventUpdate {
        let now = Utc::now();
        if let Some(types) = &self.settings.types
            && !types.contains(event.event.kind())
        {
            return EventUpdate::Delivered { at: now };
        }
        let body = serde_json::to_vec(&self.body_of(event).await).unwrap_or_default();
        let mut retry = None;
        for url in &self.settings.urls {
            match self.post(url, event, &body).await {
                Answer::Accepted => {}
                Answer::Refused(error) => {
                    return EventUpdate::Failed {
                        error: format!("{}: {error}", url.host_str().unwrap_or("receiver")),
                    };
                }
                Answer::Retry(error) => {
                    retry = Some(format!("{}: {error}", url.host_str().unwrap_or("receiver")));
                }
            }
        }
        let Some(error) = retry else {
            return EventUpdate::Delivered { at: now };
        };
        let exponent = event.attempts.min(16);
        let backoff = self
            .settings
            .base_backoff
            .saturating_mul(2u32.saturating_pow(exponent))
            .min(self.settings.max_backoff);
        let at = now + chrono::Duration::from_std(backoff).unwrap_or(chrono::Duration::hours(1));
        if at - event.at > self.settings.max_age {
            EventUpdate::Failed {
                error: format!(
                    "not accepted within {} h: {error}",
                    self.settings.max_age.num_hours()
                ),
            }
        } else {
            EventUpdate::Retry { at, error }
        }
    }

    async fn post(&self, url: &Url, event: &Event, body: &[u8]) -> Answer {
        let timestamp = Utc::now().timestamp();
        let signature = sign(
            self.settings.secret.expose_secret().as_bytes(),
            timestamp,
            body,
        );
        let sent = self
            .http
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_HEADER, &event.id)
            .header(EVENT_TYPE_HEADER, event.event.kind())
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature)
            .body(body.to_vec())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) if error.is_timeout() => return Answer::Retry("timed out".to_owned()),
            Err(error) => return Answer::Retry(format!("not reached: {error}")),
        };
        let status = response.status();
        if status.is_success() {
            return Answer::Accepted;
        }
        let text: String = response
            .text()
            .await
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        let said = format!("HTTP {}: {text}", status.as_u16());
        if status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429 {
            Answer::Retry(said)
        } else {
            Answer::Refused(said)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector docs/events.md's Python and Node examples produce (computed with them).
    #[test]
    fn the_signature_is_the_documented_one() {
        let body = br#"{"type":"lead.created","data":{"name":"Nuria","assistant":"searcher_assistant"},"id":"lead.created:34611000941","at":"2026-11-27T00:00:00Z","conversation":"34611000941"}"#;
        assert_eq!(
            sign(b"events-secret", 1_795_737_600, body),
            "sha256=c822e4f442e65198646a095d71b8ec2a6bdc3bc35b2b471e358fa904b0932375"
        );
    }
}
