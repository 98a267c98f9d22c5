//! One part to the Graph API: sent, retried later with backoff, or failed for good.

use super::super::failures;
use super::super::graph::SendError;
use crate::domain::GraphError;
use crate::store::{ConversationStore, OutboxStore, UserStore};
use crate::store::{OutboxEntry, OutboxStatus, OutboxUpdate, StoreError};
use chrono::{DateTime, Utc};
use rand::Rng as _;
use std::time::Duration;

use std::sync::Arc;

use crate::outbound::graph::GraphClient;
use crate::outbound::limits::Limiters;
use crate::outbound::sender::record::{
    count_template, local_error, record_sent, send_entry, status_label,
};
use crate::outbound::sender::{InFlight, OutboundSettings, PartOutcome};

/// One stored part on its way to the Graph API, with what it uses of the `Outbound` sending it.
pub(super) struct PartSender<'a, S: ?Sized> {
    pub(super) store: &'a Arc<S>,
    pub(super) graph: &'a Arc<GraphClient>,
    pub(super) limiters: &'a Limiters,
    pub(super) settings: &'a OutboundSettings,
    /// The parts whose call runs in this process: not sent again meanwhile.
    pub(super) in_flight: &'a InFlight,
}

impl<S: OutboxStore + ConversationStore + UserStore + ?Sized> PartSender<'_, S> {
    /// Sends one part, retrying in place while the wait is short.
    pub(super) async fn send(&self, mut entry: OutboxEntry) -> Result<PartOutcome, StoreError> {
        let masked = entry.wa_id.masked();
        if entry.status == OutboxStatus::Sending {
            metrics::counter!("zaguan_outbound_unconfirmed_resent_total").increment(1);
            tracing::warn!(conversation.id = %masked, part = entry.part, "no status confirmed a part's last attempt; sending it again");
        }
        loop {
            if let Some(due) = entry.next_attempt_at {
                let wait = (due - Utc::now()).to_std().unwrap_or_default();
                if wait > self.settings.wait_in_place {
                    return Ok(PartOutcome::WaitUntil(due));
                }
                tokio::time::sleep(wait).await;
            }
            let Some(phone_number_id) = entry.phone_number_id.clone() else {
                // Nothing to send it from: a reply written without an inbound message.
                self.fail(&entry, local_error("no phone_number_id to send from"))
                    .await?;
                return Ok(PartOutcome::Settled);
            };
            if let Some(skip) =
                super::super::governor::stopped_at_send(self.store.as_ref(), &entry, Utc::now())
                    .await?
            {
                tracing::info!(conversation.id = %masked, part = entry.part, reason = skip.as_str(), "a part written first no longer may go: not sent");
                metrics::counter!("zaguan_outreach_stopped_at_send_total",
                    "purpose" => entry.purpose.map_or("none", |p| p.key()), "reason" => skip.as_str())
                .increment(1);
                let skipped = OutboxUpdate::Skipped {
                    error: super::super::governor::skip_error(skip),
                };
                self.store.update_outbox(&entry.id, &skipped).await?;
                return Ok(PartOutcome::Settled);
            }
            if entry.attempts >= self.settings.max_attempts {
                let error = entry.error.clone().unwrap_or_else(|| {
                    local_error(&format!("gave up after {} attempts", entry.attempts))
                });
                self.fail(&entry, error).await?;
                return Ok(PartOutcome::Settled);
            }
            self.limiters
                .until_send_allowed(&phone_number_id, entry.wa_id.as_str())
                .await;
            let now = Utc::now();
            let sending = OutboxUpdate::Sending {
                at: now,
                resend_at: now + grace(self.settings),
            };
            if !self.store.update_outbox(&entry.id, &sending).await? {
                // A status webhook confirmed an earlier attempt meanwhile.
                return Ok(PartOutcome::Settled);
            }
            entry.attempts += 1;
            // The call and the record of its success run to the end in a task of their own,
            // even when this work is dropped (its lease lost mid-send): a part delivered but
            // left `sending` would be sent again by the conversation's next owner.
            let call = {
                let (graph, store, entry) = (self.graph.clone(), self.store.clone(), entry.clone());
                let phone_number_id = phone_number_id.clone();
                let in_flight = self.in_flight.enter(&entry.id);
                tokio::spawn(async move {
                    let callback_data = entry.id.callback_data();
                    let sent = send_entry(&graph, &phone_number_id, &entry, &callback_data).await;
                    let recorded = match &sent {
                        Ok(wamid) => {
                            let update = OutboxUpdate::Sent {
                                wamid: wamid.clone(),
                            };
                            record_sent(store.as_ref(), &entry.id, &update).await
                        }
                        Err(_) => Ok(()),
                    };
                    drop(in_flight);
                    (sent, recorded)
                })
            };
            let (sent, recorded) = call
                .await
                .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("send task failed: {e}")))?;
            match sent {
                Ok(wamid) => {
                    count_template(&entry);
                    let status = if wamid.is_some() { "sent" } else { "dry_run" };
                    if wamid.is_none() {
                        tracing::info!(conversation.id = %masked, part = entry.part, "dry run: reply not sent (no WHATSAPP_ACCESS_TOKEN)");
                        tracing::debug!(body = %entry.body, "dry-run reply");
                    }
                    recorded?;
                    metrics::counter!("zaguan_outbound_sends_total", "status" => status, "code" => "none")
                        .increment(1);
                    return Ok(PartOutcome::Settled);
                }
                Err(error) => {
                    metrics::counter!("zaguan_outbound_sends_total",
                        "status" => status_label(&error), "code" => error.code_label())
                    .increment(1);
                    match error {
                        SendError::Retry { error, retry_after } => {
                            let delay = backoff(self.settings, entry.attempts)
                                .max(retry_after.unwrap_or_default());
                            back_off(
                                self.limiters,
                                self.store.as_ref(),
                                &phone_number_id,
                                &entry,
                                &error,
                                delay,
                            )
                            .await;
                            tracing::warn!(conversation.id = %masked, attempt = entry.attempts, ?delay, "send failed, retrying: {error}");
                            let at = self.retry_later(&entry, delay, &error).await?;
                            entry.next_attempt_at = Some(at);
                            entry.error = Some(error);
                        }
                        SendError::Unconfirmed { error } => {
                            // Left `sending`: its status webhook may confirm it within the
                            // grace; if none does, the part is sent again then.
                            tracing::warn!(conversation.id = %masked, part = entry.part, "the Graph API's answer was lost; waiting for the part's status before sending it again: {error}");
                            return Ok(PartOutcome::Unconfirmed);
                        }
                        SendError::Token { error } => {
                            tracing::error!(conversation.id = %masked, "the Graph API refused the access token; replies wait until WHATSAPP_ACCESS_TOKEN is replaced: {error}");
                            metrics::counter!("zaguan_outbound_alerts_total", "reason" => "token")
                                .increment(1);
                            // Retried every `token_retry` until `max_attempts` (40 min by
                            // default): a reply older than that is stale anyway.
                            let at = self
                                .retry_later(&entry, self.settings.token_retry, &error)
                                .await?;
                            return Ok(PartOutcome::WaitUntil(at));
                        }
                        SendError::Policy { error } => {
                            tracing::error!(conversation.id = %masked, "WhatsApp quality or policy limit, reply dropped; check the account's quality rating: {error}");
                            metrics::counter!("zaguan_outbound_alerts_total", "reason" => "policy")
                                .increment(1);
                            self.fail(&entry, error).await?;
                            return Ok(PartOutcome::Settled);
                        }
                        SendError::Permanent { error } => {
                            if let Some(fallback) = failures::fallback_for(&entry, &error)
                                && self.store.fall_back(&entry.id, &fallback).await?
                            {
                                tracing::warn!(conversation.id = %masked, part = entry.part, code = error.code, "refused; sent again as its fallback");
                                metrics::counter!("zaguan_outbound_fallbacks_total", "to" => failures::fallback_label(&fallback))
                                    .increment(1);
                                entry.fall_back(&fallback);
                                continue;
                            }
                            tracing::error!(conversation.id = %masked, part = entry.part, "reply refused, not retried: {error}");
                            self.fail(&entry, error).await?;
                            return Ok(PartOutcome::Settled);
                        }
                    }
                }
            }
        }
    }

    /// Schedules the part's next attempt `delay` from now; returns when.
    pub(super) async fn retry_later(
        &self,
        entry: &OutboxEntry,
        delay: Duration,
        error: &GraphError,
    ) -> Result<DateTime<Utc>, StoreError> {
        let at =
            Utc::now() + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::days(1));
        let update = OutboxUpdate::Retry {
            at,
            error: Some(error.clone()),
        };
        self.store.update_outbox(&entry.id, &update).await?;
        Ok(at)
    }

    /// The part failed for good: recorded, and what that means for its conversation (or,
    /// for a staff notice, its requests) handled.
    pub(super) async fn fail(
        &self,
        entry: &OutboxEntry,
        error: GraphError,
    ) -> Result<(), StoreError> {
        failures::undelivered(self.store.as_ref(), entry, &error, Utc::now()).await?;
        self.store
            .update_outbox(&entry.id, &OutboxUpdate::Failed { error })
            .await
            .map(drop)
    }
}

/// Meta's own slow-downs reach every part of the number or the recipient, not only the one
/// refused: 130429 pauses the number, 131056 the recipient, here at once and, through the
/// store, in every other instance at its next poll.
pub(super) async fn back_off(
    limiters: &Limiters,
    store: &(impl OutboxStore + ?Sized),
    phone_number_id: &str,
    entry: &OutboxEntry,
    error: &GraphError,
    delay: Duration,
) {
    let key = match error.code {
        Some(130429) => {
            limiters.pause_number(phone_number_id, delay);
            crate::outbound::limits::number_key(phone_number_id)
        }
        Some(131056) => {
            limiters.pause_recipient(entry.wa_id.as_str(), delay);
            crate::outbound::limits::recipient_key(entry.wa_id.as_str())
        }
        _ => return,
    };
    let until = Utc::now() + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
    if let Err(error) = store.pause_sends(&key, until).await {
        tracing::warn!("a send pause is kept in this instance only, the store failed: {error}");
        metrics::counter!("zaguan_outbound_pause_share_failures_total").increment(1);
    }
}

/// `base · 2^(attempt-1)`, capped, with jitter over its upper half so retries of many
/// conversations do not land together.
pub(super) fn backoff(settings: &OutboundSettings, attempt: u32) -> Duration {
    let exponential = settings
        .base_backoff
        .saturating_mul(1 << attempt.saturating_sub(1).min(20))
        .min(settings.max_backoff);
    let half = exponential / 2;
    half + half.mul_f64(rand::rng().random::<f64>())
}

/// How long a part's attempt waits for its status before it may be sent again.
pub(super) fn grace(settings: &OutboundSettings) -> chrono::Duration {
    chrono::Duration::from_std(settings.unconfirmed_grace).unwrap_or(chrono::Duration::MAX)
}
